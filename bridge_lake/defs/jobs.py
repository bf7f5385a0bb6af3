"""The jobs: lake_job, every default layer of one drive; export_job, its whole-drive export.

The whole-drive export (the `exports` asset) is on demand: it is the largest output of a
drive (about twice its raw recordings with video decoded) and most drives are read from the
lake, scene sets and the player, so the sensor, the schedule, `bridge-lake ingest` and
backfills of lake_job leave it out. Get one from the asset's page in the UI (Materialize, a
partition), by a run of export_job, or with `bridge-lake export --drive ID --out FILE`.
"""

import dagster as dg

EXPORTS = "exports"

lake_job = dg.define_asset_job(
    "lake_job",
    selection=dg.AssetSelection.all() - dg.AssetSelection.assets(EXPORTS),
    description="Materialize every default layer of one drive (partition of `drives`): raw, "
    "normalized, calibrated, scene catalog, scene sets, waypoints. The whole-drive export is "
    "export_job (on demand).",
)

export_job = dg.define_asset_job(
    "export_job",
    selection=dg.AssetSelection.assets(EXPORTS),
    description="On demand: the whole drive as MCAP (bags by config) under "
    "<lake>/exports/drive=<id>/, checked by independent readers.",
)

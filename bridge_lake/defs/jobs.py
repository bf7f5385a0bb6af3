"""lake_job: every asset of one drive; the unit the sensor, the schedule and backfills run."""

import dagster as dg

lake_job = dg.define_asset_job(
    "lake_job",
    selection=dg.AssetSelection.all(),
    description="Materialize every layer of one drive (partition of `drives`).",
)

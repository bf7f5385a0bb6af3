"""The one Definitions object of bridge_lake, loaded by workspace.yaml and `dagster dev`."""

from __future__ import annotations

import dagster as dg

from bridge_lake.defs.calibrated import calibrated
from bridge_lake.defs.executors import lake_executor
from bridge_lake.defs.exports import exports
from bridge_lake.defs.inputs import INPUTS
from bridge_lake.defs.jobs import export_job, lake_job
from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import default_resources
from bridge_lake.defs.scene_sets import scene_sets
from bridge_lake.defs.scenes import scene_catalog
from bridge_lake.defs.schedules import build_stale_schedule
from bridge_lake.defs.sensors import landing_zone_sensor
from bridge_lake.defs.waypoints import waypoints

LAKE_ASSETS = [raw_manifest, normalized, calibrated, scene_catalog, scene_sets, waypoints]
"""The default layers, in pipeline order (lake_job): the sensor, the schedule, ingest and
backfills run these; ingest and the demo report on them."""
ON_DEMAND = [exports]
"""Made only when asked (export_job, the UI, `bridge-lake export`): the whole-drive export."""
ASSETS = [*LAKE_ASSETS, *ON_DEMAND]

defs = dg.Definitions(
    assets=[*INPUTS, *ASSETS],  # the drive's inputs: observed (defs/inputs.py), not materialized
    jobs=[lake_job, export_job],
    sensors=[landing_zone_sensor],
    schedules=[build_stale_schedule([key for a in LAKE_ASSETS for key in a.keys])],
    resources=default_resources(),
    executor=lake_executor(),
)

"""The one Definitions object of bridge_lake, loaded by workspace.yaml and `dagster dev`."""

from __future__ import annotations

import dagster as dg

from bridge_lake.defs.calibrated import calibrated
from bridge_lake.defs.executors import lake_executor
from bridge_lake.defs.exports import exports
from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.landing import landing_drive
from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import default_resources
from bridge_lake.defs.scene_sets import scene_sets
from bridge_lake.defs.scenes import scene_catalog
from bridge_lake.defs.schedules import build_gap_schedule
from bridge_lake.defs.sensors import landing_zone_sensor
from bridge_lake.defs.waypoints import waypoints

ASSETS = [raw_manifest, normalized, calibrated, exports, scene_catalog, scene_sets, waypoints]
"""Every asset, in pipeline order; the demo and the gap schedule take them from here."""

defs = dg.Definitions(
    assets=[landing_drive, *ASSETS],  # landing_drive: observed by the sensor, not materialized
    jobs=[lake_job],
    sensors=[landing_zone_sensor],
    schedules=[build_gap_schedule([key for a in ASSETS for key in a.keys])],
    resources=default_resources(),
    executor=lake_executor(),
)

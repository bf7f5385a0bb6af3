"""Nightly gap backfill: a run for every drive that lacks a materialization of any asset.

Dynamic partitions cannot use `build_schedule_from_partitioned_job`, so the schedule asks the
instance which (asset, drive) pairs are materialized and requests the rest.
"""

import dagster as dg

from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.partitions import drives

GAP_ASSETS_TAG = "bridge_lake/missing_assets"


def missing_by_drive(
    instance: dg.DagsterInstance, asset_keys: list[dg.AssetKey]
) -> dict[str, list[str]]:
    """drive id → the assets (as strings) it has no materialization of."""
    keys = instance.get_dynamic_partitions(drives.name)
    done = {key: instance.get_materialized_partitions(key) for key in asset_keys}
    missing: dict[str, list[str]] = {}
    for drive_id in keys:
        absent = [key.to_user_string() for key in asset_keys if drive_id not in done[key]]
        if absent:
            missing[drive_id] = absent
    return missing


def build_gap_schedule(asset_keys: list[dg.AssetKey]) -> dg.ScheduleDefinition:
    @dg.schedule(
        name="nightly_gap_backfill",
        cron_schedule="0 3 * * *",
        execution_timezone="UTC",
        target=lake_job,
        description="Every night, request a run for each drive with missing assets.",
    )
    def nightly_gap_backfill(
        context: dg.ScheduleEvaluationContext,
    ) -> list[dg.RunRequest] | dg.SkipReason:
        missing = missing_by_drive(context.instance, asset_keys)
        if not missing:
            return dg.SkipReason("every drive has every asset")
        day = context.scheduled_execution_time.strftime("%Y%m%d")
        return [
            dg.RunRequest(
                partition_key=drive_id,
                run_key=f"gaps-{day}-{drive_id}",
                tags={GAP_ASSETS_TAG: ",".join(absent)[:200]},
            )
            for drive_id, absent in sorted(missing.items())
        ]

    return nightly_gap_backfill

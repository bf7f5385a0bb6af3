"""Nightly gap backfill: a run for every drive that lacks a materialization of any asset.

Dynamic partitions cannot use `build_schedule_from_partitioned_job`, so the schedule asks the
instance which (asset, drive) pairs are materialized and requests the rest.

A drive whose files fail a blocking check (no drive.yaml, records lost, no rig for its
vehicle) would lack assets forever and be requested every night to fail the same way. So the
schedule remembers failures by the drive's fingerprint (the landing zone's listing of its
files, as the sensor tags its runs): a drive is skipped while a run of it with its current
fingerprint failed a blocking check. The memory is the instance's own run records and their
events, bounded by the instance's run retention; no cursor grows with the fleet. It ends when
the files change (a new fingerprint) or when a person runs the drive by hand and it passes.
"""

from collections.abc import Iterator, Mapping

import dagster as dg

from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import PARTITION_TAG, LandingZoneResource
from bridge_lake.defs.sensors import FINGERPRINT_TAG, REASON_TAG

GAP_ASSETS_TAG = "bridge_lake/missing_assets"
QUERY_CHUNK = 500
"""Drives per run-records query (SQL `IN` lists stay small)."""


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


def blocking_failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """`asset:check` of every blocking ERROR check that failed in the run."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    failed = set()
    for record in records:
        event = record.event_log_entry.dagster_event
        ev = event.event_specific_data if event is not None else None
        error = ev is not None and ev.severity == dg.AssetCheckSeverity.ERROR
        if error and ev.blocking and not ev.passed:
            failed.add(f"{ev.asset_key.to_user_string()}:{ev.check_name}")
    return sorted(failed)


def remembered_failures(
    instance: dg.DagsterInstance, fingerprints: Mapping[str, str]
) -> dict[str, str]:
    """drive id → why it is skipped, for the drives (of `fingerprints`: drive → its current
    fingerprint) that have a failed run with that fingerprint whose blocking check failed."""
    remembered: dict[str, str] = {}
    names = sorted(fingerprints)
    for i in range(0, len(names), QUERY_CHUNK):
        chunk = names[i : i + QUERY_CHUNK]
        runs = instance.get_run_records(
            dg.RunsFilter(
                statuses=[dg.DagsterRunStatus.FAILURE],
                tags={PARTITION_TAG: chunk, FINGERPRINT_TAG: [fingerprints[d] for d in chunk]},
            )
        )
        for record in runs:
            run = record.dagster_run
            drive = run.tags[PARTITION_TAG]
            if drive in remembered or run.tags[FINGERPRINT_TAG] != fingerprints[drive]:
                continue
            failed = blocking_failures(instance, run.run_id)
            if failed:
                remembered[drive] = f"run {run.run_id} failed {', '.join(failed)}"
    return remembered


def gap_requests(
    missing: Mapping[str, list[str]], fingerprints: Mapping[str, str], day: str
) -> Iterator[dg.RunRequest]:
    for drive_id, absent in sorted(missing.items()):
        fp = fingerprints.get(drive_id)
        yield dg.RunRequest(
            partition_key=drive_id,
            run_key=f"gaps-{day}-{drive_id}",
            tags={
                GAP_ASSETS_TAG: ",".join(absent)[:200],
                REASON_TAG: "gaps",
                **({FINGERPRINT_TAG: fp} if fp is not None else {}),
            },
        )


def build_gap_schedule(asset_keys: list[dg.AssetKey]) -> dg.ScheduleDefinition:
    @dg.schedule(
        name="nightly_gap_backfill",
        cron_schedule="0 3 * * *",
        execution_timezone="UTC",
        target=lake_job,
        description="Every night, request a run for each drive with missing assets, except "
        "drives whose current files already failed a blocking check.",
    )
    def nightly_gap_backfill(
        context: dg.ScheduleEvaluationContext, landing: LandingZoneResource
    ) -> list[dg.RunRequest] | dg.SkipReason:
        missing = missing_by_drive(context.instance, asset_keys)
        if not missing:
            return dg.SkipReason("every drive has every asset")
        scan = landing.get().scan()
        fingerprints = {d: scan.drives[d] for d in missing if d in scan.drives}
        skipped = remembered_failures(context.instance, fingerprints)
        for drive_id, why in sorted(skipped.items()):
            context.log.info(
                f"drive {drive_id} skipped: its files are unchanged since {why}; it runs "
                "again when they change or when it is run by hand"
            )
        day = context.scheduled_execution_time.strftime("%Y%m%d")
        todo = {d: absent for d, absent in missing.items() if d not in skipped}
        if not todo:
            return dg.SkipReason(
                f"{len(skipped)} drives with missing assets skipped: their current files "
                f"failed a blocking check ({', '.join(sorted(skipped)[:10])})"
            )
        return list(gap_requests(todo, fingerprints, day))

    return nightly_gap_backfill

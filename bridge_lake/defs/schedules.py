"""Nightly: bring every stale drive up to date.

Each night the schedule observes every drive's inputs (its folder, its vehicle's rig, the
ADTF stream mapping: defs/inputs.py) and asks Dagster which of each drive's assets are stale
or missing (defs/staleness.py: a new code version, an input with a new data version, no
materialization, an output gone from the lake), and requests one run per such drive of
exactly those assets and what they feed. A drive run any way before (ingest, the sensor, a
backfill from the UI) with unchanged code and inputs is fresh and not requested.

A drive whose files fail a blocking check (no drive.yaml, records lost) would stay missing
forever and be requested every night to fail the same way. So the schedule remembers
failures by the drive's fingerprint (the landing zone's listing of its files, as ingest,
the sensor and this schedule tag their runs): a drive is skipped while a run of it with its
current fingerprint failed a blocking check. The memory is the instance's own run records
and their events, bounded by the instance's run retention; no cursor grows with the fleet.
It ends when the files change (a new fingerprint) or when a person runs the drive by hand
and it passes.
"""

from collections.abc import Callable, Iterator, Mapping

import dagster as dg

from bridge_lake.defs.inputs import current_inputs, drive_facts, observe
from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import PARTITION_TAG, LakeResource, LandingZoneResource
from bridge_lake.defs.sensors import FINGERPRINT_TAG, REASON_TAG
from bridge_lake.defs.staleness import OutOfDate, Staleness

STALE_ASSETS_TAG = "bridge_lake/stale_assets"
QUERY_CHUNK = 500
"""Drives per run-records query (SQL `IN` lists stay small)."""


def out_of_date(
    instance: dg.DagsterInstance,
    asset_graph,
    asset_keys: list[dg.AssetKey],
    exists: Callable[[str], bool] | None = None,
) -> dict[str, OutOfDate]:
    """drive id → what of it is out of date, for every registered drive that has any."""
    stale = Staleness(instance, asset_graph, asset_keys, exists)
    out = {}
    for drive_id in instance.get_dynamic_partitions(drives.name):
        ood = stale.drive(drive_id)
        if ood.keys:
            out[drive_id] = ood
    return out


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


def stale_requests(
    todo: Mapping[str, OutOfDate], fingerprints: Mapping[str, str], day: str
) -> Iterator[dg.RunRequest]:
    for drive_id, ood in sorted(todo.items()):
        fp = fingerprints.get(drive_id)
        yield dg.RunRequest(
            partition_key=drive_id,
            run_key=f"stale-{day}-{drive_id}",
            asset_selection=sorted(ood.keys),
            tags={
                STALE_ASSETS_TAG: ood.summary()[:200],
                REASON_TAG: "stale",
                **({FINGERPRINT_TAG: fp} if fp is not None else {}),
            },
        )


def build_stale_schedule(asset_keys: list[dg.AssetKey]) -> dg.ScheduleDefinition:
    @dg.schedule(
        name="nightly_stale_drives",
        cron_schedule="0 3 * * *",
        execution_timezone="UTC",
        target=lake_job,
        description="Every night: observe each drive's inputs (folder, rig, ADTF mapping), then "
        "request a run of exactly the assets Dagster finds stale or missing, with what they "
        "feed, for each drive that has any; drives whose current files already failed a "
        "blocking check are skipped.",
    )
    def nightly_stale_drives(
        context: dg.ScheduleEvaluationContext, landing: LandingZoneResource, lake: LakeResource
    ) -> list[dg.RunRequest] | dg.SkipReason:
        zone = landing.get()
        scan = zone.scan()
        known = [
            d for d in context.instance.get_dynamic_partitions(drives.name) if d in scan.drives
        ]
        facts = {d: drive_facts(zone, d) for d in known}
        found = {d: (scan.drives[d], *facts[d]) for d in known}
        observed = observe(context.instance, current_inputs(found, landing.adtf_mapping))
        if observed:
            context.log.info(f"{observed} input observations changed")
        store = lake.get()
        todo = out_of_date(context.instance, context.repository_def.asset_graph, asset_keys,
                           store.fs.exists)  # fmt: skip
        if not todo:
            return dg.SkipReason("every drive is up to date")
        fingerprints = {d: scan.drives[d] for d in todo if d in scan.drives}
        skipped = remembered_failures(context.instance, fingerprints)
        for drive_id, why in sorted(skipped.items()):
            context.log.info(
                f"drive {drive_id} skipped: its files are unchanged since {why}; it runs "
                "again when they change or when it is run by hand"
            )
        day = context.scheduled_execution_time.strftime("%Y%m%d")
        todo = {d: ood for d, ood in todo.items() if d not in skipped}
        if not todo:
            return dg.SkipReason(
                f"{len(skipped)} out-of-date drives skipped: their current files "
                f"failed a blocking check ({', '.join(sorted(skipped)[:10])})"
            )
        return list(stale_requests(todo, fingerprints, day))

    return nightly_stale_drives

"""Watch the landing zone: a new or changed drive folder becomes a partition and a run.

The cursor maps each drive id to the fingerprint of its file listing, so an unchanged drive
is never requested twice, and a drive whose files change (added, resized, touched) is
requested again. A drive is requested only once its fingerprint has stayed the same for one
sensor interval: a folder that is still being uploaded changes between ticks and waits,
instead of launching a run per tick on half the data. The run key carries the fingerprint,
so even a lost cursor cannot launch a duplicate run for the same content.
"""

import json

import dagster as dg

from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LandingZoneResource

FINGERPRINT_TAG = "bridge_lake/drive_fingerprint"
REASON_TAG = "bridge_lake/reason"


@dg.sensor(
    target=lake_job,
    minimum_interval_seconds=30,
    description="New or changed drive folders in the landing zone → add partition + run.",
)
def landing_zone_sensor(
    context: dg.SensorEvaluationContext, landing: LandingZoneResource
) -> dg.SensorResult | dg.SkipReason:
    state = json.loads(context.cursor) if context.cursor else {}
    done: dict[str, str] = state.get("done", {})
    pending: dict[str, str] = state.get("pending", {})
    scan = landing.get().scan()
    for name, why in sorted(scan.rejected.items()):
        context.log.warning(f"landing zone folder {name!r} ignored: {why}")
    requests, settling = [], {}
    for drive_id, fp in sorted(scan.drives.items()):
        if done.get(drive_id) == fp:
            continue
        if pending.get(drive_id) != fp:
            settling[drive_id] = fp  # new or still changing: look again next tick
            continue
        reason = "changed" if drive_id in done else "new"
        requests.append(
            dg.RunRequest(
                partition_key=drive_id,
                run_key=f"{drive_id}@{fp}",
                tags={FINGERPRINT_TAG: fp, REASON_TAG: reason},
            )
        )
        done[drive_id] = fp
    cursor = json.dumps({"done": done, "pending": settling}, sort_keys=True, separators=(",", ":"))
    if not requests:
        why = (
            f"{len(settling)} drives settling (changed since the last tick)"
            if settling
            else f"no new or changed drives among {len(scan.drives)}"
        )
        return dg.SensorResult(skip_reason=why, cursor=cursor)
    known = set(context.instance.get_dynamic_partitions(drives.name))
    to_add = [r.partition_key for r in requests if r.partition_key not in known]
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[drives.build_add_request(to_add)] if to_add else [],
        cursor=cursor,
    )

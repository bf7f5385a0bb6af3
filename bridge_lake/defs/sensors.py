"""Watch the landing zone: a new or changed drive folder becomes a partition and a run.

What was requested is kept in the instance, not in the cursor: a run request for a drive
comes with an observation of `landing_drive` (bridge_lake.defs.landing) whose data version
is the fingerprint of the folder's file listing. A drive whose current fingerprint differs
from its observed one (or that has none) is new or changed. It is requested once its
fingerprint has stayed the same for one sensor interval: a folder that is still being
uploaded changes between ticks and waits, instead of launching a run per tick on half the
data.

The cursor only remembers the drives waiting for that one interval, as 6-byte digests of
drive and fingerprint, and a tick takes at most MAX_DRIVES_PER_TICK of them: the cursor stays
a few KB and the tick's requests bounded whatever the fleet, and a landing zone of thousands
of drives switched on for the first time is requested over the next ticks. A lost cursor
costs one more interval, never a duplicate request; the run key carries the fingerprint too.
"""

import base64
import hashlib
import json

import dagster as dg

from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.landing import observation, observed_fingerprints
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LandingZoneResource

FINGERPRINT_TAG = "bridge_lake/drive_fingerprint"
REASON_TAG = "bridge_lake/reason"
MAX_DRIVES_PER_TICK = 500
"""Run requests per tick, and drives settling in the cursor (8 characters each)."""
CURSOR_KEY = "settling"
_DIGEST_BYTES = 6
"""48 bits: two settling drives collide with odds below one in 10^8 per tick."""


def settling_digest(drive_id: str, fp: str) -> bytes:
    return hashlib.sha256(f"{drive_id}@{fp}".encode()).digest()[:_DIGEST_BYTES]


def encode_settling(digests: list[bytes]) -> str:
    return json.dumps({CURSOR_KEY: base64.b64encode(b"".join(digests)).decode()})


def decode_settling(cursor: str | None) -> set[bytes]:
    """The digests a cursor holds; none for no cursor or one this sensor cannot read (an old
    format costs one more interval)."""
    try:
        blob = base64.b64decode(json.loads(cursor or "{}").get(CURSOR_KEY, ""), validate=True)
    except (ValueError, AttributeError, TypeError):
        return set()
    return {blob[i : i + _DIGEST_BYTES] for i in range(0, len(blob), _DIGEST_BYTES)}


@dg.sensor(
    target=lake_job,
    minimum_interval_seconds=30,
    description="New or changed drive folders in the landing zone → add partition + run.",
)
def landing_zone_sensor(
    context: dg.SensorEvaluationContext, landing: LandingZoneResource
) -> dg.SensorResult:
    settling = decode_settling(context.cursor)
    scan = landing.get().scan()
    for name, why in sorted(scan.rejected.items()):
        context.log.warning(f"landing zone folder {name!r} ignored: {why}")
    observed = observed_fingerprints(context.instance)
    pending = [(d, fp) for d, fp in scan.drives.items() if observed.get(d) != fp]
    ready = [(d, fp) for d, fp in pending if settling_digest(d, fp) in settling]
    ready = ready[:MAX_DRIVES_PER_TICK]
    asked = {d for d, _ in ready}
    waiting = [(d, fp) for d, fp in pending if d not in asked]
    next_settling = [settling_digest(d, fp) for d, fp in waiting[:MAX_DRIVES_PER_TICK]]
    known = set(context.instance.get_dynamic_partitions(drives.name)) if ready else set()
    requests = [
        dg.RunRequest(
            partition_key=d,
            run_key=f"{d}@{fp}",
            tags={FINGERPRINT_TAG: fp, REASON_TAG: "changed" if d in known else "new"},
        )
        for d, fp in ready
    ]
    to_add = [d for d in asked if d not in known]
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[drives.build_add_request(sorted(to_add))] if to_add else [],
        asset_events=[observation(d, fp, *scan.totals.get(d, (0, 0))) for d, fp in ready],
        cursor=encode_settling(next_settling),
        skip_reason=None if requests else _why_nothing(len(waiting), len(scan.drives)),
    )


def _why_nothing(waiting: int, total: int) -> str:
    if not waiting:
        return f"no new or changed drives among {total}"
    later = waiting - MAX_DRIVES_PER_TICK
    more = f"; {later} more wait for the next ticks" if later > 0 else ""
    return f"{min(waiting, MAX_DRIVES_PER_TICK)} drives settling (new or changed){more}"

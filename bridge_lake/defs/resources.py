"""The two I/O resources: where the lake is and where drives land (local or s3://)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from bridge_lake import settings
from bridge_lake.lake import Lake
from bridge_lake.lake.locks import LockHolder, drive_lock
from bridge_lake.landing import LandingZone

PARTITION_TAG = "dagster/partition"
LOCK_WAIT_S = 2 * 3600.0
"""How long a step waits for another run of its drive (a 30-minute drive normalizes in
minutes; a run stuck for hours is better failed with the holder's name than waited on)."""
OWNER = "dagster run {run_id} ({job})"
"""A run's name in the lock it holds (LockHolder.owner)."""
OWNER_RUN = re.compile(r"^dagster run ([0-9a-f-]{36}) \(")


def run_ended(instance: dg.DagsterInstance) -> Callable[[LockHolder], bool]:
    """Whether a lock's holder is a run this instance records as finished (failed, canceled,
    succeeded): its process is gone even when it ran on another host (a lost Celery worker,
    a run that run monitoring failed), so its lock is taken over at once, not after the
    lease. A holder that is no run of this instance is never judged here."""

    def ended(holder: LockHolder) -> bool:
        m = OWNER_RUN.match(holder.owner)
        run = instance.get_run_by_id(m.group(1)) if m else None
        return run is not None and run.is_finished

    return ended


class LakeResource(dg.ConfigurableResource):
    """The Parquet lake. `root` is a local path or `s3://bucket/prefix`.

    While a run's step holds this resource it holds its drive's lock in the lake
    (bridge_lake.lake.locks): runs of different drives go side by side, two runs of one
    drive take turns, the later one waiting up to `lock_wait_s` and then failing with the
    holder's name. The multiprocess executor initializes resources per step (steps of one
    drive take turns too); the in-process executor once per run (the whole run holds it).
    """

    root: str
    storage_options: dict[str, Any] = {}
    lock_wait_s: float = LOCK_WAIT_S

    def get(self) -> Lake:
        return Lake(self.root, self.storage_options)

    @contextlib.contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[LakeResource]:
        run = context.run
        drive = run.tags.get(PARTITION_TAG) if run is not None else None
        if drive is None:  # not a drive's run (nothing partitioned by drive is written)
            yield self
            return

        def waiting(holder: LockHolder | None) -> None:
            context.log.info(
                f"drive {drive} is being written by {holder or 'another run'}; waiting up to "
                f"{self.lock_wait_s:.0f} s for it"
            )

        owner = OWNER.format(run_id=run.run_id, job=run.job_name)
        with drive_lock(
            self.get(),
            drive,
            owner=owner,
            wait_s=self.lock_wait_s,
            on_wait=waiting,
            ended=run_ended(context.instance),
        ):
            yield self


class LandingZoneResource(dg.ConfigurableResource):
    """Where drive folders arrive. `root` is a local path or `s3://bucket/prefix`.

    `adtf_mapping`: the user's ADTF stream mapping YAML (a local path), matched after a
    drive's own (drive.yaml `mapping`) and before the shipped default; unset, the
    `BRIDGE_LAKE_ADTF_MAPPING` variable of the run's environment (see adtf_mapping).
    """

    root: str
    storage_options: dict[str, Any] = {}
    adtf_mapping: str | None = None

    def get(self) -> LandingZone:
        return LandingZone(self.root, self.storage_options)


def default_resources() -> dict[str, dg.ConfigurableResource]:
    """Resources configured from the environment (see bridge_lake.settings)."""
    lake, landing = settings.lake_root(), settings.landing_root()
    return {
        "lake": LakeResource(root=lake, storage_options=settings.storage_options(lake)),
        "landing": LandingZoneResource(
            root=landing,
            storage_options=settings.storage_options(landing),
            adtf_mapping=settings.adtf_mapping(),
        ),
    }

"""The two I/O resources: where the lake is and where drives land (local or s3://)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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

        owner = f"dagster run {run.run_id} ({run.job_name})"
        with drive_lock(self.get(), drive, owner=owner, wait_s=self.lock_wait_s, on_wait=waiting):
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

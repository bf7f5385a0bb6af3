"""The two I/O resources: where the lake is and where drives land (local or s3://)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from bridge_lake import settings
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone


class LakeResource(dg.ConfigurableResource):
    """The Parquet lake. `root` is a local path or `s3://bucket/prefix`."""

    root: str
    storage_options: dict[str, Any] = {}

    def get(self) -> Lake:
        return Lake(self.root, self.storage_options)


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

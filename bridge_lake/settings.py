"""Run-time settings from the environment, with defaults that make a laptop demo just work.

| variable | default | meaning |
|---|---|---|
| BRIDGE_LAKE_ROOT | ./demo/lake | lake root: a local path or s3://bucket/prefix |
| BRIDGE_LAKE_LANDING | ./demo/landing | landing zone: a local path or s3://bucket/prefix |
| BRIDGE_LAKE_S3_ENDPOINT | (unset) | S3 endpoint URL for non-AWS stores (MinIO, moto, Ceph) |
| BRIDGE_LAKE_ADTF_MAPPING | (unset) | user ADTF stream mapping YAML (local path; see below) |
| BRIDGE_LAKE_EXECUTOR | multiprocess | where lake_job's steps run: `multiprocess` or `celery` |
| BRIDGE_LAKE_CELERY_BROKER | (unset) | Celery broker and result backend, e.g. redis://host:6379/0 |

The ADTF mapping layers match in the order: the drive's own file (drive.yaml `mapping`), the
user file (this variable, or the landing resource's `adtf_mapping` in Dagster), the shipped
default (`bridge_lake.normalize.adtf_mapping`).

Credentials for S3 come from the usual AWS variables or profiles, read by s3fs itself.
"""

from __future__ import annotations

import os
from typing import Any

from bridge_lake.errors import SettingsError

DEFAULT_LAKE = "demo/lake"
DEFAULT_LANDING = "demo/landing"


def lake_root() -> str:
    return os.environ.get("BRIDGE_LAKE_ROOT", DEFAULT_LAKE)


def landing_root() -> str:
    return os.environ.get("BRIDGE_LAKE_LANDING", DEFAULT_LANDING)


EXECUTORS = ("in_process", "multiprocess", "celery")


def executor() -> str:
    """The step executor of lake_job, one of EXECUTORS (see bridge_lake.defs.executors)."""
    name = os.environ.get("BRIDGE_LAKE_EXECUTOR", "").strip() or EXECUTORS[0]
    if name not in EXECUTORS:
        raise SettingsError(f"BRIDGE_LAKE_EXECUTOR={name!r}: must be one of {', '.join(EXECUTORS)}")
    if name == "celery" and not os.environ.get("BRIDGE_LAKE_CELERY_BROKER"):
        raise SettingsError(
            "BRIDGE_LAKE_EXECUTOR=celery needs BRIDGE_LAKE_CELERY_BROKER (e.g. redis://host:6379/0)"
        )
    return name


def adtf_mapping() -> str | None:
    """The user ADTF mapping file (`bridge_lake.normalize.adtf_mapping`), or None."""
    return os.environ.get("BRIDGE_LAKE_ADTF_MAPPING") or None


def storage_options(url: str) -> dict[str, Any]:
    """fsspec options for `url`: an endpoint override for S3-compatible stores, else none."""
    endpoint = os.environ.get("BRIDGE_LAKE_S3_ENDPOINT")
    if url.startswith("s3://") and endpoint:
        return {"client_kwargs": {"endpoint_url": endpoint}}
    return {}

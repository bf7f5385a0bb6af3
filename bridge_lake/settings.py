"""Run-time settings from the environment, with defaults that make a laptop demo just work.

| variable | default | meaning |
|---|---|---|
| BRIDGE_LAKE_ROOT | ./demo/lake | lake root: a local path or s3://bucket/prefix |
| BRIDGE_LAKE_LANDING | ./demo/landing | landing zone: a local path or s3://bucket/prefix |
| BRIDGE_LAKE_S3_ENDPOINT | (unset) | S3 endpoint URL for non-AWS stores (MinIO, moto, Ceph) |

Credentials for S3 come from the usual AWS variables or profiles, read by s3fs itself.
"""

from __future__ import annotations

import os
from typing import Any

DEFAULT_LAKE = "demo/lake"
DEFAULT_LANDING = "demo/landing"


def lake_root() -> str:
    return os.environ.get("BRIDGE_LAKE_ROOT", DEFAULT_LAKE)


def landing_root() -> str:
    return os.environ.get("BRIDGE_LAKE_LANDING", DEFAULT_LANDING)


def storage_options(url: str) -> dict[str, Any]:
    """fsspec options for `url`: an endpoint override for S3-compatible stores, else none."""
    endpoint = os.environ.get("BRIDGE_LAKE_S3_ENDPOINT")
    if url.startswith("s3://") and endpoint:
        return {"client_kwargs": {"endpoint_url": endpoint}}
    return {}

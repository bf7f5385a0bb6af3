"""Helpers shared by every asset's checks, so each asset declares only what it checks."""

from __future__ import annotations

import warnings

import dagster as dg

from bridge_lake.defs.partitions import drives


def check_spec(name: str, asset: str, description: str, *, blocking: bool) -> dg.AssetCheckSpec:
    """A check recorded per drive partition.

    `partitions_def` on a check is a Dagster preview feature; without it the UI keeps only
    the latest result of the asset instead of one per drive, which is what people look for.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=dg.PreviewWarning)
        return dg.AssetCheckSpec(
            name, asset=asset, description=description, blocking=blocking, partitions_def=drives
        )

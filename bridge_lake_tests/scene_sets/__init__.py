"""Tests of scene sets, fault injection and replay checks, and the helpers they share: a
writable lake beside the session's read-only synthetic lake, with a scene catalog."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa

from bridge_lake.export.exporter import drive_span
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas.scenes import CATALOG

CATALOG_SCHEMA = CATALOG.schema
"""scenes/catalog as the scene_catalog asset writes it (written here by hand)."""
NS = 1_000_000_000


def write_catalog(lake: Lake, drive: str, scenes: list[tuple[str, float, float, list[str]]]):
    """Catalog rows (scene id, start and end in seconds from the drive's start, tags)."""
    first = drive_span(lake, drive)[0]
    rows = [
        {
            "scene_id": sid,
            "t_start_ns": first + round(a * NS),
            "t_end_ns": first + round(b * NS),
            "tags": tags,
            "score": 0.5 + i,
            "rules": ["hard_braking.sql"],
            "rule_hashes": ["ab" * 32],
        }
        for i, (sid, a, b, tags) in enumerate(scenes)
    ]
    lake.write_partition("scenes", "catalog", drive, pa.Table.from_pylist(rows, CATALOG_SCHEMA))


def writable_lake(source: Lake, root: Path) -> Lake:
    """The layers of `source` hard-linked into `root` (the lake never rewrites a file in
    place: partitions are replaced by new files, so the source stays untouched)."""
    for layer in ("raw", "normalized", "calibrated"):

        def link(src: str, dst: str) -> None:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        shutil.copytree(Path(source.base) / layer, root / layer, copy_function=link)
    return Lake(str(root))


def scene_lake(synthetic_lake, root: Path) -> tuple[Lake, dict[str, str]]:
    """A writable copy of the synthetic lake with two 2 s scenes per drive; source → drive."""
    lake = writable_lake(synthetic_lake.lake, root)
    drives = {src: d.drive_id for src, d in synthetic_lake.drives.items()}
    for drive in drives.values():
        write_catalog(
            lake,
            drive,
            [(f"{drive}-a", 1.0, 3.0, ["braking"]), (f"{drive}-b", 5.0, 7.0, ["turn"])],
        )
    return lake, drives

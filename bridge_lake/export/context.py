"""The lake facts of one drive that every export step shares, read once per step.

An export (each format of the exports asset), a scene set (every scene and variant) and
their health checks all need the drive's drive.yaml row (raw/drives), its stream catalog
(normalized/streams), its time span, its static transforms (calibrated/tf_static) and its
topic mapping. Before, each function read them itself: meta, catalog and tf_static two or
three times per export and again per format and per scene. A `DriveContext` reads each once,
when first asked for (so errors come in the order the export meets them), and is handed to
every step of the run.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from bridge_lake.export.mapping import Mapping, default_mapping_path, load_mapping
from bridge_lake.export.source import ExportError
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas import RAW_DRIVES, STREAMS

TF_STATIC = ("calibrated", "tf_static")


@dataclass
class DriveContext:
    lake: Lake
    drive: str
    meta: dict[str, Any]
    """the drive's raw/drives row (drive.yaml and file totals)"""
    _mappings: dict[str | None, Mapping] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, lake: Lake, drive: str) -> DriveContext:
        """The drive's context; ExportError when the lake has no such drive."""
        if not lake.has_partition("raw", RAW_DRIVES.name, drive):
            known = lake.drives("raw", RAW_DRIVES.name)
            raise ExportError(
                f"drive {drive!r} is not in the lake {lake.root} "
                f"(drives: {', '.join(known) or 'none'})"
            )
        return cls(lake, drive, lake.read_partition("raw", RAW_DRIVES.name, drive).to_pylist()[0])

    @functools.cached_property
    def streams(self) -> list[dict[str, Any]]:
        """The stream catalog: one normalized/streams row per stream."""
        return self.lake.read_partition("normalized", STREAMS.name, self.drive).to_pylist()

    @functools.cached_property
    def span(self) -> tuple[int, int]:
        """First and last master time of any stream."""
        firsts = [s["first_time_ns"] for s in self.streams if s["first_time_ns"] is not None]
        lasts = [s["last_time_ns"] for s in self.streams if s["last_time_ns"] is not None]
        if not firsts or not lasts:
            raise ExportError(f"drive {self.drive} has no timed rows to export")
        return int(min(firsts)), int(max(lasts))

    @functools.cached_property
    def tf_static(self) -> pa.Table | None:
        """calibrated/tf_static, None when the drive has no rig."""
        if not self.lake.has_partition(*TF_STATIC, self.drive):
            return None
        return self.lake.read_partition(*TF_STATIC, self.drive)

    @property
    def static_frames(self) -> set[str]:
        """Child frames of the static transforms."""
        tf = self.tf_static
        return set() if tf is None else set(tf.column("child_frame").to_pylist())

    def mapping(self, given: str | os.PathLike | None) -> Mapping:
        """The topic mapping `given`, else the default of the drive's source (loaded once)."""
        key = None if given is None else os.fspath(given)
        if key not in self._mappings:
            source = str(self.meta.get("source"))
            self._mappings[key] = load_mapping(given or default_mapping_path(source))
        return self._mappings[key]


__all__ = ["DriveContext"]

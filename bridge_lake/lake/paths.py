"""Where things live in the lake, and the validation that keeps input inside its root.

Every path the lake writes is built here. Drive ids come from folder names in the landing
zone, i.e. from input, so they are validated before they reach a path or a partition key.
"""

from __future__ import annotations

import posixpath
import re

from bridge_lake.errors import DriveIdError, LakePathError

DRIVE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""Drive ids: safe as a file name, a Hive partition value, a Dagster partition key and a CLI
list item (no `/`, `,`, `|`, `=` or spaces; cannot start with `.` so `..` is impossible)."""

LAYERS = ("raw", "normalized", "calibrated", "scenes")
"""Table layers of shared/ARCHITECTURE.md; binary exports live under `exports/`."""

MAX_NAME_LENGTH = 64
"""Layer and table names: at most this many characters of [a-z0-9_], starting with a letter."""
_NAME_PATTERN = re.compile(rf"^[a-z][a-z0-9_]{{0,{MAX_NAME_LENGTH - 1}}}$")
STAGING_DIR = "_staging"
RECOVERED_DIR = "_recovered"
"""Scratch area for atomic writes, outside every table so no reader's glob can see it."""
LOCKS_DIR = "_locks"
"""One lock per drive (bridge_lake.lake.locks), outside every table like the staging area."""


def validate_drive_id(drive_id: str) -> str:
    """Return `drive_id` unchanged if it is safe, else raise DriveIdError naming it."""
    if not isinstance(drive_id, str) or not DRIVE_ID_PATTERN.fullmatch(drive_id):
        raise DriveIdError(
            f"invalid drive id {drive_id!r}: must match {DRIVE_ID_PATTERN.pattern} "
            "(letters, digits, '_', '.', '-'; starting with a letter or digit; at most 128)"
        )
    return drive_id


def validate_name(kind: str, name: str) -> str:
    """Layer and table names are code constants, but check them anyway: they become paths."""
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise LakePathError(f"invalid {kind} name {name!r}: must match {_NAME_PATTERN.pattern}")
    return name


def is_valid_name(name: str) -> bool:
    return bool(_NAME_PATTERN.fullmatch(name))


def table_dir(root: str, layer: str, table: str) -> str:
    """`<root>/<layer>/<table>`: the folder DuckDB and polars scan with Hive partitioning."""
    if layer not in LAYERS:
        raise LakePathError(f"unknown layer {layer!r}; expected one of {', '.join(LAYERS)}")
    return posixpath.join(root.rstrip("/"), layer, validate_name("table", table))


def partition_dir(root: str, layer: str, table: str, drive_id: str) -> str:
    """`<root>/<layer>/<table>/drive=<drive_id>`."""
    return posixpath.join(table_dir(root, layer, table), f"drive={validate_drive_id(drive_id)}")


def part_name(index: int) -> str:
    """`part-<n>.parquet`, zero-padded so lexical order is write order."""
    if index < 0:
        raise LakePathError(f"negative part index {index}")
    return f"part-{index:05d}.parquet"


def exports_dir(root: str, drive_id: str) -> str:
    """`<root>/exports/drive=<drive_id>`: ROS bags and MCAP files of one drive."""
    return posixpath.join(root.rstrip("/"), "exports", f"drive={validate_drive_id(drive_id)}")


def report_path(drive_id: str, page: str) -> str:
    """`reports/drive=<drive_id>/<page>.html`, relative to the lake root: a drive's HTML
    report of one layer (normalized, calibrated, waypoints)."""
    return f"reports/drive={validate_drive_id(drive_id)}/{validate_name('report', page)}.html"


def recovered_dir(root: str, drive_id: str) -> str:
    """`<root>/raw/_recovered/drive=<drive_id>`: copies of the drive's recordings that were
    cut short, rebuilt by `recover` (beside the raw layer's tables, never over the landing
    files; the `_` keeps it out of the table listings)."""
    return posixpath.join(
        root.rstrip("/"), "raw", RECOVERED_DIR, f"drive={validate_drive_id(drive_id)}"
    )


def safe_relative(path: str) -> str:
    """Normalise a relative POSIX path from input and refuse anything that leaves its root."""
    norm = posixpath.normpath(path.replace("\\", "/"))
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        raise LakePathError(f"path {path!r} escapes its root")
    return norm

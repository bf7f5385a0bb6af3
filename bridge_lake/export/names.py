"""An export's file name and its format: one rule for the CLI, the API and the lake.

A `.bag` is a ROS 1 bag (bag1): that is the file `rosbag info`, `rosbag play` and every ROS 1
tool open, and the name ROS 1 gives its recordings. A ROS 2 bag (bag2) is not a file but a
folder (metadata.yaml beside .mcap or .db3 storage files), so it takes a name without a
suffix; an `.mcap` is a single MCAP file. `--out x.bag` without `--format` therefore writes
a ROS 1 bag, and a suffix that names another format than `--format` is refused rather than
written under a name that lies about its content (issue 31: an MCAP called x.bag).
"""

from __future__ import annotations

import os
from pathlib import Path

from bridge_lake.export.source import ExportError

SUFFIX = {"mcap": ".mcap", "bag1": ".bag", "bag2": ""}
"""The name suffix of each format's output (a ROS 2 bag is a folder)."""
NAMED = {suffix: fmt for fmt, suffix in SUFFIX.items() if suffix}
"""The suffixes that name a format: .mcap and .bag."""
DEFAULT = "mcap"
"""The format of an output whose name names none (and no --format)."""
WHAT = {"mcap": "an MCAP file", "bag1": "a ROS 1 bag"}


def output_format(out: str | os.PathLike, fmt: str | None = None) -> str:
    """The format an export to `out` writes: `fmt` when given, else the one its suffix
    names (case-insensitive), else MCAP. A suffix naming another format than `fmt` is an
    ExportError that says both ways out."""
    path = Path(out)
    named = NAMED.get(path.suffix.lower())
    if fmt is None:
        return named or DEFAULT
    if named is None or named == fmt:
        return fmt
    hint = {
        "bag2": "a ROS 2 bag is a folder: give it a name without a suffix",
        "tum": "TUM trajectories go into a folder: give it a name without a suffix",
    }.get(fmt, f"name it {path.stem}{SUFFIX.get(fmt, '')}")
    raise ExportError(
        f"--out {path.name} names {WHAT[named]} (--format {named}), but --format is {fmt}: "
        f"{hint}, or leave out --format"
    )


__all__ = ["DEFAULT", "SUFFIX", "output_format"]

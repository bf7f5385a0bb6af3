"""NCLT CSV logs (gps, ms25, odometry, covariances, ground truth, ...), every kind, parsed
in small blocks too so lines span block boundaries.

Input: one selector byte (kind and block size), then the file's bytes."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.formats.nclt.csv_tables import COLUMNS, load_table
from bridge_lake.formats.nclt.kinds import nclt_kind
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 16 << 10
KINDS = sorted(COLUMNS)


def seeds(work: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(corpus.synth_nclt(work).glob("*.csv")):
        kind = nclt_kind(path.name)
        if kind in KINDS:
            lines = path.read_bytes().splitlines(keepends=True)[:20]
            out[path.name] = bytes([KINDS.index(kind)]) + b"".join(lines)
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    kind = KINDS[data[0] % len(KINDS)]
    block = 1 << 20 if data[0] < 128 else 64
    table = load_table(kind, scratch_file("input.csv", data[1:]), block_bytes=block)
    table.frame.height  # noqa: B018 - the frame is built lazily in parts

"""hokuyo_30m.bin / hokuyo_4m.bin: fixed-size records, streamed, their utimes and records
read back by index.

Input: one selector byte (which sensor), then the file's bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bridge_lake.formats.nclt.hokuyo import (
    SCAN_GEOMETRY,
    HokuyoReport,
    iter_hokuyo,
    read_records_at,
    read_utimes,
)
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 12 << 10
KINDS = sorted(SCAN_GEOMETRY)


def seeds(work: Path) -> dict[str, bytes]:
    out = {}
    for i, kind in enumerate(KINDS):
        record = SCAN_GEOMETRY[kind].record_dtype.itemsize
        data = (corpus.synth_nclt(work) / f"{kind}.bin").read_bytes()
        out[kind] = bytes([i]) + data[: min(len(data), 3 * record, MAX_LEN - 1)]
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    kind = KINDS[data[0] % len(KINDS)]
    path = scratch_file(f"{kind}.bin", data[1:])
    for batch in iter_hokuyo(kind, path, batch_records=2, report=HokuyoReport()):
        batch.num_rows  # noqa: B018
    utimes = read_utimes(kind, path, batch_records=2)
    read_records_at(kind, path, np.argsort(utimes, kind="stable")[::-1])

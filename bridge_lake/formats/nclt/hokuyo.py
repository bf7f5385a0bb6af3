"""hokuyo_30m.bin and hokuyo_4m.bin as laser scans (spec §8).

Fixed-size records (uint64 utime + N uint16 range codes), no header: record batches are read
with plain file reads into a structured array and decoded. Not a memory map: the pages of a
mapping a reader touched count in its RSS, so iterating a mapped file keeps all of it
resident. Ranges use the Velodyne rule (metres = code x 0.005 - 100); codes decoding to
<= 0 m are no-returns and become NaN, counted per batch. Each scan's angles are
angle_min + i x angle_increment in the sensor's own frame (both sensors hang upside down, see
calibration.yaml); the values are in SCAN_GEOMETRY.

Error policy: a file size that is not a multiple of the record size means a truncated last
record; the whole records are returned and the tail is reported as a quarantined byte range
(`HokuyoReport.truncated`), since without a magic there is nothing after it to recover.
Record utimes are kept in file order; equal and backward steps are counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from bridge_lake.errors import TruncatedFileError
from bridge_lake.formats.nclt import constants as C
from bridge_lake.formats.nclt.timing import TimeOrder
from bridge_lake.formats.nclt.velodyne import SkippedRange

BATCH_RECORDS = 4096
"""Records per read and per batch (8.9 MB of hokuyo_30m): the reader's memory, whatever the
file's length."""


@dataclass(frozen=True)
class ScanGeometry:
    ranges: int
    angle_min: float
    angle_increment: float

    @property
    def angle_max(self) -> float:
        return self.angle_min + (self.ranges - 1) * self.angle_increment

    @property
    def record_dtype(self) -> np.dtype:
        return np.dtype([("utime", "<u8"), ("range", "<u2", (self.ranges,))])


SCAN_GEOMETRY = {
    kind: ScanGeometry(int(v["ranges"]), float(v["angle_min"]), float(v["angle_inc"]))
    for kind, v in C.HOKUYO.items()
}


@dataclass
class HokuyoReport:
    records: int = 0
    no_returns: int = 0
    truncated: SkippedRange | None = None
    duplicate_utimes: int = 0
    backward_utimes: int = 0


def schema(kind: str) -> pa.Schema:
    geometry = SCAN_GEOMETRY[kind]
    return pa.schema([("utime", pa.int64()), ("ranges", pa.list_(pa.float32(), geometry.ranges))])


def iter_hokuyo(
    kind: str,
    path: str | os.PathLike,
    *,
    batch_records: int = BATCH_RECORDS,
    report: HokuyoReport | None = None,
) -> Iterator[pa.RecordBatch]:
    """Scans as batches of (utime, fixed-size list of float32 metres, NaN = no return)."""
    path = Path(path)
    record = SCAN_GEOMETRY[kind].record_dtype
    report = report if report is not None else HokuyoReport()
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        report.truncated = truncated_tail(size, record.itemsize)
        previous = np.empty(0, dtype=np.int64)
        for chunk in _record_batches(f, path, record, size // record.itemsize, batch_records):
            batch = decode_records(kind, chunk, report)
            utime = batch.column("utime").to_numpy()
            order = TimeOrder.of(np.concatenate([previous, utime]))
            report.duplicate_utimes += order.duplicates
            report.backward_utimes += order.backward
            previous = utime[-1:]
            yield batch


def decode_records(kind: str, records: np.ndarray, report: HokuyoReport) -> pa.RecordBatch:
    """Records (`record_dtype`) as a batch of `schema(kind)`: codes through CODE_LUT, <= 0 m
    as NaN; counts the records and no-returns into `report`."""
    geometry = SCAN_GEOMETRY[kind]
    metres = C.CODE_LUT[records["range"]]
    empty = metres <= 0
    metres[empty] = np.nan
    report.records += len(records)
    report.no_returns += int(np.count_nonzero(empty))
    ranges = pa.FixedSizeListArray.from_arrays(pa.array(metres.reshape(-1)), geometry.ranges)
    utime = pa.array(records["utime"].astype(np.int64))
    return pa.RecordBatch.from_arrays([utime, ranges], schema=schema(kind))


def truncated_tail(size: int, record_bytes: int) -> SkippedRange | None:
    """The byte range of a truncated last record of a `size`-byte file, None if none."""
    rest = size % record_bytes
    if not rest:
        return None
    return SkippedRange(size - rest, size, f"last record truncated: {rest} of {record_bytes} bytes")


def read_utimes(
    kind: str, path: str | os.PathLike, *, batch_records: int = BATCH_RECORDS
) -> np.ndarray:
    """The int64 utimes of every whole record in file order, read a record batch at a time:
    only this array (8 bytes a record) grows with the file."""
    path = Path(path)
    record = SCAN_GEOMETRY[kind].record_dtype
    with path.open("rb") as f:
        whole = os.fstat(f.fileno()).st_size // record.itemsize
        utime = np.empty(whole, dtype=np.int64)
        start = 0
        for chunk in _record_batches(f, path, record, whole, batch_records):
            utime[start : start + len(chunk)] = chunk["utime"]
            start += len(chunk)
    return utime


def read_records_at(kind: str, path: str | os.PathLike, index: np.ndarray) -> np.ndarray:
    """The records (`record_dtype`) at `index` (whole-record numbers, any order), in `index`
    order, read without mapping the file.

    The index is sorted and each run of consecutive records is one read, so a nearly sorted
    index (a few swapped records) costs about one sequential read; memory is the result and
    its sorted copy, nothing of the rest of the file."""
    path = Path(path)
    record = SCAN_GEOMETRY[kind].record_dtype
    order = np.argsort(index, kind="stable")
    wanted = index[order]
    by_position = np.empty(len(index), dtype=record)
    # where each run of consecutive records starts, then len(wanted): -2 never continues a run
    bounds = np.flatnonzero(np.diff(wanted, prepend=-2, append=-2) != 1).tolist()
    with path.open("rb") as f:
        for a, b in pairwise(bounds):
            _read_exactly(f, path, by_position[a:b], int(wanted[a]) * record.itemsize)
    out = np.empty_like(by_position)
    out[order] = by_position
    return out


def _record_batches(
    f: BinaryIO, path: Path, record: np.dtype, count: int, batch_records: int
) -> Iterator[np.ndarray]:
    """Records 0..count-1 in batches, read into one buffer sized from `count` (the file's
    whole records, known before anything is allocated). Each batch is overwritten by the
    next: use it before advancing."""
    buffer = np.empty(min(batch_records, count), dtype=record)
    for start in range(0, count, batch_records):
        chunk = buffer[: min(batch_records, count - start)]
        _read_exactly(f, path, chunk, start * record.itemsize)
        yield chunk


def _read_exactly(f: BinaryIO, path: Path, out: np.ndarray, offset: int) -> None:
    """Fill `out` from byte `offset`; a short read means the file shrank while being read."""
    f.seek(offset)
    got = f.readinto(out.view(np.uint8))
    if got != out.nbytes:
        raise TruncatedFileError(
            f"file ended while reading: {got} of {out.nbytes} bytes", path=str(path), offset=offset
        )

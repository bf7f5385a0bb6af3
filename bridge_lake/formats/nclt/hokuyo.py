"""hokuyo_30m.bin and hokuyo_4m.bin as laser scans (spec §8).

Fixed-size records (uint64 utime + N uint16 range codes), no header: the file is viewed as a
structured array over a memory map and decoded in batches. Ranges use the Velodyne rule
(metres = code x 0.005 - 100); codes decoding to <= 0 m are no-returns and become NaN, counted
per batch. Each scan's angles are angle_min + i x angle_increment in the sensor's own frame
(both sensors hang upside down, see calibration.yaml); the values are in SCAN_GEOMETRY.

Error policy: a file size that is not a multiple of the record size means a truncated last
record; the whole records are returned and the tail is reported as a quarantined byte range
(`HokuyoReport.truncated`), since without a magic there is nothing after it to recover.
Record utimes are kept in file order; equal and backward steps are counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from bridge_lake.formats.nclt import constants as C
from bridge_lake.formats.nclt.timing import TimeOrder
from bridge_lake.formats.nclt.velodyne import SkippedRange


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
    kind: str, path: Path, *, batch_records: int = 4096, report: HokuyoReport | None = None
) -> Iterator[pa.RecordBatch]:
    """Scans as batches of (utime, fixed-size list of float32 metres, NaN = no return)."""
    geometry = SCAN_GEOMETRY[kind]
    report = report if report is not None else HokuyoReport()
    record = geometry.record_dtype
    size = path.stat().st_size
    whole = size // record.itemsize
    if size % record.itemsize:
        report.truncated = SkippedRange(
            whole * record.itemsize,
            size,
            f"last record truncated: {size % record.itemsize} of {record.itemsize} bytes",
        )
    if whole == 0:
        return
    records = np.memmap(path, dtype=record, mode="r", shape=(whole,))
    previous: list[int] = []
    for a in range(0, whole, batch_records):
        chunk = records[a : a + batch_records]
        utime = chunk["utime"].astype(np.int64)
        metres = C.CODE_LUT[chunk["range"]]
        empty = metres <= 0
        metres[empty] = np.nan
        report.records += len(chunk)
        report.no_returns += int(np.count_nonzero(empty))
        order = TimeOrder.of(np.concatenate([previous, utime]).astype(np.int64))
        report.duplicate_utimes += order.duplicates
        report.backward_utimes += order.backward
        previous = [int(utime[-1])]
        ranges = pa.FixedSizeListArray.from_arrays(pa.array(metres.reshape(-1)), geometry.ranges)
        yield pa.RecordBatch.from_arrays([pa.array(utime), ranges], schema=schema(kind))
    del records

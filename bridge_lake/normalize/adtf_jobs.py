"""The jobs of the ADTF normalizer: one per stream of a recording, collecting its samples
into bounded batches, decoding them with the vectorized DDL decoder and writing Arrow columns
(module docstring of normalize/adtf.py: speed, memory, order). The base, the raw payload,
struct and generic jobs are here; the sensor-specific ones in adtf_sensor_jobs.py."""

from __future__ import annotations

import dataclasses
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake import clock
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf import Sample, Stream
from bridge_lake.formats.adtf.ddl import render_ddl, static_size
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.formats.adtf.errors import DDLError
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.normalize.adtf_clock import RecordingClock
from bridge_lake.normalize.adtf_generic import (
    element_columns,
    struct_schema,
    table_name,
)
from bridge_lake.normalize.adtf_mapping import FieldMap, Rule
from bridge_lake.normalize.sink import DriveSink, StreamInfo

BATCH_SAMPLES = 50_000
BATCH_BYTES = 16 << 20
"""Batch limits per stream: bound memory (and keep Arrow's 32-bit binary offsets safe)."""
RELEASE_BYTES = 32 << 20
"""File bytes read between two releases of the mapped pages (`DatFile.release_pages`), and
the most a stream's pending samples may span. Batches decode their samples after the
reader's walk has released them, mapping their pages in again: a sparse stream (15 MB of
video in a 136 MB recording, one batch) touched the whole file, so a 30-minute recording
(822 MB) stayed resident whole."""
UNMAPPED_TABLE = "quarantine"
"""File problems (an unreadable file, the damage of a readable one) are declared for the
quarantine table: all their records go there, and their `source_type` starts with `file:`.
Streams no rule takes are not quarantined: they land in generic tables (`adtf_generic`)."""
PAYLOAD_TABLE = "adtf_payloads"
SOURCE_PREFIX = "adtf"


def _type_name(stream: Stream) -> str:
    meta = stream.meta_type or stream.kind
    return f"{meta}:{stream.ddl_struct}" if stream.ddl_struct else meta


_PATH = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def path_parts(path: str) -> list[str | int]:
    return [m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _PATH.finditer(path)]


# --------------------------------------------------------------------------------------------
# jobs


class Job(ABC):
    """One stream of one file: pending samples, lazy declaration, conservation accounting."""

    table = UNMAPPED_TABLE

    def __init__(self, stream: Stream, name: str, rel: str, sink: DriveSink) -> None:
        self.stream = stream
        self.name = name
        self.rel = rel
        """the file being read (quarantine rows and errors name it)"""
        self.source = rel
        """the recording's file(s) for the catalog: a split recording lists its parts"""
        self.mapping: str | None = None
        """the rule that chose the table and its layer (`Placement.describe`)"""
        self.clock = RecordingClock(0, "")
        """the recording's offset to the master clock (added to every chunk time)"""
        self.sink = sink
        self.pending: list[Sample] = []
        self.declared = False
        self.last_time: int | None = None
        self.pending_bytes = 0
        self.counted = 0
        """pending samples already added to pending_bytes (sizes vary: video frames)."""

    def full(self, at: int) -> bool:
        """Time to flush: a batch's worth of samples or bytes, or pending samples spread
        over more than RELEASE_BYTES of the file before offset `at`."""
        n = len(self.pending)
        self.pending_bytes += sum(len(s[4]) for s in self.pending[self.counted :])
        self.counted = n
        return (
            n >= BATCH_SAMPLES
            or self.pending_bytes >= BATCH_BYTES
            or (n > 0 and at - self.pending[0].offset >= RELEASE_BYTES)
        )

    @abstractmethod
    def info(self, batch: Batch | None) -> list[StreamInfo]:
        """The stream(s) this job writes, declared when its first batch is flushed."""

    def declare(self, batch: Batch | None) -> None:
        if not self.declared:
            for info in self.info(batch):
                self.sink.declare(
                    dataclasses.replace(
                        info,
                        mapping=info.mapping or self.mapping,
                        recording_offset_ns=self.clock.offset_ns,
                        recording_clock=self.clock.method or None,
                    )
                )
            self.declared = True

    def flush(self) -> None:
        if not self.pending:
            return
        batch = Batch(self.pending, self)
        self.pending.clear()  # in place: the dispatch table holds this list's append
        self.pending_bytes = self.counted = 0
        self.declare(batch)
        self.sink.read(self.name, self.table, batch.n)
        self.process(batch)

    def finish(self) -> None:
        self.declare(None)

    @abstractmethod
    def process(self, batch: Batch) -> None:
        """Turn one batch of samples into rows and quarantine entries."""

    def quarantine(self, batch: Batch, idx: np.ndarray, reasons: list[str]) -> None:
        if not len(idx):
            return
        self.sink.quarantine(
            self.name,
            self.table,
            source_file=self.rel,
            reasons=reasons,
            record_index=batch.stream_index[idx].tolist(),
            byte_offset=batch.chunk_offset[idx].tolist(),
            byte_length=batch.lengths[idx].tolist(),
            raw=[batch.raws[i] for i in idx.tolist()],
        )

    def source_type(self) -> str:
        return f"{SOURCE_PREFIX}:{_type_name(self.stream)}"

    def unmapped_info(
        self,
        batch: Batch | None,
        mapping: str,
        ddl_struct: str | None = None,
        ddl: str | None = None,
    ) -> list[StreamInfo]:
        """The declaration of a stream no rule maps (a payload or generic table): no topic,
        the batch's measured rate, and why it went there."""
        return [
            StreamInfo(
                self.name,
                self.table,
                self.source,
                self.source_type(),
                expected_rate_hz=measured_rate(batch),
                mapping=mapping,
                ddl_struct=ddl_struct,
                ddl=ddl,
            )
        ]


class Batch:
    """A batch of one stream's samples as columns (one transpose in C, no per-sample loop)."""

    def __init__(self, samples: list[Sample], job: Job) -> None:
        n = self.n = len(samples)
        cols = list(zip(*samples, strict=True))
        self.time_ns = np.fromiter(cols[1], dtype=np.int64, count=n) + job.clock.offset_ns
        self.sample_time_ns = np.fromiter(cols[2], dtype=np.int64, count=n)
        self.raws: list = list(cols[4])
        self.stream_index = np.fromiter(cols[7], dtype=np.int64, count=n)
        self.chunk_offset = np.fromiter(cols[8], dtype=np.int64, count=n)
        self.lengths = np.fromiter(map(len, self.raws), dtype=np.int64, count=n)
        self.sorted_by_time(job)

    def sorted_by_time(self, job: Job) -> None:
        """Stable sort by master time when needed; count the records that had to move."""
        t = self.time_ns
        prev = job.last_time
        if self.n:
            job.last_time = int(t.max()) if prev is None else max(prev, int(t.max()))
        if self.n < 2 or not np.any(t[1:] < t[:-1]):
            return
        job.sink.reordered(job.name, job.table, clock.reorder_count(t))
        order = np.argsort(t, kind="stable")
        self.time_ns = t[order]
        self.sample_time_ns = self.sample_time_ns[order]
        self.raws = [self.raws[i] for i in order.tolist()]
        self.stream_index = self.stream_index[order]
        self.chunk_offset = self.chunk_offset[order]
        self.lengths = self.lengths[order]

    def buffer(self, idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Payloads of `idx` (default all) concatenated: (bytes as uint8, offsets, lengths)."""
        raws = self.raws if idx is None else [self.raws[i] for i in idx.tolist()]
        lengths = self.lengths if idx is None else self.lengths[idx]
        joined = b"".join(raws)
        offsets = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths) > 1:
            np.cumsum(lengths[:-1], out=offsets[1:])
        return np.frombuffer(joined, dtype=np.uint8), offsets, lengths


class Substreams:
    """An `adtf/substreams` stream: samples handed to one job per substream (by the
    substream id each sample carries), each its own stream in the catalog."""

    def __init__(self, jobs: dict[int, Job | Substreams], stray: Callable[[int], Job]) -> None:
        self.jobs = jobs
        self.stray = stray
        """makes the job for a substream id the stream type does not name"""
        self.pending: list[Sample] = []

    def full(self, at: int) -> bool:
        """Hand the pending samples to the substream jobs and flush those that are full;
        never full itself."""
        self._distribute()
        for job in self.jobs.values():
            if job.full(at):
                job.flush()
        return False

    def _distribute(self) -> None:
        for sample in self.pending:
            job = self.jobs.get(sample[6])
            if job is None:
                job = self.jobs[sample[6]] = self.stray(sample[6])
            job.pending.append(sample)
        self.pending.clear()

    def flush(self) -> None:
        self._distribute()
        for job in self.jobs.values():
            job.flush()

    def finish(self) -> None:
        self.flush()
        for job in self.jobs.values():
            job.finish()


class PayloadJob(Job):
    """A stream without a DDL: one `adtf_payloads` row per sample, bytes and meta type."""

    table = PAYLOAD_TABLE

    def __init__(self, stream: Stream, name: str, rel: str, sink: DriveSink, why: str) -> None:
        super().__init__(stream, name, rel, sink)
        self.why = why

    def info(self, batch: Batch | None) -> list[StreamInfo]:
        return self.unmapped_info(batch, f"payload: {self.why}, no DDL")

    def process(self, batch: Batch) -> None:
        buf, offsets, _ = batch.buffer()
        n = batch.n
        cols = {
            "time_ns": batch.time_ns,
            "sample_time_ns": batch.sample_time_ns,
            "meta_type": pa.repeat(pa.scalar(self.stream.meta_type or self.stream.kind), n),
            "data": _binary(buf, offsets, self.rel),
        }
        self.sink.write(self.name, self.table, pa.table(cols))


def _binary(buf: np.ndarray, offsets: np.ndarray, rel: str) -> pa.Array:
    """Concatenated payloads (`buf`, start `offsets`) as an Arrow binary array, no copy."""
    if len(buf) > np.iinfo(np.int32).max:  # pa.binary() offsets are int32
        raise BridgeLakeError(f"{rel}: batch of {len(buf)} bytes exceeds 2 GiB")
    ends = np.concatenate([offsets, [len(buf)]]).astype(np.int32)
    return pa.Array.from_buffers(
        pa.binary(), len(offsets), [None, pa.py_buffer(ends), pa.py_buffer(buf)]
    )


def measured_rate(batch: Batch | None) -> float | None:
    """Mean rate of a batch, 3 significant digits: the nominal rate when a rule gives none."""
    if batch is None or batch.n < 2:
        return None
    span = int(batch.time_ns[-1] - batch.time_ns[0])
    if span <= 0:
        return None
    rate = (batch.n - 1) * 1e9 / span
    digits = 2 - math.floor(math.log10(rate))
    return round(rate, digits)


class StructJob(Job):
    """A DDL-described stream mapped field by field; decoded a batch at a time."""

    def __init__(
        self, stream: Stream, name: str, rel: str, sink: DriveSink, rule: Rule, data: np.ndarray
    ) -> None:
        super().__init__(stream, name, rel, sink)
        self.rule = rule
        self.table = rule.table
        self.use_ddl(stream)
        self.frame_id = rule.frame_id or stream.name

    def use_ddl(self, stream: Stream) -> None:
        """The stream's DDL struct and stored layout, and its static size (None if variable)."""
        self.ddl = stream.ddl
        self.struct = stream.ddl_struct
        self.layout = stream.stored_layout or "deserialized"
        self.size = static_size(self.ddl, self.struct, self.layout)

    def topic(self, batch: Batch | None) -> str | None:
        return self.rule.topic.format(stream=self.stream.name) if self.rule.topic else None

    def info(self, batch: Batch | None) -> list[StreamInfo]:
        rate = self.rule.expected_rate_hz or measured_rate(batch)
        return [
            StreamInfo(
                self.name, self.table, self.source, self.source_type(), self.topic(batch), rate
            )
        ]

    def decode(self, batch: Batch) -> tuple[np.ndarray, pa.Table | None]:
        """Decode the batch; returns (indices decoded, their table). Bad samples (wrong size
        for a static struct, bounds violations found by the decoder) are quarantined."""
        idx = np.arange(batch.n)
        if self.size is not None:
            bad = batch.lengths != self.size
            if bad.any():
                where = np.flatnonzero(bad)
                self.quarantine(
                    batch,
                    where,
                    [
                        f"payload of {n} bytes, struct {self.struct} is {self.size} bytes"
                        for n in batch.lengths[where].tolist()
                    ],
                )
                idx = np.flatnonzero(~bad)
        if not len(idx):
            return idx, None
        good, parts = self._decode_split(batch, idx)
        if not parts:
            return good, None
        return good, pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _decode_split(self, batch: Batch, idx: np.ndarray) -> tuple[np.ndarray, list[pa.Table]]:
        buf, offsets, lengths = batch.buffer(idx)
        try:
            table = decode(
                self.ddl, self.struct, buf, offsets, lengths, layout=self.layout, path=self.rel
            )
        except DDLError as exc:
            if len(idx) == 1:
                self.quarantine(
                    batch, idx, [f"payload does not decode as {self.struct}: {exc.reason}"]
                )
                return idx[:0], []
            half = len(idx) // 2
            a_idx, a = self._decode_split(batch, idx[:half])
            b_idx, b = self._decode_split(batch, idx[half:])
            return np.concatenate([a_idx, b_idx]), a + b
        return idx, [table]

    def sensor_time(self, table: pa.Table) -> tuple[np.ndarray | None, np.ndarray]:
        """(sensor_time_ns or None, mask of rows whose device time overflows int64 ns)."""
        st = self.rule.sensor_time
        if st is None:
            return None, np.zeros(table.num_rows, dtype=bool)
        raw = np.asarray(table_column(table, st.element).to_numpy(zero_copy_only=False))
        if raw.dtype.kind not in "iu":
            raw = np.asarray(raw, dtype=np.float64)
            bad = ~np.isfinite(raw) | (np.abs(raw) * st.unit_ns >= 2**63)
            ns = np.where(bad, 0, np.rint(np.where(bad, 0, raw) * st.unit_ns)).astype(np.int64)
            return ns, bad
        limit = np.iinfo(np.int64).max // st.unit_ns
        if raw.dtype.kind == "u":
            bad = raw > np.uint64(limit)
        else:
            bad = np.abs(raw.astype(np.int64)) > limit
        return np.where(bad, 0, raw).astype(np.int64) * st.unit_ns, bad

    def base_columns(self, batch: Batch, idx: np.ndarray, table: pa.Table) -> dict:
        sensor, _ = self.sensor_time(table)
        cols: dict = {"time_ns": batch.time_ns[idx]}
        if sensor is not None:
            cols["sensor_time_ns"] = sensor
        cols["frame_id"] = pa.repeat(pa.scalar(self.frame_id), len(idx))
        return cols

    def drop_bad_time(self, batch: Batch, idx: np.ndarray, table: pa.Table):
        """Rows whose device time does not fit the ns range go to quarantine."""
        _, bad = self.sensor_time(table)
        if not bad.any():
            return idx, table
        where = np.flatnonzero(bad)
        self.quarantine(batch, idx[where], ["device time out of the int64 ns range"] * len(where))
        keep = np.flatnonzero(~bad)
        return idx[keep], table.take(pa.array(keep))

    def drop_unfit(self, batch: Batch, idx: np.ndarray, table: pa.Table, reasons: np.ndarray):
        """Rows with a `reasons` entry (a mapped value its integer column cannot hold) go to
        quarantine with that reason; the drive goes on."""
        bad = reasons != None  # noqa: E711
        if not bad.any():
            return idx, table
        where = np.flatnonzero(bad)
        self.quarantine(batch, idx[where], reasons[where].tolist())
        keep = np.flatnonzero(~bad)
        return idx[keep], table.take(pa.array(keep))

    def process(self, batch: Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        idx, table = self.drop_bad_time(batch, idx, table)
        schema = NORMALIZED[self.table].schema
        idx, table = self.drop_unfit(batch, idx, table, unfit_rows(table, self.rule.fields, schema))
        cols = self.base_columns(batch, idx, table)
        for fm in self.rule.fields:
            cols[fm.column] = mapped_column(table, fm, schema.field(fm.column).type)
        self.sink.write(self.name, self.table, pa.table(cols))


class GenericJob(StructJob):
    """A DDL-described stream no rule takes: every element decoded into `ddl_<struct>`."""

    def __init__(self, stream: Stream, name: str, rel: str, sink: DriveSink, why: str) -> None:
        Job.__init__(self, stream, name, rel, sink)
        self.why = why
        self.use_ddl(stream)
        schema = struct_schema(self.ddl, self.struct, self.layout)
        self.table = sink.register_table(table_name(self.struct), schema)

    def info(self, batch: Batch | None) -> list[StreamInfo]:
        return self.unmapped_info(
            batch, f"generic: {self.why}", ddl_struct=self.struct, ddl=render_ddl(self.ddl)
        )

    def process(self, batch: Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        elements = element_columns(table)
        cols = {"time_ns": batch.time_ns[idx], "sample_time_ns": batch.sample_time_ns[idx]}
        cols.update(zip(elements.column_names, elements.columns, strict=True))
        self.sink.write(self.name, self.table, pa.table(cols))


def table_column(table: pa.Table, path: str) -> pa.Array:
    """Element `a.b[2]` of a decoded table as one Arrow array (nested struct / list access)."""
    parts = path_parts(path)
    column = table.column(parts[0])
    # combine_chunks copies even a single chunk (every point of a poll's scans, per call)
    arr = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    for part in parts[1:]:
        arr = pc.list_element(arr, part) if isinstance(part, int) else pc.struct_field(arr, part)
    return arr


def mapped_column(table: pa.Table, fm: FieldMap, target: pa.DataType | None = None) -> pa.Array:
    """`element * scale + offset` as the column `fm.column` of type `target`. Integers go to
    float columns through numpy (Arrow's safe cast refuses integers beyond 2^53); for an
    integer column, rows `unfit_rows` names must have been dropped first (they come out as 0)."""
    arr = table_column(table, fm.element)
    if target is not None and pa.types.is_integer(target):
        return _fit_integer(arr, fm, target).column(target)
    if fm.identity and not pa.types.is_integer(arr.type):
        return arr
    values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return pa.array(values * fm.scale + fm.offset, mask=None if valid.all() else ~valid)


def unfit_rows(table: pa.Table, fields: tuple[FieldMap, ...], schema: pa.Schema) -> np.ndarray:
    """Per row, why a mapped value does not fit its integer column (overflow, not finite, a
    fraction after scaling), or None: the first problem of the row, in field order."""
    reasons = np.full(table.num_rows, None, dtype=object)
    unfit = unfit_indices(table, fields, schema)
    if len(unfit.rows):
        reasons[unfit.rows] = unfit.why
    return reasons


class Unfit(NamedTuple):
    rows: np.ndarray
    """rows with a problem, ascending"""
    why: list[str]
    """their first problem"""
    columns: dict[str, pa.Array]
    """column -> the integer column as `mapped_column` makes it (valid while no row is
    dropped: the check needs the values anyway)"""


def unfit_indices(table: pa.Table, fields: tuple[FieldMap, ...], schema: pa.Schema) -> Unfit:
    """`unfit_rows` without a per-row object array, for tables of many rows (a poll's lidar
    points) that almost always fit."""
    bad = np.zeros(0, dtype=np.int64)
    why: list[str] = []
    columns: dict[str, pa.Array] = {}
    for fm in fields:
        target = schema.field(fm.column).type
        if not pa.types.is_integer(target):
            continue
        fit = _fit_integer(table_column(table, fm.element), fm, target)
        columns[fm.column] = fit.column(target)
        if not len(fit.bad):
            continue
        new = ~np.isin(fit.bad, bad)
        if not new.any():
            continue
        bad = np.concatenate([bad, fit.bad[new]])
        why += [w for w, n in zip(fit.why, new.tolist(), strict=True) if n]
        order = np.argsort(bad, kind="stable")
        bad, why = bad[order], [why[i] for i in order.tolist()]
    return Unfit(bad, why, columns)


@dataclasses.dataclass
class _Fit:
    values: np.ndarray
    """as the target's numpy type, unfit and null rows 0"""
    valid: np.ndarray
    bad: np.ndarray
    """rows whose value does not fit, ascending"""
    why: list[str]
    """their problem"""

    def column(self, target: pa.DataType) -> pa.Array:
        return pa.array(self.values, type=target, mask=None if self.valid.all() else ~self.valid)


def _fit_integer(arr: pa.Array, fm: FieldMap, target: pa.DataType) -> _Fit:
    """`arr * scale + offset` fitted to the integer type `target` (see `_Fit`).

    Integers mapped as they are are compared exactly; anything scaled (or a float element)
    is rounded to the nearest integer when it lies within a few ulps of it (0.1 * 30 is
    3.0000000000000004), else it is a fraction."""
    dtype = np.dtype(target.to_pandas_dtype())
    info = np.iinfo(dtype)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    filled = arr.fill_null(0) if arr.null_count else arr
    raw = np.asarray(filled.to_numpy(zero_copy_only=False))
    if raw.dtype == np.bool_:
        raw = raw.astype(np.int8)
    scale = (f" * {fm.scale:g}" if fm.scale != 1 else "") + (
        f" + {fm.offset:g}" if fm.offset else ""
    )
    where = f"column {fm.column} ({target}): value"
    src = f"(element {fm.element}{scale})"
    if fm.identity and raw.dtype.kind in "iu":
        if np.can_cast(raw.dtype, dtype):  # every value fits: no comparison, no copy
            return _Fit(raw.astype(dtype, copy=False), valid, np.zeros(0, np.int64), [])
        if raw.dtype.kind == "u":
            bad = raw.astype(np.uint64) > np.uint64(info.max)
        else:
            wide = raw.astype(np.int64)
            bad = (wide > min(info.max, np.iinfo(np.int64).max)) | (wide < info.min)
        bad &= valid
        rows = np.flatnonzero(bad)
        why = [f"{where} {v} overflows {src}" for v in raw[rows].tolist()]
        values = np.where(bad, 0, raw).astype(dtype) if len(rows) else raw.astype(dtype)
        return _Fit(values, valid, rows, why)
    scaled = raw.astype(np.float64) * fm.scale + fm.offset
    rounded = np.rint(scaled)
    finite = np.isfinite(scaled)
    bits = dtype.itemsize * 8
    lo, hi = (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if info.min < 0 else (0.0, 2.0**bits)
    with np.errstate(invalid="ignore"):
        fraction = finite & (np.abs(scaled - rounded) > 64 * np.spacing(np.abs(scaled)))
        over = finite & ~fraction & ((rounded < lo) | (rounded >= hi))
    problems = (
        (~finite & valid, "is not finite"),
        (fraction & valid, "is not an integer"),
        (over & valid, "overflows"),
    )
    bad = problems[0][0] | problems[1][0] | problems[2][0]
    rows = np.flatnonzero(bad)
    why: list[str] = []
    if len(rows):
        text = np.full(len(raw), None, dtype=object)
        for mask, problem in problems:
            text[mask] = [f"{where} {v!r} {problem} {src}" for v in scaled[mask].tolist()]
        why = text[rows].tolist()
    return _Fit(np.where(bad | ~valid, 0, rounded).astype(dtype), valid, rows, why)

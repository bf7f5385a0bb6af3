"""Where normalizers put their output: table writers, quarantine and per-stream accounting.

A source normalizer (NCLT, ADTF) only decides what each record means. The sink owns the rest,
the same for every source: it streams batches into one atomic partition writer per table,
counts rows per stream, keeps every stream's master times to report order, duplicates and
gaps, fits the device clock wherever `sensor_time_ns` is present, and finally writes the
`streams` catalog and the `quarantine` table. Conservation (records read = rows written +
records joined + rows quarantined) is checked from its figures, per stream: a record "joined"
is one whose values went into the row of another record of the same instant (a side file
joined by time), so one measurement is one row and still every record is accounted for.

Memory: per stream it keeps 8 bytes of master time (16 with a device time) per record, never
the records themselves; `lidar_points` keeps none (its scans carry the time facts), only
16 bytes a scan: its last point's offset, to check the scan's `end_time_ns`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake import clock
from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import Lake, PartitionWriter
from bridge_lake.lake.paths import MAX_NAME_LENGTH as MAX_TABLE_NAME
from bridge_lake.lake.schemas import (
    ADTF_PAYLOADS,
    GENERIC_PREFIX,
    NORMALIZED,
    QUARANTINE,
    QUARANTINE_RAW_CAP,
    STREAMS,
)
from bridge_lake.normalize.quality import END_NOT_LAST_POINT, value_violations

UNTIMED_TABLES = frozenset({"lidar_points"})
"""Tables whose per-row times are not tracked (billions of points; their scans are)."""
FILE_PREFIX = "file:"
"""source_type prefix of the streams that stand for a file's problems, not its records."""
SOURCE_SEPARATOR = ", "
"""Between the files of one stream's `source_file` (the parts of a split ADTF recording)."""
ENCODE_THREADS = {"lidar_points": 2}
"""Tables whose Parquet parts are encoded on background threads (see PartitionWriter): lidar
points are most of a drive's rows, and encoding them costs more than decoding them."""
PART_ROWS = {"lidar_points": 1 << 21}
"""Tables written in parts of one row group of this many rows. lidar_points: 2 Mi points (40
revolutions at 50k) instead of 256 Ki-row groups, because each row group carries its own
dictionaries of the quantized coordinates (lake.encodings); measured on 28 M points of the
3-minute NCLT drive: 5.96 bytes a point with 384 Ki-row groups, 5.84 at 1 Mi, 5.79 at 2 Mi.
One row group a part bounds the background encoding's memory at three parts (~190 MB of
ADTF points), reached within 5 minutes of a thin lidar, so peak RSS stops growing there."""
PAGE_ROWS = {"lidar_points": 1 << 18}
"""Tables whose data pages hold up to this many rows instead of Arrow's 20,000. lidar_points:
its columns encode to 0.01-2 bytes a point, so 20,000-row pages are 105 pages a column a part,
each compressed with a new zstd context; 256 Ki-row pages (at most 8 a column, under Arrow's
1 MB a page) cut the encoding CPU of a part by about a tenth at the same bytes a point."""
ROW_GROUP_BYTES = 8 << 20
"""Rows a writer gathers before writing a row group, for the tables not in PART_ROWS: a
thin stream (100 Hz IMU, a camera's H.264) took 20-40 minutes to fill the lake's default
(256 Ki rows or 64 MiB), so every writer's buffer grew with the drive's length."""


@dataclass(frozen=True)
class StreamInfo:
    """What a normalizer declares about a stream before writing it."""

    stream: str
    table: str
    source_file: str
    source_type: str
    topic: str | None = None
    expected_rate_hz: float | None = None
    mapping: str | None = None
    """How the table was chosen (a mapping rule, or why a generic table)."""
    recording_offset_ns: int | None = None
    recording_clock: str | None = None
    """What was added to the recording's times for the master clock, and why (ADTF)."""
    ddl_struct: str | None = None
    ddl: str | None = None
    """The DDL describing the stream's samples (ADTF), kept in the catalog."""
    skipped: str | None = None
    """Why the stream's files are not read at all (declared with no records): a second
    stream of a sensor another stream already holds, which the drive did not ask for."""

    @property
    def target(self) -> str:
        """Where the stream's records went: `mapped` (a sensor table), `generic` (a
        `ddl_<struct>` table), `payload` (adtf_payloads), `quarantine` (all of them) or
        `skipped` (not read, by choice: `skipped` says why)."""
        if self.skipped is not None:
            return "skipped"
        if self.table == QUARANTINE.name:
            return "quarantine"
        if self.table.startswith(GENERIC_PREFIX):
            return "generic"
        if self.table == ADTF_PAYLOADS.name:
            return "payload"
        return "mapped"


@dataclass
class StreamStats:
    info: StreamInfo
    records_read: int = 0
    rows_written: int = 0
    records_joined: int = 0
    """records whose values went into the row of another record of the same instant"""
    rows_quarantined: int = 0
    reordered: int = 0
    times: list[np.ndarray] = field(default_factory=list)
    sensor_times: list[np.ndarray] = field(default_factory=list)
    order: clock.TimeOrder | None = None
    fit: clock.ClockFit | None = None
    fit_error: str | None = None
    violations: dict[str, int] = field(default_factory=dict)
    track: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """GNSS streams: (lat_deg, lon_deg) per batch, for the report's map (16 B a fix)."""
    reasons: Counter[str] = field(default_factory=Counter)
    """Quarantined records of the stream counted by reason (the report and the checks
    name them without reading the quarantine table back)."""
    frames: set[str] = field(default_factory=set)
    """The frame_ids of the stream's rows: streams of one frame in one table are one sensor,
    whose instants must not be split over rows (quality `one_row_per_instant`)."""
    scans: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """lidar_scans streams: (scan_id, end_time_ns - time_ns) per batch, checked at stage()
    against the offset of each scan's last point (violation END_NOT_LAST_POINT)."""

    @property
    def conserved(self) -> bool:
        return self.records_read == self.rows_written + self.records_joined + self.rows_quarantined

    @property
    def first_time_ns(self) -> int | None:
        return int(min(t.min() for t in self.times)) if self.times else None

    @property
    def last_time_ns(self) -> int | None:
        return int(max(t.max() for t in self.times)) if self.times else None

    @property
    def mean_rate_hz(self) -> float | None:
        first, last = self.first_time_ns, self.last_time_ns
        if first is None or last is None or last <= first or self.rows_written < 2:
            return None
        return (self.rows_written - 1) / ((last - first) / clock.NS_PER_S)


@dataclass(frozen=True)
class NormalizeResult:
    streams: list[StreamStats]
    table_rows: dict[str, int]
    table_files: dict[str, list[str]]
    quarantined: int

    @property
    def quarantine_reasons(self) -> dict[str, int]:
        """Every quarantined record counted by reason, over all streams."""
        total: Counter[str] = Counter()
        for s in self.streams:
            total.update(s.reasons)
        return dict(total)


class DriveSink:
    """Collects one drive's normalized output; `finish()` publishes every table at once."""

    def __init__(
        self, lake: Lake, drive_id: str, progress: Callable[[int, int], None] | None = None
    ) -> None:
        self._lake = lake
        self._drive = drive_id
        self._progress = progress
        """called with (rows written, their bytes) after every write: long drives report"""
        self._rows = self._bytes = 0
        self._writers: dict[str, PartitionWriter] = {}
        self._schemas: dict[str, pa.Schema] = {n: spec.schema for n, spec in NORMALIZED.items()}
        """Every table this sink writes: the normalized tables plus the generic ones."""
        self._streams: dict[tuple[str, str], StreamStats] = {}
        self._quarantined = 0
        self._next_scan_id = 0
        self._point_ends: list[tuple[np.ndarray, np.ndarray]] = []
        """lidar_points: (scan_id, largest time_offset_ns) of every run of a scan's points"""
        self._finished = False

    @property
    def lake(self) -> Lake:
        """The lake this drive is written to (recovered recordings go to its raw layer)."""
        return self._lake

    @property
    def drive_id(self) -> str:
        return self._drive

    # --- what normalizers call ----------------------------------------------------------

    def register_table(self, name: str, schema: pa.Schema) -> str:
        """Add a generic table (`ddl_<struct>`, schema from a recording) to this drive's
        output. Returns the table name to write to: `name`, or `name_<hash>` if the drive
        already has a table `name` with another schema (two versions of one struct)."""
        if not name.startswith(GENERIC_PREFIX):
            raise BridgeLakeError(f"generic table {name!r} must start with {GENERIC_PREFIX!r}")
        schema = schema.with_metadata({"bridge_lake.table": f"normalized/{name}"})
        known = self._schemas.get(name)
        if known is not None and not known.equals(schema):
            digest = hashlib.sha256(str(schema).encode("utf-8")).hexdigest()[:6]
            name = f"{name[: MAX_TABLE_NAME - 7]}_{digest}"
            known = self._schemas.get(name)
        if known is None:
            self._schemas[name] = schema
        return name

    def declare(self, info: StreamInfo) -> StreamStats:
        """Announce a stream. `table="quarantine"` declares a stream that has no table to go
        to (an unreadable file, the problems of a damaged one): all its records are
        quarantined."""
        if info.table not in self._schemas or info.table == STREAMS.name:
            raise BridgeLakeError(f"stream {info.stream!r}: unknown sensor table {info.table!r}")
        key = (info.stream, info.table)
        if key in self._streams:
            raise BridgeLakeError(f"stream {info.stream!r} declared twice for {info.table}")
        stats = self._streams[key] = StreamStats(info)
        return stats

    def read(self, stream: str, table: str, n: int) -> None:
        """Count `n` raw records of a stream (whatever becomes of them)."""
        self._stats(stream, table).records_read += int(n)

    def scan_ids(self, n: int) -> np.ndarray:
        """The next `n` lidar scan ids of the drive: unique over all lidar streams, so that
        lidar_points needs no stream column to name its scan."""
        ids = np.arange(self._next_scan_id, self._next_scan_id + n, dtype=np.int64)
        self._next_scan_id += n
        return ids

    def joined(self, stream: str, table: str, n: int) -> None:
        """Count `n` records read whose values went into rows of other records of the same
        instant (written by them), so that one measurement is one row."""
        self._stats(stream, table).records_joined += int(n)

    def reordered(self, stream: str, table: str, n: int) -> None:
        """Count records the normalizer had to move to restore time order."""
        self._stats(stream, table).reordered += int(n)

    def write(self, stream: str, table: str, data: pa.RecordBatch | pa.Table) -> None:
        """Append rows of `stream` to `table`, in master-time order within the stream.

        Columns are matched by name; missing nullable columns are filled with nulls and
        types are cast to the table schema, so normalizers only build what they know.
        """
        stats = self._stats(stream, table)
        if table == QUARANTINE.name:
            raise BridgeLakeError(f"stream {stream!r}: use quarantine() for quarantined records")
        schema = self._schemas[table]
        rows = conform(data, schema, stream=stream)
        if rows.num_rows == 0:
            return
        if table not in UNTIMED_TABLES:
            stats.times.append(rows.column("time_ns").to_numpy(zero_copy_only=False))
            if "sensor_time_ns" in schema.names:
                sensor = rows.column("sensor_time_ns")
                if sensor.null_count == 0:
                    stats.sensor_times.append(sensor.to_numpy(zero_copy_only=False))
        if "frame_id" in schema.names:
            stats.frames.update(pc.unique(rows.column("frame_id")).to_pylist())
        if table == "lidar_points":
            self._point_ends.append(_last_offsets(rows))
        elif table == "lidar_scans":
            start = rows.column("time_ns").to_numpy(zero_copy_only=False)
            end = rows.column("end_time_ns").to_numpy(zero_copy_only=False)
            stats.scans.append((rows.column("scan_id").to_numpy(zero_copy_only=False), end - start))
        if table == "gnss":
            stats.track.append(
                tuple(  # type: ignore[arg-type]
                    rows.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
                    for c in ("lat_deg", "lon_deg")
                )
            )
        for name, n in value_violations(table, rows).items():
            stats.violations[name] = stats.violations.get(name, 0) + n
        self._writer(table).write(rows)
        stats.rows_written += rows.num_rows
        if self._progress is not None:
            self._rows += rows.num_rows
            self._bytes += rows.nbytes
            self._progress(self._rows, self._bytes)

    def quarantine(
        self,
        stream: str,
        table: str,
        *,
        source_file: str,
        reasons: Iterable[str],
        record_index: Iterable[int | None] | None = None,
        byte_offset: Iterable[int | None] | None = None,
        line: Iterable[int | None] | None = None,
        byte_length: Iterable[int | None] | None = None,
        raw: Iterable[bytes | None] | None = None,
    ) -> None:
        """Record raw records that could not be normalized (vectors of equal length)."""
        reasons = list(reasons)
        n = len(reasons)
        if n == 0:
            return

        def col(values: Iterable | None) -> list:
            out = [None] * n if values is None else list(values)
            if len(out) != n:
                raise BridgeLakeError(f"quarantine of {stream}: column lengths differ")
            return out

        raws = [None if r is None else bytes(r[:QUARANTINE_RAW_CAP]) for r in col(raw)]
        self._writer(QUARANTINE.name).write(
            pa.RecordBatch.from_pydict(
                {
                    "stream": [stream] * n,
                    "source_file": [source_file] * n,
                    "record_index": col(record_index),
                    "byte_offset": col(byte_offset),
                    "line": col(line),
                    "byte_length": col(byte_length),
                    "reason": reasons,
                    "raw": raws,
                },
                schema=QUARANTINE.schema,
            )
        )
        stats = self._stats(stream, table)
        stats.rows_quarantined += n
        stats.reasons.update(reasons)
        self._quarantined += n

    def quarantine_file(
        self,
        source_file: str,
        kind: str,
        reason: str,
        *,
        size: int | None = None,
        offset: int | None = None,
    ) -> None:
        """A whole file as one quarantined record: an empty, truncated or unreadable
        recording. Its stream is `<file>#file` with source_type `file:<kind>`, so the
        `files` check names it and completeness counts the file as read."""
        name = f"{source_file}#file"
        self.declare(StreamInfo(name, QUARANTINE.name, source_file, f"{FILE_PREFIX}{kind}"))
        self.read(name, QUARANTINE.name, 1)
        self.quarantine(
            name,
            QUARANTINE.name,
            source_file=source_file,
            reasons=[reason],
            byte_offset=[offset],
            byte_length=[size],
        )

    def streams(self) -> list[StreamStats]:
        """Every stream declared so far, with its figures."""
        return list(self._streams.values())

    # --- publishing ---------------------------------------------------------------------

    def finish(self) -> NormalizeResult:
        """stage() and publish(): for callers that need no audit in between."""
        return self.publish(self.stage())

    def stage(self) -> NormalizeResult:
        """Compute the stream facts and stage every table, the catalog and the quarantine.

        Nothing is visible yet: the caller looks at the result (the checks) and then calls
        `publish()`, or `abort()` to keep the previous partitions (write, audit, publish).
        """
        if self._finished:
            raise BridgeLakeError("sink already finished")
        self._finished = True
        ends = _scan_ends(self._point_ends)
        self._point_ends = []
        for stats in self._streams.values():
            _analyse(stats)
            _check_scan_ends(stats, ends)
        try:
            self._writer(STREAMS.name).write(self._streams_table())
            for name in self._schemas:
                self._writer(name).close()
        except BaseException:
            self.abort()
            raise
        rows = {name: self._writers[name].rows_written for name in self._schemas}
        return NormalizeResult(list(self._streams.values()), rows, {}, self._quarantined)

    def publish(self, result: NormalizeResult) -> NormalizeResult:
        """Make every staged table the drive's partition; returns `result` with its files.

        Tables are swapped in one after the other, each atomically; generic tables the drive
        had before but no longer has lose their partition of this drive.
        """
        if not self._finished:
            raise BridgeLakeError("publish() before stage()")
        try:
            files = {name: self._writers[name].publish() for name in self._schemas}
        except BaseException:
            self.abort()
            raise
        self._writers.clear()
        for table in self._lake.tables("normalized"):
            if table.startswith(GENERIC_PREFIX) and table not in self._schemas:
                self._lake.remove_partition("normalized", table, self._drive)
        return NormalizeResult(result.streams, result.table_rows, files, result.quarantined)

    def abort(self) -> None:
        for writer in self._writers.values():
            writer.abort()
        self._writers.clear()

    def __enter__(self) -> DriveSink:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()

    # --- internals ----------------------------------------------------------------------

    def _writer(self, table: str) -> PartitionWriter:
        writer = self._writers.get(table)
        if writer is None:
            writer = self._writers[table] = self._lake.partition_writer(
                "normalized",
                table,
                self._drive,
                self._schemas[table],
                encode_threads=ENCODE_THREADS.get(table, 1),
                page_rows=PAGE_ROWS.get(table),
                **({"row_group_rows": PART_ROWS[table], "rows_per_part": PART_ROWS[table]}
                   if table in PART_ROWS else {"row_group_bytes": ROW_GROUP_BYTES}),
            )  # fmt: skip
        return writer

    def _stats(self, stream: str, table: str) -> StreamStats:
        try:
            return self._streams[(stream, table)]
        except KeyError:
            raise BridgeLakeError(f"stream {stream!r} of {table} was not declared") from None

    def _streams_table(self) -> pa.Table:
        cols: dict[str, list] = {f.name: [] for f in STREAMS.schema}
        for s in self._streams.values():
            o, fit = s.order, s.fit
            values = {
                "stream": s.info.stream,
                "source_file": s.info.source_file,
                "source_type": s.info.source_type,
                "table": s.info.table,
                "topic": s.info.topic,
                "records_read": s.records_read,
                "rows_written": s.rows_written,
                "records_joined": s.records_joined,
                "rows_quarantined": s.rows_quarantined,
                "first_time_ns": s.first_time_ns,
                "last_time_ns": s.last_time_ns,
                "mean_rate_hz": s.mean_rate_hz,
                "expected_rate_hz": s.info.expected_rate_hz,
                "reordered": s.reordered,
                "out_of_order": o.backward if o else None,
                "duplicates": o.duplicates if o else None,
                "gaps": o.gaps if o else None,
                "longest_gap_ns": o.longest_gap_ns if o else None,
                "gap_threshold_ns": o.gap_threshold_ns if o else None,
                "clock_offset_ns": fit.offset_ns if fit else None,
                "clock_drift_ppm": fit.drift_ppm if fit else None,
                "clock_residual_ns": fit.residual_rms_ns if fit else None,
                "clock_outliers": fit.outliers if fit else None,
                "clock_fit_error": s.fit_error,
                "mapping": s.info.mapping,
                "recording_offset_ns": s.info.recording_offset_ns,
                "recording_clock": s.info.recording_clock,
                "ddl_struct": s.info.ddl_struct,
                "ddl": s.info.ddl,
                "skipped": s.info.skipped,
            }
            for k, v in values.items():
                cols[k].append(v)
        return pa.table(cols, schema=STREAMS.schema)


def _analyse(stats: StreamStats) -> None:
    if stats.times:
        times = np.concatenate(stats.times)
        stats.times = [times]
        expected = stats.info.expected_rate_hz
        threshold = int(clock.GAP_FACTOR * clock.NS_PER_S / expected) if expected else None
        stats.order = clock.time_order(times, gap_threshold_ns=threshold)
        fitted = sum(len(a) for a in stats.sensor_times)
        if fitted and fitted != len(times):
            stats.fit_error = f"device time missing on {len(times) - fitted} of {len(times)} rows"
        elif fitted:
            try:
                stats.fit = clock.fit_clock(np.concatenate(stats.sensor_times), times)
            except clock.ClockError as exc:
                stats.fit_error = str(exc)
        stats.sensor_times = []


def _last_offsets(points: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(scan_id, largest time_offset_ns) of each run of one scan's points in a lidar_points
    batch; a null offset counts as 0, as in the lidar_points_timed view (the point is at its
    scan's time). One vectorized pass: runs are where scan_id changes."""
    ids = points.column("scan_id").to_numpy()
    offsets = pc.fill_null(points.column("time_offset_ns"), 0).to_numpy().astype(np.int64)
    if ids.size == 0:
        return ids, offsets
    starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1])
    return ids[starts], np.maximum.reduceat(offsets, starts)


def _scan_ends(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted scan ids and each scan's largest point offset over all its runs."""
    if not runs:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ids = np.concatenate([r[0] for r in runs])
    offsets = np.concatenate([r[1] for r in runs])
    order = np.lexsort((-offsets, ids))
    ids, offsets = ids[order], offsets[order]
    first = np.concatenate([[True], ids[1:] != ids[:-1]])
    return ids[first], offsets[first]


def _check_scan_ends(stats: StreamStats, ends: tuple[np.ndarray, np.ndarray]) -> None:
    if not stats.scans:
        return
    ids = np.concatenate([s[0] for s in stats.scans])
    spans = np.concatenate([s[1] for s in stats.scans])
    stats.scans = []
    known, offsets = ends
    at = np.clip(np.searchsorted(known, ids), 0, max(len(known) - 1, 0))
    found = (known[at] == ids) if len(known) else np.zeros(len(ids), bool)
    expected = np.where(found, offsets[at] if len(known) else 0, 0)
    bad = int(np.count_nonzero(spans != expected))
    if bad:
        stats.violations[END_NOT_LAST_POINT] = stats.violations.get(END_NOT_LAST_POINT, 0) + bad


def conform(data: pa.RecordBatch | pa.Table, schema: pa.Schema, *, stream: str) -> pa.Table:
    """`data` as a table of `schema`: by name, cast, nulls for missing columns. Chunks are
    kept as they are (combining them would copy every point once more)."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    n = table.num_rows
    names = set(table.column_names)
    arrays = []
    for f in schema:
        if f.name == "stream" and f.name not in names:
            arrays.append(pa.repeat(pa.scalar(stream, pa.string()), n))
        elif f.name in names:
            col = table.column(f.name)
            arrays.append(col if col.type.equals(f.type) else col.cast(f.type))
        elif f.nullable:
            arrays.append(pa.nulls(n, f.type))
        else:
            raise BridgeLakeError(f"stream {stream!r}: required column {f.name!r} missing")
    out = pa.Table.from_arrays(arrays, schema=schema)
    for f in schema:
        if not f.nullable and out.column(f.name).null_count:
            raise BridgeLakeError(f"stream {stream!r}: nulls in required column {f.name!r}")
    return out


__all__ = ["DriveSink", "NormalizeResult", "StreamInfo", "StreamStats", "conform"]

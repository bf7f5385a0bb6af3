"""NCLT binaries and per-record files → lidar_scans/lidar_points, laser_scans, camera_frames.

Streaming and bounded memory: velodyne_hits.bin (GBs) is read scan by scan through
`iter_scans` and written in batches of about POINT_BATCH_ROWS points, so a drive never holds
more than a few revolutions; Hokuyo files are read in record batches (plain reads, no
memory map); images are read and written a few dozen at a time. All per-point work is numpy/Arrow.

Accounting per stream (records read = rows written + rows quarantined):
- `velodyne_hits` / lidar_points: a record is a hit; a byte range the reader skipped (bad
  header, truncated packet) is one record read and one quarantine row with its byte offset and
  length. `velodyne_hits` / lidar_scans: a record is a revolution built by `iter_scans`.
- `velodyne_sync` (read only when the drive asks for it or has no velodyne_hits.bin: see
  nclt.py): lidar_scans counts files (a file whose size is not a multiple of 8 bytes is
  quarantined whole), lidar_points counts the hits of the good files.
- `hokuyo_*`: a record is a scan; a truncated last record is one quarantined byte range.
- `lb3_cam<k>`: a record is a TIFF file; one that does not parse is quarantined.

Every scan's `end_time_ns` is its last point's time: its start plus the largest
`time_offset_ns` of its points (`_LidarWriter.add`), so the scan row and its points agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake import clock
from bridge_lake.errors import FormatError
from bridge_lake.formats.nclt import (
    SCAN_GEOMETRY,
    HokuyoReport,
    NcltSession,
    iter_hokuyo,
    iter_scans,
    read_lb3_image,
    read_velodyne_sync,
)
from bridge_lake.formats.nclt import constants as C
from bridge_lake.formats.nclt.hokuyo import (
    BATCH_RECORDS,
    decode_records,
    read_records_at,
    read_utimes,
    truncated_tail,
)
from bridge_lake.formats.nclt.kinds import utime_of
from bridge_lake.formats.nclt.scans import RING_INVALID, ScanReport, check_ring_order
from bridge_lake.lake.schemas import QUARANTINE_RAW_CAP
from bridge_lake.normalize.nclt_streams import (
    STREAMS,
    source_file,
    stream_info,
)
from bridge_lake.normalize.sink import DriveSink

POINT_BATCH_ROWS = 1 << 20
"""Points per lidar_points write (≈ 20 revolutions at 50k hits): large enough for Parquet
row groups, small enough that memory does not depend on the drive's length."""
SCAN_BATCH_ROWS = 1024
IMAGE_BATCH = 32
VELODYNE_FRAME = "velodyne"
"""Points stay in the NCLT Velodyne frame (z down, spec §5); REP-103 is the calibrated layer's."""
LB3_ROTATE_CW_DEG = 90


@dataclass
class LidarCounts:
    """What one lidar stream produced (beside the sink's counts)."""

    scans: int = 0
    points: int = 0
    cuts: dict[str, int] = field(default_factory=dict)
    skipped_ranges: int = 0
    skipped_bytes: int = 0
    quarantined_files: int = 0
    ring_order: str = "unchecked"
    reordered_points: int = 0


def const_strings(value: str, n: int) -> pa.StringArray:
    """A string column holding `value` n times, built from two buffers (no object per row)."""
    b = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(b)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b * n))


def _ring_column(ring: np.ndarray) -> pa.Array:
    """uint8 rings → int16 with RING_INVALID (laser_id outside 0..31) as null."""
    invalid = ring == RING_INVALID
    return pa.array(ring.astype(np.int16), mask=invalid if invalid.any() else None)


class _LidarWriter:
    """Collects scans of one stream and writes points and scan rows in bounded batches.

    Points go to the sink about POINT_BATCH_ROWS at a time (the sink's lidar_points writer
    encodes them on background threads); a scan row is written only after its points."""

    def __init__(self, sink: DriveSink, stream: str, counts: LidarCounts) -> None:
        self.sink = sink
        self.stream = stream
        self.counts = counts
        self.points: list[pa.RecordBatch] = []
        self.point_rows = 0
        self.scans: dict[str, list] = {k: [] for k in ("scan_id", "start", "end_ns", "n", "cut")}

    def add(
        self,
        start_utime: int,
        cut: str,
        hits: pa.RecordBatch,
        ring: np.ndarray,
        time_offset_ns: pa.Array,
    ) -> None:
        """One scan: `hits` has utime (µs), x, y, z, intensity; ring and offsets beside it.
        The scan ends at its last point: start + the largest offset (the start if none)."""
        n = hits.num_rows
        largest = pc.max(time_offset_ns).as_py() if n else None
        end_ns = int(clock.us_to_ns(np.int64(start_utime))) + int(largest or 0)
        utime = hits.column("utime").to_numpy()
        scan_id = int(self.sink.scan_ids(1)[0])
        columns = {
            "scan_id": pa.array(np.full(n, scan_id, dtype=np.int64)),
            "x": hits.column("x"),
            "y": hits.column("y"),
            "z": hits.column("z"),
            "intensity": pc.cast(hits.column("intensity"), pa.float32()),
            "ring": _ring_column(ring),
            "time_offset_ns": time_offset_ns,
        }
        batch = pa.RecordBatch.from_pydict(columns)
        perm = clock.stable_order(utime)
        if perm is not None:
            moved = clock.reorder_count(utime)
            self.sink.reordered(self.stream, "lidar_points", moved)
            self.counts.reordered_points += moved
            batch = batch.take(pa.array(perm))
        self.sink.read(self.stream, "lidar_points", n)
        self.points.append(batch)
        self.point_rows += n
        for key, value in zip(self.scans, (scan_id, start_utime, end_ns, n, cut), strict=True):
            self.scans[key].append(value)
        self.counts.scans += 1
        self.counts.points += n
        self.counts.cuts[cut] = self.counts.cuts.get(cut, 0) + 1
        if self.point_rows >= POINT_BATCH_ROWS:
            self.flush_points()
        if len(self.scans["scan_id"]) >= SCAN_BATCH_ROWS:
            self.flush_scans()

    def flush_points(self) -> None:
        if self.points:
            self.sink.write(self.stream, "lidar_points", pa.Table.from_batches(self.points))
        self.points, self.point_rows = [], 0

    def flush_scans(self) -> None:
        s = self.scans
        n = len(s["scan_id"])
        if n:
            self.sink.read(self.stream, "lidar_scans", n)
            table = pa.table(
                {
                    "time_ns": clock.us_to_ns(np.array(s["start"], dtype=np.int64)),
                    "stream": const_strings(self.stream, n),
                    "frame_id": const_strings(VELODYNE_FRAME, n),
                    "scan_id": np.array(s["scan_id"], dtype=np.int64),
                    "end_time_ns": np.array(s["end_ns"], dtype=np.int64),
                    "point_count": np.array(s["n"], dtype=np.int64),
                    "cut": pa.array(s["cut"], pa.string()),
                }
            )
            self.sink.write(self.stream, "lidar_scans", table)
        self.scans = {k: [] for k in s}

    def __enter__(self) -> _LidarWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        if exc_type is None:  # failing, the sink aborts every writer
            self.close()

    def close(self) -> None:
        """Points first: a scan row is only written once its points are (a crash aborts both)."""
        self.flush_points()
        self.flush_scans()


def _declare_lidar(sink: DriveSink, kind: str, rel: str) -> None:
    sink.declare(stream_info(kind, rel))
    sink.declare(stream_info(kind, rel, points=True))


def _head(path: Path, offset: int, length: int) -> bytes:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read(min(length, QUARANTINE_RAW_CAP))


def normalize_velodyne_hits(sink: DriveSink, path: Path, rel: str) -> LidarCounts:
    """velodyne_hits.bin → revolutions (lidar_scans) and their points (lidar_points)."""
    stream = "velodyne_hits"
    _declare_lidar(sink, stream, rel)
    counts = LidarCounts()
    report = ScanReport()
    with _LidarWriter(sink, stream, counts) as writer:
        for scan in iter_scans(path, report=report):
            p = scan.points
            writer.add(
                scan.start_utime,
                scan.cut,
                p,
                p.column("ring").to_numpy(),
                p.column("time_offset_ns"),
            )
    skipped = report.hits.skipped
    counts.ring_order = report.ring_order
    counts.skipped_ranges = len(skipped)
    counts.skipped_bytes = report.hits.skipped_bytes
    sink.read(stream, "lidar_points", len(skipped))
    sink.quarantine(
        stream,
        "lidar_points",
        source_file=rel,
        reasons=[r.reason for r in skipped],
        byte_offset=[r.start for r in skipped],
        byte_length=[r.end - r.start for r in skipped],
        raw=[_head(path, r.start, r.end - r.start) for r in skipped],
    )
    return counts


def _folder(session: NcltSession, paths: list[Path]) -> str:
    """The drive-relative folder holding `paths`, ending in `/` (a prefix source_file)."""
    common = Path(os.path.commonpath([p.parent for p in paths]))
    return source_file(session, common) + "/"


def sync_folder(session: NcltSession) -> str:
    """The source_file of the velodyne_sync stream: its folder, ending in `/`."""
    return _folder(session, session.scans)


def _by_name_utime(
    sink: DriveSink, stream: str, table: str, paths: list[Path]
) -> tuple[list[Path], np.ndarray]:
    """Files named by utime, stably sorted by it (counted as reordered if that moved any)."""
    utime = np.array([utime_of(p.name) for p in paths], dtype=np.int64)
    time_ns = clock.us_to_ns(utime)
    perm = clock.stable_order(time_ns)
    if perm is None:
        return paths, utime
    sink.reordered(stream, table, clock.reorder_count(time_ns))
    return [paths[i] for i in perm], utime[perm]


def normalize_velodyne_sync(sink: DriveSink, session: NcltSession) -> LidarCounts:
    """velodyne_sync/<utime>.bin → one lidar_scans row per file, its hits in lidar_points.

    The files carry no per-point time, only their name (whether it stamps the start, middle or
    end of the sweep is unverified, spec §6), so every point has the file's utime and a null
    `time_offset_ns`, and the scan's end (its last point's time) equals its start. Times are
    not invented from azimuths. `cut` is "frame" (the dataset chose the scan, not us)."""
    stream = "velodyne_sync"
    rel = sync_folder(session)
    _declare_lidar(sink, stream, rel)
    counts = LidarCounts()
    paths, utimes = _by_name_utime(sink, stream, "lidar_scans", session.scans)
    ring_lut: np.ndarray | None = None
    with _LidarWriter(sink, stream, counts) as writer:
        for index, (path, utime) in enumerate(zip(paths, utimes.tolist(), strict=True)):
            try:
                hits = read_velodyne_sync(path)
            except FormatError as exc:
                size = path.stat().st_size
                at = exc.offset or 0
                sink.read(stream, "lidar_scans", 1)
                sink.quarantine(
                    stream,
                    "lidar_scans",
                    source_file=source_file(session, path),
                    reasons=[exc.reason],
                    record_index=[index],
                    byte_offset=[at],
                    byte_length=[size - at],
                    raw=[_head(path, at, size - at)],
                )
                counts.quarantined_files += 1
                continue
            laser = hits.column("laser_id").to_numpy()
            if ring_lut is None and hits.num_rows:
                xyz = [hits.column(a).to_numpy() for a in "xyz"]
                derived = check_ring_order(*xyz, laser)
                counts.ring_order = "table" if derived is None else "derived"
                ring_lut = np.full(256, RING_INVALID, dtype=np.uint8)
                ring_lut[: C.LASER_COUNT] = C.RING_OF_LASER if derived is None else derived
            ring = ring_lut[laser] if ring_lut is not None else laser
            writer.add(utime, "frame", hits, ring, pa.nulls(hits.num_rows, pa.int32()))
    return counts


def normalize_hokuyo(sink: DriveSink, kind: str, path: Path, rel: str) -> HokuyoReport:
    """hokuyo_30m.bin / hokuyo_4m.bin → laser_scans (angles from SCAN_GEOMETRY, NaN = none)."""
    sink.declare(stream_info(kind, rel))
    table = STREAMS[kind].table
    geometry = SCAN_GEOMETRY[kind]
    report = HokuyoReport()
    record = geometry.record_dtype
    whole = path.stat().st_size // record.itemsize
    time_ns = clock.us_to_ns(read_utimes(kind, path, batch_records=BATCH_RECORDS))
    perm = clock.stable_order(time_ns)
    if perm is not None:
        sink.reordered(kind, table, clock.reorder_count(time_ns))
    del time_ns
    batches = (
        iter_hokuyo(kind, path, batch_records=BATCH_RECORDS, report=report)
        if perm is None
        else _hokuyo_in_order(kind, path, perm, report)
    )
    for batch in batches:
        n = batch.num_rows
        sink.read(kind, table, n)
        sink.write(
            kind,
            table,
            pa.table(
                {
                    "time_ns": clock.us_to_ns(batch.column("utime").to_numpy()),
                    "frame_id": const_strings(kind, n),
                    "angle_min_rad": np.full(n, geometry.angle_min, dtype=np.float32),
                    "angle_increment_rad": np.full(n, geometry.angle_increment, dtype=np.float32),
                    "ranges_m": batch.column("ranges"),
                }
            ),
        )
    if perm is not None:  # the sorted path does not go through iter_hokuyo's size check
        report.truncated = truncated_tail(path.stat().st_size, record.itemsize)
    if report.truncated is not None:
        r = report.truncated
        sink.read(kind, table, 1)
        sink.quarantine(
            kind,
            table,
            source_file=rel,
            reasons=[r.reason],
            record_index=[whole],
            byte_offset=[r.start],
            byte_length=[r.end - r.start],
            raw=[_head(path, r.start, r.end - r.start)],
        )
    return report


def _hokuyo_in_order(
    kind: str, path: Path, perm: np.ndarray, report: HokuyoReport
) -> Iterator[pa.RecordBatch]:
    """Records in master-time order, read batch by batch by permuted index (plain reads of
    the wanted records, no memory map: memory is one batch, whatever the file's length).

    Only for files whose utimes are not monotonic (never seen in real files, spec §11): the
    same decoding as iter_hokuyo (decode_records) over a permuted index."""
    for a in range(0, len(perm), BATCH_RECORDS):
        yield decode_records(kind, read_records_at(kind, path, perm[a : a + BATCH_RECORDS]), report)


def normalize_lb3(sink: DriveSink, session: NcltSession, camera: int) -> None:
    """lb3/Cam<k>/<utime>.tiff → camera_frames rows holding the unchanged TIFF bytes."""
    paths = session.images[camera]
    stream = f"lb3_cam{camera}"
    spec = STREAMS["lb3"]
    rel = _folder(session, paths)
    sink.declare(stream_info("lb3", rel, stream=stream, topic=spec.topic.format(k=camera)))
    paths, utimes = _by_name_utime(sink, stream, spec.table, paths)
    rows: dict[str, list] = {k: [] for k in ("time_ns", "width", "height", "data")}

    def flush() -> None:
        n = len(rows["data"])
        if not n:
            return
        sink.write(
            stream,
            spec.table,
            pa.table(
                {
                    "time_ns": clock.us_to_ns(np.array(rows["time_ns"], dtype=np.int64)),
                    "frame_id": const_strings(stream, n),
                    "camera": const_strings(stream, n),
                    "width": pa.array(rows["width"], pa.int32()),
                    "height": pa.array(rows["height"], pa.int32()),
                    "encoding": const_strings("tiff", n),
                    "rotate_cw_deg": np.full(n, LB3_ROTATE_CW_DEG, dtype=np.int16),
                    "data": pa.array(rows["data"], pa.binary()),
                }
            ),
        )
        for v in rows.values():
            v.clear()

    for index, (path, utime) in enumerate(zip(paths, utimes.tolist(), strict=True)):
        sink.read(stream, spec.table, 1)
        file_rel = source_file(session, path)
        try:
            image = read_lb3_image(path, file_rel)
        except FormatError as exc:
            sink.quarantine(
                stream,
                spec.table,
                source_file=file_rel,
                reasons=[exc.reason],
                record_index=[index],
                byte_offset=[exc.offset],
                raw=[_head(path, 0, QUARANTINE_RAW_CAP)],
            )
            continue
        rows["time_ns"].append(utime)
        rows["width"].append(image["width"])
        rows["height"].append(image["height"])
        rows["data"].append(image["data"])
        if len(rows["data"]) >= IMAGE_BATCH:
            flush()
    flush()

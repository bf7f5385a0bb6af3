"""Lake rows → serialized messages, lane by lane, in time order and in bounded batches.

A *lane* is one time-ordered run of rows that feeds one topic: the rows of one stream (and
one split value) of a mapping rule. The sink wrote every stream in master-time order, so a
lane is read in order with a Parquet filter (stream, split value, time window) that skips
row groups by their statistics, batch by batch, and each batch is serialized in one
vectorized call (`export.messages`). The exporter merges the lanes by time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bridge_lake.clock import NS_PER_S, nearest
from bridge_lake.errors import BridgeLakeError
from bridge_lake.export import messages as msg
from bridge_lake.export.mapping import TopicRule
from bridge_lake.export.trim import Window
from bridge_lake.formats import video
from bridge_lake.geometry import rpy_to_quaternion
from bridge_lake.lake import Lake

SMALL_BATCH_ROWS = 8_192
"""Rows of small messages serialized per call (IMU, CAN, GNSS, poses): about a minute of a
100 Hz stream. A lane holds its batch (rows and messages) until the merge passes it, so at
65,536 rows (11 minutes at 100 Hz) the NCLT export's memory grew with the drive up to the
cap (+90 MB from 1.5 to 3 minutes over nine such lanes); serializing is as fast either way."""
POINT_BATCH_POINTS = 1 << 20
"""Lidar points read per batch: a few revolutions, bounded whatever the drive's length."""
IMAGE_BATCH_ROWS = 32
COV21 = np.array([(i, j) for i in range(6) for j in range(i, 6)])
"""(row, col) of the 21 upper-triangle covariance values the lake stores, row by row."""
LAYOUTS = {"xyzirt": msg.VELODYNE_XYZIRT, "xyzi": msg.XYZI}


class ExportError(BridgeLakeError):
    """An export that cannot be made as asked (bad arguments, data the mapping cannot carry)."""


@dataclass
class Batch:
    """Messages of one lane, in time order: log times and serialized messages."""

    time_ns: np.ndarray
    messages: msg.Serialized


@dataclass
class Lane:
    """One time-ordered source of one topic."""

    topic: str
    rule: TopicRule
    frame_id: str
    selection: dict[str, object]
    """column → exact value selecting this lane's rows (stream, split value)."""
    rows: int = 0
    """rows in the export's windows (counted before writing: the health check's truth)."""
    first_ns: int | None = None
    extra: dict = field(default_factory=dict)


def dataset(lake: Lake, layer: str, table: str, drive: str) -> ds.Dataset:
    files = lake.partition_files(layer, table, drive)
    if not files:
        raise ExportError(f"drive {drive} has no {layer}/{table} partition in {lake.root}")
    fs = None if lake.is_local else pa.fs.PyFileSystem(pa.fs.FSSpecHandler(lake.fs))
    return ds.dataset(files, format="parquet", filesystem=fs)


def _filter(selection: dict[str, object], windows: list[Window] | None, time_col: str = "time_ns"):
    expr = None
    for col, value in selection.items():
        e = pc.field(col) == value
        expr = e if expr is None else expr & e
    if windows:
        w = None
        for win in windows:
            e = (pc.field(time_col) >= win.start_ns) & (pc.field(time_col) < win.end_ns)
            w = e if w is None else w | e
        expr = w if expr is None else expr & w
    return expr


def read_rows(
    lake: Lake,
    lane: Lane,
    drive: str,
    columns: list[str],
    windows: list[Window] | None,
    batch_rows: int,
) -> Iterator[pa.Table]:
    """The lane's rows in file (= time) order, `batch_rows` at a time.

    Read synchronously, one row group at a time, `batch_rows` rows per decoded batch: no
    background reader runs ahead. A dataset scanner did (its Acero sink stops only at 1 GiB
    queued, whatever `batch_readahead` says), so while the merge waited on the slowest lane
    every other lane had its whole filtered drive decoded in memory, drained as the export
    went on: the 5-min NCLT export held 200 MB of camera frames and 85 MB of Hokuyo ranges
    from its first seconds. Row groups are skipped by their statistics (the dataset's own
    pruning), and the batches are those the scanner gave, so the rows and their grouping
    are unchanged."""
    layer, table = lane.rule.table.split("/")
    data = dataset(lake, layer, table, drive)
    missing = [c for c in columns if c not in data.schema.names]
    if missing:
        raise ExportError(
            f"{layer}/{table} of drive {drive} has no column(s) {missing} that topic "
            f"{lane.topic} ({lane.rule.type}) needs; it has {data.schema.names}"
        )
    flt = _filter(lane.selection, windows)
    wanted = [*columns, *(c for c in _filter_columns(lane.selection, windows) if c not in columns)]
    schema = pa.schema([data.schema.field(c) for c in wanted])
    pending: list[pa.Table] = []
    n = 0
    for fragment in data.get_fragments():
        groups = fragment.subset(flt).row_groups if flt is not None else fragment.row_groups
        if not groups:
            continue
        with fragment.filesystem.open_input_file(fragment.path) as handle:
            part = pq.ParquetFile(handle, metadata=fragment.metadata, pre_buffer=False)
            present = [c for c in wanted if c in part.schema_arrow.names]
            for group in groups:
                for batch in part.iter_batches(batch_rows, [group.id], present, use_threads=True):
                    rows = _conform(pa.Table.from_batches([batch]), schema)
                    if flt is not None:
                        rows = rows.filter(_mask(rows, lane.selection, windows))
                    if rows.num_rows == 0:
                        continue
                    pending.append(rows.select(columns))
                    n += rows.num_rows
                    if n >= batch_rows:
                        yield pa.concat_tables(pending)
                        pending, n = [], 0
    if pending:
        yield pa.concat_tables(pending)


def _filter_columns(selection: dict[str, object], windows: list[Window] | None) -> list[str]:
    return [*selection, *(["time_ns"] if windows else [])]


def _mask(rows: pa.Table, selection: dict[str, object], windows: list[Window] | None):
    """`_filter` evaluated on in-memory rows (null = dropped, as the filter drops it): the
    compute kernels directly, not an Acero plan per batch (3x slower on 32-row batches)."""
    mask = None
    for col, value in selection.items():
        e = pc.equal(rows.column(col), value)
        mask = e if mask is None else pc.and_kleene(mask, e)
    if windows:
        t, w = rows.column("time_ns"), None
        for win in windows:
            e = pc.and_kleene(pc.greater_equal(t, win.start_ns), pc.less(t, win.end_ns))
            w = e if w is None else pc.or_kleene(w, e)
        mask = w if mask is None else pc.and_kleene(mask, w)
    return mask


def _conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """A part's rows in the dataset's schema (column order and types of its first part; a
    column a part lacks is null), as the dataset scanner gave them."""
    if rows.schema.equals(schema):
        return rows
    arrays = [
        rows.column(f.name).cast(f.type)
        if f.name in rows.column_names
        else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _np(table: pa.Table, name: str, dtype=np.float64) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)


def _vec(table: pa.Table, prefix: str) -> np.ndarray:
    return np.stack([_np(table, f"{prefix}_{a}") for a in "xyz"], -1)


def _times(table: pa.Table) -> np.ndarray:
    return table.column("time_ns").to_numpy().astype(np.int64)


# --- builders: one per message type, rows of a lane → Serialized -----------------------------


class Builder(ABC):
    """Turns a lane's rows into messages of one type (stateful where decoding needs it)."""

    columns: list[str] = ["time_ns"]
    batch_rows = SMALL_BATCH_ROWS

    def __init__(
        self, lake: Lake, drive: str, lane: Lane, ros: int, shift_ns: int = 0, codec=msg
    ) -> None:
        self.lake, self.drive, self.lane, self.ros = lake, drive, lane, ros
        self.codec = codec
        """the serializers: export.messages (ROS 1 / ROS 2) or export.protobuf (same calls)"""
        self.shift_ns = shift_ns
        """subtracted from every time (log time and header stamp): --time-base zero"""

    def t(self, rows: pa.Table) -> np.ndarray:
        """The rows' master times as the export writes them (shifted by the time base)."""
        return _times(rows) - self.shift_ns

    def rows(self, windows: list[Window] | None) -> Iterator[pa.Table]:
        return read_rows(self.lake, self.lane, self.drive, self.columns, windows, self.batch_rows)

    def batches(self, windows: list[Window] | None) -> Iterator[Batch]:
        for rows in self.rows(windows):
            yield Batch(self.t(rows), self.build(rows))

    @abstractmethod
    def build(self, rows: pa.Table) -> msg.Serialized:
        """The rows as serialized messages, one per row (in row order)."""


class ImuBuilder(Builder):
    columns = ["time_ns"] + [
        f"{v}_{a}" for v in ("angular_velocity", "linear_acceleration") for a in "xyz"
    ] + [f"orientation_{a}" for a in "xyzw"]  # fmt: skip

    def __init__(self, lake, drive, lane, ros, shift_ns=0, codec=msg) -> None:
        super().__init__(lake, drive, lane, ros, shift_ns, codec)
        self.join = None
        spec = lane.rule.options.get("orientation_from")
        if spec:
            side = Lane(lane.topic, lane.rule, lane.frame_id, {"stream": spec["stream"]})
            tables = list(
                read_rows(lake, side, drive, ["time_ns", *self.columns[7:]], None, 1 << 22)
            )
            t = pa.concat_tables(tables) if tables else None
            if t is not None and t.num_rows:
                q = np.stack([_np(t, f"orientation_{a}") for a in "xyzw"], -1)
                self.join = (_times(t), q, int(float(spec.get("tolerance_ms", 10)) * 1e6))

    def build(self, rows: pa.Table) -> msg.Serialized:
        t = _times(rows)
        q = np.stack([_np(rows, f"orientation_{a}") for a in "xyzw"], -1)
        if self.join is not None:
            jt, jq, tol = self.join
            i = nearest(jt, t)
            near = np.abs(jt[i] - t) <= tol
            q = np.where((near & np.isnan(q).any(axis=1))[:, None], jq[i], q)
        return self.codec.imu(
            t - self.shift_ns,
            self.lane.frame_id,
            orientation=q,
            angular_velocity=_vec(rows, "angular_velocity"),
            linear_acceleration=_vec(rows, "linear_acceleration"),
            ros=self.ros,
        )


class NavSatFixBuilder(Builder):
    columns = ["time_ns", "lat_deg", "lon_deg", "alt_m", "fix_mode", "error_m"]

    def build(self, rows: pa.Table) -> msg.Serialized:
        opts = self.lane.rule.options
        mode = _np(rows, "fix_mode", np.float64)
        status = np.zeros(len(mode), np.int8)
        for k, v in (opts.get("status_by_fix_mode") or {}).items():
            status[mode == int(k)] = int(v)
        status[np.isnan(mode)] = 0
        err = _np(rows, "error_m")
        known = np.isfinite(err)
        cov = np.zeros((len(err), 9))
        cov[:, 0] = cov[:, 4] = cov[:, 8] = np.where(known, err**2, 0.0)
        return self.codec.nav_sat_fix(
            self.t(rows),
            self.lane.frame_id,
            latitude_deg=_np(rows, "lat_deg"),
            longitude_deg=_np(rows, "lon_deg"),
            altitude_m=_np(rows, "alt_m"),
            status=status,
            service=int(opts.get("service", 1)),
            position_covariance=cov,
            position_covariance_type=np.where(known, 1, 0).astype(np.uint8),  # 1 = approximated
            ros=self.ros,
        )


class CanBuilder(Builder):
    columns = ["time_ns", "can_id", "is_extended", "is_remote", "dlc", "data"]

    def build(self, rows: pa.Table) -> msg.Serialized:
        data = rows.column("data").combine_chunks()
        lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
        if len(lengths) and lengths.max() > 8:
            raise ExportError(
                f"{self.lane.topic}: a CAN frame carries {int(lengths.max())} bytes; "
                "can_msgs/Frame holds 8 (CAN FD is not supported by that message)"
            )
        padded = np.zeros((len(lengths), 8), np.uint8)
        flat = np.frombuffer(data.buffers()[2], np.uint8) if len(lengths) else np.zeros(0, np.uint8)
        offsets = np.frombuffer(data.buffers()[1], np.int32)[
            data.offset : data.offset + len(lengths) + 1
        ]
        col = np.arange(8)[None, :]
        mask = col < lengths[:, None]
        src = (offsets[:-1, None] + col)[mask]
        padded[mask] = flat[src]
        remote = rows.column("is_remote").fill_null(False)
        return self.codec.can_frame(
            self.t(rows),
            self.lane.frame_id,
            can_id=_np(rows, "can_id", np.int64),
            is_rtr=np.asarray(remote.to_numpy(zero_copy_only=False), bool),
            is_extended=np.asarray(rows.column("is_extended").to_numpy(zero_copy_only=False), bool),
            is_error=np.zeros(len(lengths), bool),
            dlc=_np(rows, "dlc", np.int64),
            data=padded,
            ros=self.ros,
        )


class LaserScanBuilder(Builder):
    columns = [
        "time_ns",
        "angle_min_rad",
        "angle_increment_rad",
        "range_min_m",
        "range_max_m",
        "ranges_m",
    ]
    batch_rows = 4096

    def build(self, rows: pa.Table) -> msg.Serialized:
        ranges = rows.column("ranges_m").combine_chunks()
        counts = pc.list_value_length(ranges).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = np.asarray(ranges.flatten().to_numpy(zero_copy_only=False), np.float32)
        flat = np.where(np.isnan(flat), np.float32(np.inf), flat)  # REP-117: +Inf = no return
        amin = _np(rows, "angle_min_rad")
        inc = _np(rows, "angle_increment_rad")
        period = self.lane.extra.get("period_s", 0.0)
        return self.codec.laser_scan(
            self.t(rows),
            self.lane.frame_id,
            angle_min=amin,
            angle_max=amin + (counts - 1) * inc,
            angle_increment=inc,
            time_increment=0.0,
            scan_time=period,
            range_min=np.nan_to_num(_np(rows, "range_min_m"), nan=0.0),
            range_max=np.nan_to_num(_np(rows, "range_max_m"), nan=np.inf),
            counts=counts,
            ranges=flat,
            ros=self.ros,
        )


def _quaternions(rows: pa.Table) -> np.ndarray:
    r, p, y = (_np(rows, c) for c in ("roll_rad", "pitch_rad", "yaw_rad"))
    ok = np.isfinite(r) & np.isfinite(p) & np.isfinite(y)
    q = np.full((len(r), 4), np.nan)
    if ok.any():
        q[ok] = rpy_to_quaternion(r[ok], p[ok], y[ok])
    return q


class OdometryBuilder(Builder):
    """normalized/odometry or ground_truth rows (pose, 21-value covariance, twist in the child
    frame) or calibrated/poses rows → nav_msgs/Odometry. What the lake does not know (a null
    covariance or twist, every twist covariance, calibrated/poses' twist) goes out as
    UNKNOWN_COVARIANCE, never as zeros, which would claim "exact"; a null twist is NaN."""

    def __init__(self, lake, drive, lane, ros, shift_ns=0, codec=msg) -> None:
        super().__init__(lake, drive, lane, ros, shift_ns, codec)
        self.poses = lane.rule.table == "calibrated/poses"
        self.columns = (
            ["time_ns", "x_m", "y_m", "z_m", "qx", "qy", "qz", "qw"]
            if self.poses
            else [
                "time_ns",
                *("x_m", "y_m", "z_m", "roll_rad", "pitch_rad", "yaw_rad", "covariance"),
                *(f"{v}_{a}" for v in ("linear_velocity", "angular_velocity") for a in "xyz"),
            ]
        )

    def build(self, rows: pa.Table) -> msg.Serialized:
        pos = np.stack([_np(rows, c) for c in ("x_m", "y_m", "z_m")], -1)
        twist: dict[str, np.ndarray | None] = {"linear_velocity": None, "angular_velocity": None}
        if self.poses:
            q = np.stack([_np(rows, c) for c in ("qx", "qy", "qz", "qw")], -1)
            cov = None
        else:
            q = _quaternions(rows)
            cov = _covariance36(rows.column("covariance"))
            twist = {name: _vec(rows, name) for name in twist}  # nulls arrive as NaN
        return self.codec.odometry(
            self.t(rows),
            self.lane.frame_id,
            child_frame_id=self.lane.extra["child_frame_id"],
            position=pos,
            orientation=q,
            pose_covariance=cov,
            **twist,
            ros=self.ros,
        )


def _covariance36(column: pa.ChunkedArray) -> np.ndarray:
    """The lake's 21 upper-triangle values per row → full symmetric 6x6 (null → unknown)."""
    arr = column.combine_chunks()
    n = len(arr)
    out = np.tile(msg.UNKNOWN_COVARIANCE.reshape(6, 6), (n, 1, 1))
    if n and arr.null_count < n:
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        values = np.asarray(arr.flatten().to_numpy(zero_copy_only=False), np.float64)
        values = np.nan_to_num(values.reshape(-1, 21))
        sub = np.zeros((int(valid.sum()), 6, 6))
        sub[:, COV21[:, 0], COV21[:, 1]] = values
        sub[:, COV21[:, 1], COV21[:, 0]] = values
        out[valid] = sub
    return out.reshape(n, 36)


class TfBuilder(Builder):
    """calibrated/poses → one TFMessage (map → base_link) per pose."""

    columns = ["time_ns", "frame_id", "child_frame_id", "x_m", "y_m", "z_m", "qx", "qy", "qz", "qw"]

    def build(self, rows: pa.Table) -> msg.Serialized:
        n = rows.num_rows
        return (
            self.codec.tf_message(
                self.t(rows),
                parent_frame_ids=["map"],
                child_frame_ids=["base_link"],
                translation=np.stack([_np(rows, c) for c in ("x_m", "y_m", "z_m")], -1),
                rotation=np.stack([_np(rows, c) for c in ("qx", "qy", "qz", "qw")], -1),
                transforms_per_message=1,
                ros=self.ros,
            )
            if n
            else msg.Serialized(np.zeros(0, np.uint8), np.zeros(1, np.int64))
        )


class TfStaticBuilder(Builder):
    """calibrated/tf_static → one TFMessage holding every static transform, stamped at the
    export's start (latched: a replay node gets it whenever it subscribes)."""

    columns = ["parent_frame", "child_frame", "x_m", "y_m", "z_m", "qx", "qy", "qz", "qw"]

    def batches(self, windows: list[Window] | None) -> Iterator[Batch]:
        layer, table = self.lane.rule.table.split("/")
        rows = dataset(self.lake, layer, table, self.drive).to_table(columns=self.columns)
        if rows.num_rows:
            stamp = int(self.lane.extra["stamp_ns"]) - self.shift_ns
            yield Batch(np.array([stamp], np.int64), self.build(rows))

    def build(self, rows: pa.Table) -> msg.Serialized:
        k = rows.num_rows
        stamp = int(self.lane.extra["stamp_ns"]) - self.shift_ns
        return self.codec.tf_message(
            np.full(k, stamp, np.int64),
            parent_frame_ids=rows.column("parent_frame").to_pylist(),
            child_frame_ids=rows.column("child_frame").to_pylist(),
            translation=np.stack([_np(rows, c) for c in ("x_m", "y_m", "z_m")], -1),
            rotation=np.stack([_np(rows, c) for c in ("qx", "qy", "qz", "qw")], -1),
            transforms_per_message=k,
            ros=self.ros,
        )


POINT_COLUMNS = ["scan_id", "x", "y", "z", "intensity", "ring", "time_offset_ns"]


class ScanPoints:
    """Points of a scan-id range from a lidar_points partition.

    The footers are read once: each row group's scan-id range (from its statistics) says
    which row groups a range needs, and only those are read, each part opened per read with
    its cached footer. A dataset filter would reparse every part's footer for every batch of
    scans, and part readers kept open hold about a megabyte of buffers each, which over the
    dozens of parts of a long drive would make memory grow with its length.
    """

    def __init__(self, lake: Lake, layer: str, drive: str) -> None:
        self.lake = lake
        self.paths = lake.partition_files(layer, "lidar_points", drive)
        if not self.paths:
            raise ExportError(f"drive {drive} has no {layer}/lidar_points partition")
        fs = None if lake.is_local else lake.fs
        self.footers = [pq.read_metadata(p, filesystem=fs) for p in self.paths]
        self.groups: list[tuple[int, int, int, int]] = []
        for i, md in enumerate(self.footers):
            col = md.schema.to_arrow_schema().get_field_index("scan_id")
            for g in range(md.num_row_groups):
                stats = md.row_group(g).column(col).statistics
                if stats is None or not stats.has_min_max:
                    self.groups.append((i, g, np.iinfo(np.int64).min, np.iinfo(np.int64).max))
                else:
                    self.groups.append((i, g, int(stats.min), int(stats.max)))

    def _read_groups(self, i: int, groups: list[int]) -> pa.Table:
        if self.lake.is_local:
            f = pq.ParquetFile(self.paths[i], metadata=self.footers[i])
            return f.read_row_groups(groups, columns=POINT_COLUMNS)
        with self.lake.fs.open(self.paths[i], "rb") as handle:
            f = pq.ParquetFile(handle, metadata=self.footers[i])
            return f.read_row_groups(groups, columns=POINT_COLUMNS)

    def read(self, lo: int, hi: int) -> pa.Table:
        """Rows with lo <= scan_id <= hi. Parts hold scans in id order, so the rows are a
        contiguous run of the row groups read: cut by binary search, no filter pass."""
        wanted: dict[int, list[int]] = {}
        for i, g, mn, mx in self.groups:
            if mx >= lo and mn <= hi:
                wanted.setdefault(i, []).append(g)
        if not wanted:
            return pa.table({c: [] for c in POINT_COLUMNS})
        table = pa.concat_tables(self._read_groups(i, g) for i, g in wanted.items())
        ids = table.column("scan_id").to_numpy()
        if len(ids) > 1 and np.any(ids[1:] < ids[:-1]):  # not in id order: filter instead
            keep = (ids >= lo) & (ids <= hi)
            return table.filter(pa.array(keep))
        a, b = np.searchsorted(ids, lo, "left"), np.searchsorted(ids, hi, "right")
        return table.slice(int(a), int(b - a))


class PointCloudBuilder(Builder):
    """lidar_scans rows (one message each, stamped at the scan start) with their points from
    normalized/lidar_points (sensor frame) or calibrated/lidar_points (base_link), read by
    scan-id range so row-group statistics skip the rest of the drive."""

    columns = ["time_ns", "scan_id", "point_count"]
    batch_rows = 16

    def __init__(self, lake, drive, lane, ros, shift_ns=0, codec=msg) -> None:
        super().__init__(lake, drive, lane, ros, shift_ns, codec)
        where = lane.rule.options.get("points", "sensor")
        if where not in ("sensor", "base_link"):
            raise ExportError(f"{lane.topic}: options.points must be sensor or base_link")
        self.points = ScanPoints(
            lake, "calibrated" if where == "base_link" else "normalized", drive
        )
        layout = lane.rule.options.get("layout", "xyzirt")
        if layout not in LAYOUTS:
            raise ExportError(f"{lane.topic}: options.layout must be one of {list(LAYOUTS)}")
        self.layout = LAYOUTS[layout]

    def rows(self, windows):
        for scans in read_rows(self.lake, self.lane, self.drive, self.columns, windows, 1 << 16):
            counts = _np(scans, "point_count", np.int64)
            start = 0
            while start < scans.num_rows:  # about POINT_BATCH_POINTS points per batch
                stop = start + 1 + int(np.searchsorted(
                    np.cumsum(counts[start + 1 :]), POINT_BATCH_POINTS - counts[start]
                ))  # fmt: skip
                yield scans.slice(start, stop - start)
                start = stop

    def build(self, scans: pa.Table) -> msg.Serialized:
        ids = scans.column("scan_id").to_numpy()
        counts = _np(scans, "point_count", np.int64)
        pts = self.points.read(int(ids.min()), int(ids.max()))
        pid = pts.column("scan_id").to_numpy()
        if len(pid) and np.any(np.diff(pid) < 0):
            pts = pts.take(np.argsort(pid, kind="stable"))
            pid = pts.column("scan_id").to_numpy()
        pos = np.minimum(np.searchsorted(ids, pid), len(ids) - 1)  # ids ascend within a lane
        keep = ids[pos] == pid  # points of other streams' scans inside the id range
        if not keep.all():
            pts, pid, pos = pts.filter(pa.array(keep)), pid[keep], pos[keep]
        got = np.bincount(pos, minlength=len(ids))
        if not np.array_equal(got, counts):
            bad = int(ids[np.flatnonzero(got != counts)[0]])
            raise ExportError(
                f"{self.lane.topic}: scan {bad} has a point count that its points do not match"
            )
        columns = {
            c: np.asarray(pts.column(c).to_numpy(zero_copy_only=False), np.float32) for c in "xyz"
        }
        columns["intensity"] = np.nan_to_num(_np(pts, "intensity", np.float32), nan=0.0)
        columns["ring"] = pts.column("ring").fill_null(0).to_numpy().astype(np.uint16)
        columns["time"] = (
            pts.column("time_offset_ns").fill_null(0).to_numpy().astype(np.float64) / NS_PER_S
        ).astype(np.float32)
        return self.codec.point_cloud2(
            self.t(scans),
            self.lane.frame_id,
            counts=counts,
            columns={f.name: columns[f.name] for f in self.layout.fields},
            fields=self.layout,
            ros=self.ros,
        )


class CompressedBuilder(Builder):
    """camera_frames kept encoded: CompressedImage (format = the lake's encoding) or
    foxglove CompressedVideo (H.264 access units)."""

    columns = ["time_ns", "encoding", "data"]
    batch_rows = IMAGE_BATCH_ROWS

    def build(self, rows: pa.Table) -> msg.Serialized:
        encodings = set(rows.column("encoding").to_pylist())
        if len(encodings) != 1:
            raise ExportError(f"{self.lane.topic}: frames of several encodings {encodings}")
        (encoding,) = encodings
        data = rows.column("data").combine_chunks()
        if self.lane.rule.type == "foxglove_msgs/msg/CompressedVideo":
            if encoding != "h264":
                raise ExportError(f"{self.lane.topic}: CompressedVideo needs h264, not {encoding}")
            return self.codec.compressed_video(
                self.t(rows), self.lane.frame_id, format="h264", data=data, ros=self.ros
            )
        return self.codec.compressed_image(
            self.t(rows), self.lane.frame_id, format=encoding, data=data, ros=self.ros
        )


class ImageBuilder(Builder):
    """camera_frames decoded to raw pixels (PyAV: H.264 access units in order, TIFF/PNG/JPEG
    one by one); raw rgb8/bgr8/mono8 rows pass through. `options.encoding`: rgb8 (default)
    or bgr8. A trimmed export starts decoding at the key frame before its window and drops
    the frames before it, so its first image is whole."""

    columns = ["time_ns", "encoding", "width", "height", "is_keyframe", "data"]
    batch_rows = IMAGE_BATCH_ROWS

    def __init__(self, lake, drive, lane, ros, shift_ns=0, codec=msg) -> None:
        super().__init__(lake, drive, lane, ros, shift_ns, codec)
        self.encoding = lane.rule.options.get("encoding", "rgb8")
        if self.encoding not in ("rgb8", "bgr8"):
            raise ExportError(f"{lane.topic}: options.encoding must be rgb8 or bgr8")
        self.decoder: video.Decoder | None = None
        """the lane's H.264 context: access units are decoded in order"""
        self.intra: dict[str, video.Decoder] = {}
        self.reformatter = video.Reformatter()

    def batches(self, windows: list[Window] | None) -> Iterator[Batch]:
        wanted = windows
        if windows:
            windows = [Window(self._keyframe_before(w.start_ns), w.end_ns) for w in windows]
        for rows in self.rows(windows):
            t = _times(rows)
            images = self.build(rows)
            if wanted:
                keep = np.zeros(len(t), bool)
                for w in wanted:
                    keep |= (t >= w.start_ns) & (t < w.end_ns)
                if not keep.all():
                    t, images = t[keep], images.take(np.flatnonzero(keep))
            if len(t):
                yield Batch(t - self.shift_ns, images)

    def _keyframe_before(self, start_ns: int) -> int:
        layer, table = self.lane.rule.table.split("/")
        data = dataset(self.lake, layer, table, self.drive)
        flt = (pc.field("time_ns") <= start_ns) & pc.field("is_keyframe")
        sel = _filter(self.lane.selection, None)
        rows = data.to_table(columns=["time_ns"], filter=flt if sel is None else flt & sel)
        return int(pc.max(rows.column("time_ns")).as_py()) if rows.num_rows else start_ns

    def build(self, rows: pa.Table) -> msg.Serialized:
        frames = [
            self._decode(enc, data, w, h)
            for enc, data, w, h in zip(
                rows.column("encoding").to_pylist(),
                rows.column("data").to_pylist(),
                rows.column("width").to_pylist(),
                rows.column("height").to_pylist(),
                strict=True,
            )
        ]
        h = np.array([f.shape[0] for f in frames], np.int64)
        w = np.array([f.shape[1] for f in frames], np.int64)
        c = np.array([1 if f.ndim == 2 else f.shape[2] for f in frames], np.int64)
        if len(set(c.tolist())) > 1:
            raise ExportError(f"{self.lane.topic}: frames mix mono and colour")
        enc = "mono8" if len(c) and c[0] == 1 else self.encoding
        data = pa.array([f.tobytes() for f in frames], pa.large_binary())
        return self.codec.image(
            self.t(rows), self.lane.frame_id, height=h, width=w, encoding=enc, step=w * c,
            data=data, ros=self.ros,
        )  # fmt: skip

    def _decode(self, encoding: str, data: bytes, width: int | None, height: int | None):
        if encoding in ("rgb8", "bgr8", "mono8"):
            if not width or not height:
                raise ExportError(f"{self.lane.topic}: raw {encoding} frames need width/height")
            img = np.frombuffer(data, np.uint8).reshape(height, width, -1)
            if encoding == "mono8":
                return img[:, :, 0]
            return img if encoding == self.encoding else img[:, :, ::-1]
        if encoding not in video.CODECS:
            raise ExportError(f"{self.lane.topic}: cannot decode {encoding!r} frames to an Image")
        if encoding in video.STREAMED:
            if self.decoder is None:
                self.decoder = video.Decoder(encoding)
            ctx = self.decoder
        else:
            ctx = self.intra.get(encoding) or self.intra.setdefault(
                encoding, video.Decoder(encoding)
            )
        frames = ctx.decode(data)
        if not frames:
            raise ExportError(
                f"{self.lane.topic}: a {encoding} frame gave no picture (stream starts without "
                "a key frame, or the decoder delays frames, e.g. B-frames); map the camera as "
                "foxglove_msgs/msg/CompressedVideo or sensor_msgs/msg/CompressedImage instead"
            )
        fmt = "rgb24" if self.encoding == "rgb8" else "bgr24"
        return self.reformatter.to_ndarray(frames[-1], fmt)


BUILDERS: dict[str, type[Builder]] = {
    "sensor_msgs/msg/Imu": ImuBuilder,
    "sensor_msgs/msg/NavSatFix": NavSatFixBuilder,
    "can_msgs/msg/Frame": CanBuilder,
    "sensor_msgs/msg/PointCloud2": PointCloudBuilder,
    "sensor_msgs/msg/Image": ImageBuilder,
    "sensor_msgs/msg/CompressedImage": CompressedBuilder,
    "foxglove_msgs/msg/CompressedVideo": CompressedBuilder,
    "sensor_msgs/msg/LaserScan": LaserScanBuilder,
    "nav_msgs/msg/Odometry": OdometryBuilder,
}

__all__ = ["BUILDERS", "Batch", "Builder", "ExportError", "Lane", "dataset", "read_rows"]

"""sensor_msgs/PointCloud2 from normalized/lidar_scans with their points (in the sensor frame,
or in base_link through calibrated/lidar_transforms); protobuf: foxglove.PointCloud.

One unorganized cloud (height 1, width counts[i]) per scan, stamped at the scan start. The
points of all clouds are packed into one structured array of the point layout
(`messages.pointcloud`); its bytes, cut at cumsum(counts) * point_step, are the clouds'
`data`, joined with the per-cloud header prefix and is_dense byte in one call
(serialized.join), or, for big clouds, written in place cloud by cloud. Little endian,
row_step = width * point_step, is_dense True unless the cloud has a NaN in x, y or z.
foxglove.PointCloud carries the same point bytes with pose identity (points in frame_id) and
point_stride = point_step; it has no is_dense (NaN points are kept) nor height/width.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from foxglove_schemas_protobuf.PackedElementField_pb2 import PackedElementField
from foxglove_schemas_protobuf.PointCloud_pb2 import PointCloud
from numpy.typing import ArrayLike

from bridge_lake.clock import NS_PER_S
from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.pointcloud import (
    VELODYNE_XYZIRT,
    XYZI,
    PointLayout,
    fill,
    pack,
)
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join, ragged_part
from bridge_lake.export.protobuf.geometry import IDENTITY
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder, ExportError, np_column, read_rows
from bridge_lake.formats.ros.wire import U1, U4, Layout, header_values
from bridge_lake.geometry import transform_points
from bridge_lake.lake import Lake

POINT_BATCH_POINTS = 1 << 20
"""Lidar points read per batch: a few revolutions, bounded whatever the drive's length."""
LAYOUTS = {"xyzirt": VELODYNE_XYZIRT, "xyzi": XYZI}
"""`options.layout` of a mapping rule."""
POINT_COLUMNS = ["scan_id", "x", "y", "z", "intensity", "ring", "time_offset_ns"]
ROS_LIMIT = 2**32
"""A cloud's data length is a uint32."""
PROTOBUF_LIMIT = 2**31
"""Protobuf messages must stay below 2 GiB (its parsers' limit)."""
NUMERIC_KINDS = {"u": "UINT", "i": "INT", "f": "FLOAT"}
CONVERT_BLOCK = 1 << 16
"""Point times converted per block (512 KiB of float64 in flight, in L2)."""
DIRECT_MIN_CLOUD_BYTES = 64 << 10
"""From this mean cloud size up, clouds are written straight into the message buffer one by
one (`_clouds_in_place`); smaller ones are packed together and joined in one Arrow call,
which has no Python work per cloud."""


@dataclass(frozen=True)
class PointCloudColumns:
    stamp: np.ndarray
    frame_id: str
    layout: PointLayout
    offsets: np.ndarray
    """(n + 1) into the flattened points"""
    values: list[np.ndarray]
    """one column per field of the layout, converted to its type"""


def columns(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    counts: ArrayLike,
    columns: Mapping[str, ArrayLike],
    fields: PointLayout = VELODYNE_XYZIRT,
) -> PointCloudColumns:
    """`columns[name]` holds the points of all clouds back to back for every field of
    `fields` (shape (sum(counts),), or (sum(counts), count) for multi-value fields); extra
    columns are ignored. Values convert to the field's type (floats round to float32;
    integers must fit)."""
    if not isinstance(fields, PointLayout):
        raise ValueError(f"fields must be a PointLayout, got {type(fields).__name__}")
    stamp = arg.stamps(stamp_ns)
    offsets = arg.counts("counts", counts, stamp.size)
    frame_id = arg.text("frame_id", frame_id)
    total = int(offsets[-1])
    values = [arg.column(columns, f.name, total, f.dtype, f.count) for f in fields.fields]
    return PointCloudColumns(stamp, frame_id, fields, offsets, values)


def _largest(c: PointCloudColumns, limit: int, what: str) -> None:
    width = np.diff(c.offsets)
    if width.size and int(width.max()) * c.layout.point_step >= limit:
        raise ValueError(f"counts: a cloud of {int(width.max())} points exceeds {what} of data")


def ros(c: PointCloudColumns, ros: int, seq_start: int) -> Serialized:
    _largest(c, ROS_LIMIT, "4 GiB")
    fields, offsets = c.layout, c.offsets
    n = c.stamp.size
    width = np.diff(offsets)
    step = fields.point_step
    total = int(offsets[-1])

    prefix = Layout.message(ros)
    prefix.header(c.frame_id)
    prefix.constant(U4, 1)  # height
    prefix.field("width", U4)
    prefix.constant(U4, len(fields.fields))
    for f in fields.fields:
        prefix.string(f.name)
        prefix.constant(U4, f.offset)
        prefix.constant(U1, f.datatype)
        prefix.constant(U4, f.count)
    prefix.constant(U1, 0)  # is_bigendian
    prefix.constant(U4, step)
    prefix.field("row_step", U4)
    prefix.field("data_length", U4)
    row_step = width * step
    head = prefix.fill(
        n,
        {
            **header_values(c.stamp, ros, seq_start),
            "width": width,
            "row_step": row_step,
            "data_length": row_step,
        },
    )
    checked = [
        v for f, v in zip(fields.fields, c.values, strict=True)
        if f.name in ("x", "y", "z") and f.dtype.kind == "f" and f.count == 1
    ]  # fmt: skip
    if n and total * step >= n * DIRECT_MIN_CLOUD_BYTES:
        return _clouds_in_place(fields, c.values, _dense(checked, offsets), offsets, head)
    points = pack(fields, c.values, total)
    is_dense = _dense(checked, offsets)
    return join(
        [
            fixed_part(head),
            ragged_part(points.view(np.uint8), offsets * step),
            fixed_part(is_dense.view(np.uint8).reshape(n, 1)),
        ]
    )


def _dense(checked: list[np.ndarray], offsets: np.ndarray) -> np.ndarray:
    """is_dense of each cloud: no NaN in any of the `checked` columns among its points. The
    minimum of a run is NaN exactly when the run holds a NaN, so one `minimum.reduceat` a column
    over the non-empty clouds' starts replaces a boolean mask of every point."""
    dense = np.ones(offsets.size - 1, bool)
    full = offsets[1:] > offsets[:-1]
    if checked and full.any():
        starts = offsets[:-1][full]
        for column in checked:
            dense[full] &= ~np.isnan(np.minimum.reduceat(column, starts))
    return dense


def _clouds_in_place(
    layout: PointLayout,
    values: list[np.ndarray],
    is_dense: np.ndarray,
    offsets: np.ndarray,
    head: np.ndarray,
) -> Serialized:
    """Large clouds written straight into the output, one cloud at a time: each cloud's
    points are stored into their place in the message buffer. Packing all points first and
    joining the parts after touches every byte twice, more than the per-cloud loop costs for
    clouds this big."""
    n, head_size = head.shape
    step = layout.point_step
    sizes = head_size + np.diff(offsets) * step + 1  # + is_dense
    bounds = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=bounds[1:])
    out = np.empty(int(bounds[-1]), np.uint8)
    out[bounds[:-1, None] + np.arange(head_size)] = head
    out[bounds[1:] - 1] = is_dense
    dtype = layout.dtype
    covered = sum(f.size for f in layout.fields) == step
    for i, (a, b) in enumerate(itertools.pairwise(offsets.tolist())):
        start = int(bounds[i]) + head_size
        region = out[start : start + (b - a) * step]
        if not covered:
            region[:] = 0
        fill(region.view(dtype), layout, values, a)
    return Serialized(out, bounds)


def packed_fields(layout: PointLayout) -> list[PackedElementField]:
    """The layout's fields as foxglove PackedElementFields. PackedElementField has no count, so
    a field of count k > 1 becomes k fields "name[0]" .. "name[k-1]" at consecutive offsets."""
    out = []
    for f in layout.fields:
        numeric = PackedElementField.NumericType.Value(
            f"{NUMERIC_KINDS[f.dtype.kind]}{8 * f.dtype.itemsize}"
        )
        names = [f.name] if f.count == 1 else [f"{f.name}[{k}]" for k in range(f.count)]
        for k, name in enumerate(names):
            out.append(
                PackedElementField(name=name, offset=f.offset + k * f.dtype.itemsize, type=numeric)
            )
    return out


def protobuf(c: PointCloudColumns) -> Serialized:
    _largest(c, PROTOBUF_LIMIT, "2 GiB")
    step = c.layout.point_step
    points = pack(c.layout, c.values, int(c.offsets[-1]))
    out = Fields(c.stamp.size)
    out.timestamp(1, c.stamp)
    out.string(2, c.frame_id)
    constant = PointCloud(pose=IDENTITY, point_stride=step, fields=packed_fields(c.layout))
    out.constant(constant.SerializeToString())  # fields 3 .. 5
    out.binary(6, ragged_part(points.view(np.uint8), c.offsets * step))
    return out.encode()


class ScanPoints:
    """Points of a scan-id range from a lidar_points partition.

    The footers are read once: each row group's scan-id range (from its statistics) says
    which row groups a range needs, and only those are read, each part opened per read with
    its cached footer. A dataset filter would reparse every part's footer for every batch of
    scans, and part readers kept open hold about a megabyte of buffers each, which over the
    dozens of parts of a long drive would make memory grow with its length.
    """

    def __init__(self, lake: Lake, layer: str, drive: str, table: str = "lidar_points") -> None:
        self.lake = lake
        self.paths = lake.partition_files(layer, table, drive)
        if not self.paths:
            raise ExportError(f"drive {drive} has no {layer}/{table} partition")
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


class BaseLinkPoints:
    """Points of a scan-id range in base_link, as the view calibrated_lidar_points makes them
    (bridge_lake.lake.base_link): the normalized points moved by their scan's transform, one
    `transform_points` per sensor frame; a deskewed drive's stored points as they are."""

    def __init__(self, lake: Lake, drive: str) -> None:
        tf = lake.read_partition("calibrated", "lidar_transforms", drive)
        if not tf.num_rows:
            raise ExportError(
                f"drive {drive} has no calibrated/lidar_transforms rows (no rig): its points "
                "exist only in their sensor frames (options.points: sensor)"
            )
        if pa.compute.all(tf.column("stored")).as_py():
            self.source, self.ids = ScanPoints(lake, "calibrated", drive, "deskewed_points"), None
            return
        self.source = ScanPoints(lake, "normalized", drive)
        tf = tf.sort_by("scan_id")
        self.ids = tf.column("scan_id").to_numpy()
        frames = np.asarray(tf.column("frame_id").to_pylist(), dtype=object).astype(str)
        names, self.frame_of = np.unique(frames, return_inverse=True)
        first = [int(np.flatnonzero(self.frame_of == k)[0]) for k in range(len(names))]
        col = {c: tf.column(c).to_numpy() for c in tf.column_names if c[0] in "rt"}
        self.transforms = [
            (
                np.array([[col[f"r{i}{j}"][row] for j in range(3)] for i in range(3)]),
                np.array([col[f"t{a}"][row] for a in "xyz"]),
            )
            for row in first
        ]

    def read(self, lo: int, hi: int) -> pa.Table:
        pts = self.source.read(lo, hi)
        if self.ids is None or not pts.num_rows:
            return pts
        pos = np.searchsorted(self.ids, pts.column("scan_id").to_numpy())
        if np.any(pos >= len(self.ids)) or np.any(
            self.ids[np.minimum(pos, len(self.ids) - 1)] != pts.column("scan_id").to_numpy()
        ):
            raise ExportError("a lidar scan has points but no row in calibrated/lidar_transforms")
        frame = self.frame_of[pos]
        x, y, z = (np.asarray(pts.column(c).to_numpy(), np.float32) for c in "xyz")
        out = np.empty((3, len(x)), np.float32)
        for k, (rotation, translation) in enumerate(self.transforms):
            sel = frame == k
            if sel.all():
                transform_points(rotation, translation, x, y, z, out=out)
            elif sel.any():
                out[:, sel] = transform_points(rotation, translation, x[sel], y[sel], z[sel])
        for i, c in enumerate("xyz"):
            pts = pts.set_column(pts.schema.get_field_index(c), c, pa.array(out[i]))
        return pts


class PointCloudBuilder(Builder):
    """lidar_scans rows (one message each, stamped at the scan start) with their points from
    normalized/lidar_points (sensor frame) or in base_link (BaseLinkPoints), read by scan-id
    range so row-group statistics skip the rest of the drive."""

    columns = ["time_ns", "scan_id", "point_count"]
    batch_rows = 16

    def __init__(self, lake, drive, lane, encode, shift_ns=0) -> None:
        super().__init__(lake, drive, lane, encode, shift_ns)
        where = lane.rule.options.get("points", "sensor")
        if where not in ("sensor", "base_link"):
            raise ExportError(f"{lane.topic}: options.points must be sensor or base_link")
        self.points = (
            BaseLinkPoints(lake, drive)
            if where == "base_link"
            else ScanPoints(lake, "normalized", drive)
        )
        layout = lane.rule.options.get("layout", "xyzirt")
        if layout not in LAYOUTS:
            raise ExportError(f"{lane.topic}: options.layout must be one of {list(LAYOUTS)}")
        self.layout = LAYOUTS[layout]

    def rows(self, windows):
        for scans in read_rows(self.lake, self.lane, self.drive, self.columns, windows, 1 << 16):
            counts = np_column(scans, "point_count", np.int64)
            start = 0
            while start < scans.num_rows:  # about POINT_BATCH_POINTS points per batch
                stop = start + 1 + int(np.searchsorted(
                    np.cumsum(counts[start + 1 :]), POINT_BATCH_POINTS - counts[start]
                ))  # fmt: skip
                yield scans.slice(start, stop - start)
                start = stop

    def columns_of(self, scans: pa.Table) -> PointCloudColumns:
        ids = scans.column("scan_id").to_numpy()
        counts = np_column(scans, "point_count", np.int64)
        pts = self.points.read(int(ids.min()), int(ids.max()))
        pid = pts.column("scan_id").to_numpy()
        if len(pid) > 1 and np.any(pid[1:] < pid[:-1]):
            pts = pts.take(np.argsort(pid, kind="stable"))
            pid = pts.column("scan_id").to_numpy()
        # each scan's points are one run of the sorted ids: two binary searches per scan
        first = np.searchsorted(pid, ids, "left")  # ids ascend within a lane
        got = np.searchsorted(pid, ids, "right") - first
        got[1:][ids[1:] == ids[:-1]] = 0  # a repeated scan id: its points went to the first
        if int(got.sum()) != len(pid):  # points of other streams' scans inside the id range
            edges = np.zeros(len(pid) + 1, np.int64)
            np.add.at(edges, first, 1)
            np.add.at(edges, first + got, -1)
            pts = pts.filter(pa.array(np.cumsum(edges[:-1]) > 0))
        if not np.array_equal(got, counts):
            bad = int(ids[np.flatnonzero(got != counts)[0]])
            raise ExportError(
                f"{self.lane.topic}: scan {bad} has a point count that its points do not match"
            )
        points = {
            c: np.asarray(pts.column(c).to_numpy(zero_copy_only=False), np.float32) for c in "xyz"
        }
        intensity = np_column(pts, "intensity", np.float32)
        if not np.isfinite(intensity).all():  # nulls came as NaN
            intensity = np.nan_to_num(intensity, nan=0.0)
        points["intensity"] = intensity
        points["ring"] = pts.column("ring").fill_null(0).to_numpy().astype(np.uint16)
        points["time"] = _seconds(pts.column("time_offset_ns").fill_null(0).to_numpy())
        return columns(
            self.t(scans),
            self.lane.frame_id,
            counts=counts,
            columns={f.name: points[f.name] for f in self.layout.fields},
            fields=self.layout,
        )


def _seconds(ns: np.ndarray) -> np.ndarray:
    """float32 seconds of integer nanoseconds, each rounded once from float64 ns / 1e9 (as
    `(ns / NS_PER_S).astype(np.float32)`), a cache-sized block at a time: the whole-array
    float64 temporary cost more than the division (a fresh 8-byte-a-point allocation)."""
    out = np.empty(ns.size, np.float32)
    for start in range(0, ns.size, CONVERT_BLOCK):
        out[start : start + CONVERT_BLOCK] = ns[start : start + CONVERT_BLOCK] / NS_PER_S
    return out


CODEC = Codec(columns, ros, protobuf, "foxglove.PointCloud", "point_cloud2")
OPTIONS = {"points": str, "layout": str}  # points: sensor | base_link; layout: xyzirt | xyzi
TYPENAME = "sensor_msgs/msg/PointCloud2"
TABLES = ("normalized/lidar_scans",)
KIND = Kind(TYPENAME, TABLES, CODEC, PointCloudBuilder, OPTIONS, faults=("lidar",), prefetch=True)

"""sensor_msgs/LaserScan from normalized/laser_scans; protobuf: foxglove.LaserScan.

ROS wire: fixed prefix ending with the ranges count, the ranges, the intensities count, the
intensities. In CDR every piece stays 4-aligned (float32 elements after a uint32 count), so
no padding depends on a scan's length; the parts are joined per message (serialized.join).

Foxglove places ray i of k at start + i (end - start) / (k - 1); ROS readers place it at
angle_min + i angle_increment. So start_angle = angle_min and end_angle = angle_min +
(k - 1) angle_increment, which puts every ray where ROS tools put it even when a driver's
angle_max disagrees with its increment. The pose is identity (data in frame_id). Dropped
from protobuf, for LaserScan has no fields for them: angle_max, time_increment, scan_time,
range_min and range_max (Foxglove draws every range; values outside the limits are kept as
recorded). Ranges and intensities become doubles, as the schema has them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from foxglove_schemas_protobuf.LaserScan_pb2 import LaserScan
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join, ragged_part
from bridge_lake.export.protobuf.geometry import IDENTITY
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder, np_column
from bridge_lake.formats.ros.wire import F4, F8, U4, Layout, header_values

SCALARS = (
    "angle_min",
    "angle_max",
    "angle_increment",
    "time_increment",
    "scan_time",
    "range_min",
    "range_max",
)
"""The float32 fields of one value per scan (or one for all), in wire order."""


@dataclass(frozen=True)
class LaserScanColumns:
    stamp: np.ndarray
    frame_id: str
    scalars: dict[str, np.ndarray]
    offsets: np.ndarray
    """(n + 1) into the flattened ranges"""
    ranges: np.ndarray
    intensities: np.ndarray | None


def columns(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    angle_min: ArrayLike,
    angle_max: ArrayLike,
    angle_increment: ArrayLike,
    time_increment: ArrayLike,
    scan_time: ArrayLike,
    range_min: ArrayLike,
    range_max: ArrayLike,
    counts: ArrayLike,
    ranges: ArrayLike,
    intensities: ArrayLike | None = None,
) -> LaserScanColumns:
    """`ranges` (and `intensities`, or None for empty ones) hold the float32 values of all
    scans back to back, counts[i] of them for scan i; the seven scalars are one value for
    all scans or one per scan."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    offsets = arg.counts("counts", counts, n)
    total = int(offsets[-1])
    ranges_arr = np.ascontiguousarray(arg.flat("ranges", ranges, total, F4))
    given = (angle_min, angle_max, angle_increment, time_increment, scan_time)
    given += (range_min, range_max)
    scalars = {
        name: arg.per_message(name, v, n, F4) for name, v in zip(SCALARS, given, strict=True)
    }
    return LaserScanColumns(
        stamp,
        arg.text("frame_id", frame_id),
        scalars,
        offsets,
        ranges_arr,
        None
        if intensities is None
        else np.ascontiguousarray(arg.flat("intensities", intensities, total, F4)),
    )


def ros(c: LaserScanColumns, ros: int, seq_start: int) -> Serialized:
    n = c.stamp.size
    prefix = Layout.message(ros)
    prefix.header(c.frame_id)
    for name in SCALARS:
        prefix.field(name, F4)
    prefix.field("ranges_count", U4)
    values = {**c.scalars, "ranges_count": np.diff(c.offsets)}
    parts = [
        fixed_part(prefix.fill(n, {**header_values(c.stamp, ros, seq_start), **values})),
        ragged_part(c.ranges.view(np.uint8), c.offsets * F4.itemsize),
    ]
    middle = Layout(ros, known_alignment=4)
    if c.intensities is None:
        middle.constant(U4, 0)
        parts.append(fixed_part(middle.fill(n, {})))
    else:
        middle.field("intensities_count", U4)
        parts.append(fixed_part(middle.fill(n, {"intensities_count": np.diff(c.offsets)})))
        parts.append(ragged_part(c.intensities.view(np.uint8), c.offsets * F4.itemsize))
    return join(parts)


def protobuf(c: LaserScanColumns) -> Serialized:
    start = c.scalars["angle_min"].astype(F8)
    rays = np.maximum(np.diff(c.offsets) - 1, 0)
    fields = Fields(c.stamp.size)
    fields.timestamp(1, c.stamp)
    fields.string(2, c.frame_id)
    fields.constant(LaserScan(pose=IDENTITY).SerializeToString())  # field 3
    fields.double(4, start)
    fields.double(5, start + rays * c.scalars["angle_increment"].astype(F8))
    fields.ragged_doubles(6, c.ranges, c.offsets)
    if c.intensities is not None:
        fields.ragged_doubles(7, c.intensities, c.offsets)
    return fields.encode()


class LaserScanBuilder(Builder):
    """normalized/laser_scans rows: NaN ranges become +Inf (REP-117: no return), the scan
    time is the stream's period (lane.extra["period_s"])."""

    columns = [
        "time_ns",
        "angle_min_rad",
        "angle_increment_rad",
        "range_min_m",
        "range_max_m",
        "ranges_m",
    ]
    batch_rows = 4096

    def columns_of(self, rows: pa.Table) -> LaserScanColumns:
        ranges = rows.column("ranges_m").combine_chunks()
        counts = pc.list_value_length(ranges).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = np.asarray(ranges.flatten().to_numpy(zero_copy_only=False), np.float32)
        flat = np.where(np.isnan(flat), np.float32(np.inf), flat)
        amin = np_column(rows, "angle_min_rad")
        inc = np_column(rows, "angle_increment_rad")
        return columns(
            self.t(rows),
            self.lane.frame_id,
            angle_min=amin,
            angle_max=amin + (counts - 1) * inc,
            angle_increment=inc,
            time_increment=0.0,
            scan_time=self.lane.extra.get("period_s", 0.0),
            range_min=np.nan_to_num(np_column(rows, "range_min_m"), nan=0.0),
            range_max=np.nan_to_num(np_column(rows, "range_max_m"), nan=np.inf),
            counts=counts,
            ranges=flat,
        )


CODEC = Codec(columns, ros, protobuf, "foxglove.LaserScan", "laser_scan")
TABLES = ("normalized/laser_scans",)
KIND = Kind("sensor_msgs/msg/LaserScan", TABLES, CODEC, LaserScanBuilder, faults=("laser",))

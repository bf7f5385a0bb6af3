"""sensor_msgs/PointCloud2 -> foxglove.PointCloud, from the same arguments as
messages.point_cloud2.

The points are packed exactly as for the ROS message (one structured array of the layout,
filled field by field in ~2 MiB blocks), so `data` holds the same bytes; each cloud's data is a
slice of that array, copied once into the result by the join.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from foxglove_schemas_protobuf.PackedElementField_pb2 import PackedElementField
from foxglove_schemas_protobuf.PointCloud_pb2 import PointCloud
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.pointcloud import VELODYNE_XYZIRT, PointLayout, pack_points
from bridge_lake.export.messages.serialized import Serialized, ragged_part
from bridge_lake.export.protobuf.geometry import IDENTITY
from bridge_lake.export.protobuf.wire import Fields

PROTOBUF_LIMIT = 2**31
"""Protobuf messages must stay below 2 GiB (its parsers' limit)."""

NUMERIC_KINDS = {"u": "UINT", "i": "INT", "f": "FLOAT"}


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


def point_cloud2(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    counts: ArrayLike,
    columns: Mapping[str, ArrayLike],
    fields: PointLayout = VELODYNE_XYZIRT,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """foxglove.PointCloud: pose identity (points in frame_id), point_stride = the layout's
    point_step, the layout's fields, little-endian points as in messages.point_cloud2.
    PointCloud has no is_dense (NaN points are kept) nor height/width (the count is
    len(data) / point_stride). `ros` and `seq_start` are ignored.
    """
    if not isinstance(fields, PointLayout):
        raise ValueError(f"fields must be a PointLayout, got {type(fields).__name__}")
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    offsets = arg.counts("counts", counts, n)
    step = fields.point_step
    width = np.diff(offsets)
    if width.size and int(width.max()) * step >= PROTOBUF_LIMIT:
        raise ValueError(f"counts: a cloud of {int(width.max())} points exceeds 2 GiB of data")
    points, _ = pack_points(fields, columns, int(offsets[-1]))

    out = Fields(n)
    out.timestamp(1, stamp)
    out.string(2, arg.text("frame_id", frame_id))
    constant = PointCloud(pose=IDENTITY, point_stride=step, fields=packed_fields(fields))
    out.constant(constant.SerializeToString())  # fields 3 .. 5
    out.binary(6, ragged_part(points.view(np.uint8), offsets * step))
    return out.encode()

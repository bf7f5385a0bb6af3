"""Point layouts (sensor_msgs/PointField) and the packing of flattened point columns into
one structured array of a layout (one vectorized assignment per field and ~2 MiB block, no
loop over points or clouds); the PointCloud2 kind (`export.kinds.point_cloud2`) cuts its
bytes into the clouds' `data`.

VELODYNE_XYZIRT is the layout of the velodyne ROS driver's PointcloudXYZIRT container
(ros-drivers/velodyne, velodyne_pointcloud/src/conversions/pointcloudXYZIRT.cc): fields x, y, z,
intensity FLOAT32, ring UINT16, time FLOAT32, each placed right after the previous one by
sensor_msgs' addPointField (offset += count * size, no padding) -> offsets 0, 4, 8, 12, 16, 18
and point_step 22. LIO-SAM and FAST-LIO read clouds of this layout by field name.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from bridge_lake.export.messages import arguments as arg

FILL_BLOCK_BYTES = 1 << 21
"""Points are written in blocks of ~2 MiB, which stay in L2 while every field is stored: twice
as fast as storing one field at a time over the whole batch (measured on 22-byte points)."""
DATATYPES = {
    np.dtype("<i1"): 1,  # sensor_msgs/PointField INT8
    np.dtype("<u1"): 2,  # UINT8
    np.dtype("<i2"): 3,  # INT16
    np.dtype("<u2"): 4,  # UINT16
    np.dtype("<i4"): 5,  # INT32
    np.dtype("<u4"): 6,  # UINT32
    np.dtype("<f4"): 7,  # FLOAT32
    np.dtype("<f8"): 8,  # FLOAT64
}


@dataclass(frozen=True)
class PointField:
    """One sensor_msgs/PointField: `count` values of `dtype` at byte `offset` in each point."""

    name: str
    offset: int
    dtype: np.dtype
    count: int = 1

    def __post_init__(self) -> None:
        dtype = np.dtype(self.dtype).newbyteorder("<")
        object.__setattr__(self, "dtype", dtype)
        if dtype not in DATATYPES:
            raise ValueError(f"point field {self.name!r}: unsupported dtype {dtype}")
        if self.offset < 0 or self.count < 1:
            raise ValueError(f"point field {self.name!r}: needs offset >= 0 and count >= 1")
        arg.text("point field name", self.name)

    @property
    def datatype(self) -> int:
        """The PointField datatype code (7 = FLOAT32, ...)."""
        return DATATYPES[self.dtype]

    @property
    def size(self) -> int:
        return self.dtype.itemsize * self.count


@dataclass(frozen=True)
class PointLayout:
    """The fields of a point and its size in bytes (point_step); bytes no field covers are 0."""

    fields: tuple[PointField, ...]
    point_step: int

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"point field names repeat: {names}")
        spans = sorted((f.offset, f.offset + f.size, f.name) for f in self.fields)
        for (_, end, name), (start, _, other) in itertools.pairwise(spans):
            if start < end:
                raise ValueError(f"point fields {name!r} and {other!r} overlap")
        if spans and spans[-1][1] > self.point_step:
            raise ValueError(f"point field {spans[-1][2]!r} ends past point_step {self.point_step}")

    @classmethod
    def packed(cls, *fields: tuple[str, DTypeLike] | tuple[str, DTypeLike, int]) -> PointLayout:
        """Fields one after the other without padding, as sensor_msgs' addPointField (and so the
        velodyne driver) lays them out: (name, dtype) or (name, dtype, count)."""
        placed, offset = [], 0
        for name, dtype, *count in fields:
            field = PointField(name, offset, np.dtype(dtype), *count)
            placed.append(field)
            offset += field.size
        return cls(tuple(placed), offset)

    @property
    def dtype(self) -> np.dtype:
        """Structured dtype of one point, itemsize point_step."""
        return np.dtype(
            {
                "names": [f.name for f in self.fields],
                "formats": [(f.dtype, (f.count,)) if f.count > 1 else f.dtype for f in self.fields],
                "offsets": [f.offset for f in self.fields],
                "itemsize": self.point_step,
            }
        )


VELODYNE_XYZIRT = PointLayout.packed(
    ("x", np.float32),
    ("y", np.float32),
    ("z", np.float32),
    ("intensity", np.float32),
    ("ring", np.uint16),
    ("time", np.float32),
)
"""velodyne_pointcloud's PointcloudXYZIRT: offsets 0, 4, 8, 12, 16, 18; point_step 22."""

XYZI = PointLayout.packed(
    ("x", np.float32), ("y", np.float32), ("z", np.float32), ("intensity", np.float32)
)
"""x, y, z, intensity FLOAT32 at 0, 4, 8, 12; point_step 16 (pcl::PointXYZI without padding)."""


def pack(layout: PointLayout, values: list[np.ndarray], total: int) -> np.ndarray:
    """All points in one structured array of the layout (bytes no field covers are zero),
    from validated columns, filled in ~2 MiB blocks."""
    covered = sum(f.size for f in layout.fields) == layout.point_step
    points = np.empty(total, layout.dtype) if covered else np.zeros(total, layout.dtype)
    fill(points, layout, values, 0)
    return points


def fill(points: np.ndarray, layout: PointLayout, values: list[np.ndarray], first: int) -> None:
    """Store values[k][first : first + len(points)] into field k of `points`, ~2 MiB at a time."""
    block = max(1, FILL_BLOCK_BYTES // layout.point_step)
    for start in range(0, len(points), block):
        chunk = points[start : start + block]
        lo = first + start
        for f, column in zip(layout.fields, values, strict=True):
            chunk[f.name] = column[lo : lo + len(chunk)]

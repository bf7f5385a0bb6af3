"""foxglove.Vector3, foxglove.Quaternion and foxglove.Pose fields from numpy rows."""

from __future__ import annotations

import numpy as np
from foxglove_schemas_protobuf.Pose_pb2 import Pose
from foxglove_schemas_protobuf.Quaternion_pb2 import Quaternion
from foxglove_schemas_protobuf.Vector3_pb2 import Vector3

from bridge_lake.export.protobuf.wire import Fields

IDENTITY = Pose(position=Vector3(), orientation=Quaternion(w=1.0))
"""Pose of a sensor's data in its own frame_id: foxglove.PointCloud and LaserScan carry one,
ROS messages none (their data is in the header's frame)."""


def doubles(values: np.ndarray) -> Fields:
    """A message of double fields 1, 2, ... from the columns of (n, k) rows: Vector3 (x, y, z)
    or Quaternion (x, y, z, w)."""
    fields = Fields(values.shape[0])
    for number, column in enumerate(values.T, start=1):
        fields.double(number, column)
    return fields


def pose(position: np.ndarray, orientation: np.ndarray) -> Fields:
    """foxglove.Pose from (n, 3) positions and (n, 4) xyzw quaternions."""
    fields = Fields(position.shape[0])
    fields.message(1, doubles(position))
    fields.message(2, doubles(orientation))
    return fields

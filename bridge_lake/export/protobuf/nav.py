"""nav_msgs/Odometry -> foxglove.Odometry and tf2_msgs/TFMessage -> foxglove.FrameTransforms,
from the same arguments as bridge_lake.export.messages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.nav import UNKNOWN_COVARIANCE, transforms
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.messages.wire import F8
from bridge_lake.export.protobuf.geometry import doubles, pose
from bridge_lake.export.protobuf.wire import Fields


def odometry(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    child_frame_id: str,
    position: ArrayLike,
    orientation: ArrayLike,
    pose_covariance: ArrayLike | None = None,
    linear_velocity: ArrayLike | None = None,
    angular_velocity: ArrayLike | None = None,
    twist_covariance: ArrayLike | None = None,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """foxglove.Odometry, inputs as messages.odometry; nothing of nav_msgs/Odometry is lost.

    foxglove.Odometry (foxglove_schemas_protobuf >= 0.4) is nav_msgs/Odometry field for
    field: body_frame_id = child_frame_id, pose of it in frame_id, velocities in the body
    frame (as ROS's twist in child_frame_id), 6x6 pose and velocity (= twist) covariances.
    Velocities left None are left unset (Foxglove marks them optional) rather than written as
    zeros, which would claim the body stands still. Covariances are 36 zeros where unknown,
    the schema's own convention ("set to zero if unknown"): left None, or rows equal to
    UNKNOWN_COVARIANCE, the ROS formats' "unknown". `ros` and `seq_start` are ignored.
    """
    stamp = arg.stamps(stamp_ns)
    n = stamp.size

    def cov(name: str, value: ArrayLike | None) -> np.ndarray:
        if value is None:
            return np.zeros((n, 36))
        rows = np.array(arg.per_message(name, value, n, F8, (36,)), dtype=np.float64)
        rows[(rows == UNKNOWN_COVARIANCE).all(axis=-1)] = 0.0
        return rows

    fields = Fields(n)
    fields.timestamp(1, stamp)
    fields.string(2, arg.text("frame_id", frame_id))
    fields.string(3, arg.text("child_frame_id", child_frame_id))
    fields.message(
        4,
        pose(
            arg.rows("position", position, n, F8, (3,)),
            arg.rows("orientation", orientation, n, F8, (4,)),
        ),
    )
    for number, name, value in (
        (5, "linear_velocity", linear_velocity),
        (6, "angular_velocity", angular_velocity),
    ):
        if value is not None:
            fields.message(number, doubles(arg.rows(name, value, n, F8, (3,))))
    fields.doubles(7, cov("pose_covariance", pose_covariance))
    fields.doubles(8, cov("twist_covariance", twist_covariance))
    return fields.encode()


def tf_message(
    stamp_ns: ArrayLike,
    *,
    parent_frame_ids: Sequence[str],
    child_frame_ids: Sequence[str],
    translation: ArrayLike,
    rotation: ArrayLike,
    transforms_per_message: int,
    ros: int,
) -> Serialized:
    """foxglove.FrameTransforms of k = transforms_per_message foxglove.FrameTransform each,
    inputs as messages.tf_message: transform j of every message goes from parent_frame_ids[j]
    to child_frame_ids[j], stamped with its message's or its own stamp. `ros` is ignored."""
    stamp, trans, rot = transforms(
        stamp_ns, parent_frame_ids, child_frame_ids, translation, rotation, transforms_per_message
    )
    n, k = trans.shape[:2]
    per_row = 1 if stamp.size == n else k
    stamps = np.broadcast_to(stamp.reshape(n, per_row), (n, k))

    fields = Fields(n)
    for j, (parent, child) in enumerate(zip(parent_frame_ids, child_frame_ids, strict=True)):
        transform = Fields(n)
        transform.timestamp(1, stamps[:, j])
        transform.string(2, arg.text(f"parent_frame_ids[{j}]", parent))
        transform.string(3, arg.text(f"child_frame_ids[{j}]", child))
        transform.message(4, doubles(trans[:, j]))
        transform.message(5, doubles(rot[:, j]))
        fields.message(1, transform)
    return fields.encode()

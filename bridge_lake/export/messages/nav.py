"""nav_msgs/Odometry and tf2_msgs/TFMessage from numpy columns.

Both are fixed-size within a call: Odometry's strings are the call's frame ids; a TFMessage
holds the same k transforms (same frame ids, in the same order) in every message, so only
stamps and poses vary. geometry_msgs Point/Vector3/Quaternion are runs of float64 with no
padding between them, written as float64[3] / float64[4] fields.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed
from bridge_lake.export.messages.wire import F8, U4, Layout, header_values, split_stamps

UNKNOWN_VARIANCE = 1e6
"""Variance that says "not estimated" in an Odometry covariance: nav_msgs/Odometry has no
REP-145-style -1 flag, and all zeros reads as "exact" (robot_localization, for one, then
trusts the value fully), so unknown quantities get this large variance on the diagonal, as
ROS drivers publish for axes they do not measure (diff_drive_controller's defaults)."""
UNKNOWN_COVARIANCE = np.diag(np.full(6, UNKNOWN_VARIANCE)).reshape(36)
"""A 6x6 covariance (row major) that claims nothing: UNKNOWN_VARIANCE on the diagonal."""


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
    """nav_msgs/Odometry: pose of child_frame_id in frame_id, position (n, 3), orientation
    (n, 4) xyzw; twist in child_frame_id, (n, 3) each or None for zeros. Covariances (36,) or
    (n, 36), row major (x, y, z, roll, pitch, yaw); default UNKNOWN_COVARIANCE, so a zero
    twist left out never claims "standing still, with certainty"."""
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    zeros3 = np.zeros(3)

    layout = Layout.message(ros)
    layout.header(arg.text("frame_id", frame_id))
    layout.string(arg.text("child_frame_id", child_frame_id))
    layout.field("position", F8, 3)
    layout.field("orientation", F8, 4)
    layout.field("pose_covariance", F8, 36)
    layout.field("linear_velocity", F8, 3)
    layout.field("angular_velocity", F8, 3)
    layout.field("twist_covariance", F8, 36)
    return fixed(
        layout.fill(
            n,
            {
                **header_values(stamp, ros, seq_start),
                "position": arg.rows("position", position, n, F8, (3,)),
                "orientation": arg.rows("orientation", orientation, n, F8, (4,)),
                "pose_covariance": arg.per_message(
                    "pose_covariance",
                    UNKNOWN_COVARIANCE if pose_covariance is None else pose_covariance,
                    n,
                    F8,
                    (36,),
                ),
                "linear_velocity": zeros3
                if linear_velocity is None
                else arg.rows("linear_velocity", linear_velocity, n, F8, (3,)),
                "angular_velocity": zeros3
                if angular_velocity is None
                else arg.rows("angular_velocity", angular_velocity, n, F8, (3,)),
                "twist_covariance": arg.per_message(
                    "twist_covariance",
                    UNKNOWN_COVARIANCE if twist_covariance is None else twist_covariance,
                    n,
                    F8,
                    (36,),
                ),
            },
        )
    )


def transforms(
    stamp_ns: ArrayLike,
    parent_frame_ids: Sequence[str],
    child_frame_ids: Sequence[str],
    translation: ArrayLike,
    rotation: ArrayLike,
    transforms_per_message: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arguments of tf_message checked (protobuf.tf_message takes the same ones): stamps
    (n or n * k), translation (n, k, 3) and rotation (n, k, 4), message by message."""
    k = transforms_per_message
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"transforms_per_message must be a positive int, got {k!r}")
    for name, ids in (("parent_frame_ids", parent_frame_ids), ("child_frame_ids", child_frame_ids)):
        if isinstance(ids, str) or len(ids) != k:
            raise ValueError(f"{name} must be a sequence of {k} frame ids (transforms_per_message)")
    trans = np.asarray(translation)
    if trans.ndim != 2 or trans.shape[0] % k:
        raise ValueError(f"translation must be (m, 3) with m a multiple of {k}, got {trans.shape}")
    k = int(k)
    n = trans.shape[0] // k
    trans = arg.rows("translation", trans, n * k, F8, (3,)).reshape(n, k, 3)
    rot = arg.rows("rotation", rotation, n * k, F8, (4,)).reshape(n, k, 4)
    stamp = arg.stamps(stamp_ns)
    if stamp.size not in (n, n * k):
        raise ValueError(f"stamp_ns must have {n} (per message) or {n * k} (per transform) stamps")
    return stamp, trans, rot


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
    """tf2_msgs/TFMessage: n = m / k messages of k = transforms_per_message TransformStamped.

    Transform j of every message goes from parent_frame_ids[j] to child_frame_ids[j] (k names
    each); translation (m, 3) and rotation (m, 4) xyzw list the transforms message by message.
    stamp_ns has one stamp per message (n) or per transform (m). /tf: k = 1, one message per
    pose time; /tf_static: n = 1 message holding every static transform. ROS 1 TransformStamped
    headers get seq 0: they are nested, so no publisher numbers them.
    """
    ros = arg.ros_version(ros)
    stamp, trans, rot = transforms(
        stamp_ns, parent_frame_ids, child_frame_ids, translation, rotation, transforms_per_message
    )
    n, k = trans.shape[:2]
    per_row = 1 if stamp.size == n else k
    sec, nanosec = (
        np.broadcast_to(half.reshape(n, per_row), (n, k)) for half in split_stamps(stamp, ros)
    )

    layout = Layout.message(ros)
    layout.constant(U4, k)
    values: dict[str, np.ndarray] = {}
    for j, (parent, child) in enumerate(zip(parent_frame_ids, child_frame_ids, strict=True)):
        layout.header(arg.text(f"parent_frame_ids[{j}]", parent), prefix=f"{j}.", seq=False)
        layout.string(arg.text(f"child_frame_ids[{j}]", child))
        layout.field(f"{j}.translation", F8, 3)
        layout.field(f"{j}.rotation", F8, 4)
        values[f"{j}.sec"], values[f"{j}.nanosec"] = sec[:, j], nanosec[:, j]
        values[f"{j}.translation"] = trans[:, j]
        values[f"{j}.rotation"] = rot[:, j]
    return fixed(layout.fill(n, values))

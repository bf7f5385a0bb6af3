"""nav_msgs/Odometry from normalized/odometry, normalized/ground_truth or calibrated/poses;
protobuf: foxglove.Odometry.

foxglove.Odometry (foxglove_schemas_protobuf >= 0.4) is nav_msgs/Odometry field for field:
body_frame_id = child_frame_id, pose of it in frame_id, velocities in the body frame (as
ROS's twist in child_frame_id), 6x6 pose and velocity (= twist) covariances. What the lake
does not know goes out as "unknown" in each format's own terms: UNKNOWN_COVARIANCE in ROS
(never zeros, which claim "exact"), zeros in protobuf (the schema's "set to zero if
unknown"); a velocity left out is zeros in ROS (with the unknown covariance) and unset in
protobuf (Foxglove marks it optional).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.fixed import Field, header_message
from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.protobuf.geometry import doubles, pose
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder, np_column, vectors
from bridge_lake.formats.ros.wire import F8
from bridge_lake.geometry import rpy_to_quaternion

UNKNOWN_VARIANCE = 1e6
"""Variance that says "not estimated" in an Odometry covariance: nav_msgs/Odometry has no
REP-145-style -1 flag, and all zeros reads as "exact" (robot_localization, for one, then
trusts the value fully), so unknown quantities get this large variance on the diagonal, as
ROS drivers publish for axes they do not measure (diff_drive_controller's defaults)."""
UNKNOWN_COVARIANCE = np.diag(np.full(6, UNKNOWN_VARIANCE)).reshape(36)
"""A 6x6 covariance (row major) that claims nothing: UNKNOWN_VARIANCE on the diagonal."""
COV21 = np.array([(i, j) for i in range(6) for j in range(i, 6)])
"""(row, col) of the 21 upper-triangle covariance values the lake stores, row by row."""


@dataclass(frozen=True)
class OdometryColumns:
    stamp: np.ndarray
    frame_id: str
    child_frame_id: str
    position: np.ndarray
    orientation: np.ndarray
    pose_covariance: np.ndarray | None
    """(36,) or (n, 36); None: unknown"""
    linear_velocity: np.ndarray | None
    angular_velocity: np.ndarray | None
    twist_covariance: np.ndarray | None


def columns(
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
) -> OdometryColumns:
    """Pose of child_frame_id in frame_id, position (n, 3), orientation (n, 4) xyzw; twist
    in child_frame_id, (n, 3) each or None. Covariances (36,) or (n, 36), row major (x, y,
    z, roll, pitch, yaw), None for unknown."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size

    def cov(name: str, value: ArrayLike | None) -> np.ndarray | None:
        return None if value is None else arg.per_message(name, value, n, F8, (36,))

    def vec(name: str, value: ArrayLike | None) -> np.ndarray | None:
        return None if value is None else arg.rows(name, value, n, F8, (3,))

    return OdometryColumns(
        stamp,
        arg.text("frame_id", frame_id),
        arg.text("child_frame_id", child_frame_id),
        arg.rows("position", position, n, F8, (3,)),
        arg.rows("orientation", orientation, n, F8, (4,)),
        cov("pose_covariance", pose_covariance),
        vec("linear_velocity", linear_velocity),
        vec("angular_velocity", angular_velocity),
        cov("twist_covariance", twist_covariance),
    )


def ros(c: OdometryColumns, ros: int, seq_start: int) -> Serialized:
    """Unknown parts in ROS terms: a zero twist, UNKNOWN_COVARIANCE."""
    zeros3 = np.zeros(3)
    pose_cov = UNKNOWN_COVARIANCE if c.pose_covariance is None else c.pose_covariance
    twist_cov = UNKNOWN_COVARIANCE if c.twist_covariance is None else c.twist_covariance
    fields: list[Field] = [
        ("position", F8, 3, c.position),
        ("orientation", F8, 4, c.orientation),
        ("pose_covariance", F8, 36, pose_cov),
        ("linear_velocity", F8, 3, zeros3 if c.linear_velocity is None else c.linear_velocity),
        ("angular_velocity", F8, 3, zeros3 if c.angular_velocity is None else c.angular_velocity),
        ("twist_covariance", F8, 36, twist_cov),
    ]
    return header_message(
        ros, c.stamp, c.frame_id, seq_start, fields, child_frame_id=c.child_frame_id
    )


def protobuf(c: OdometryColumns) -> Serialized:
    n = c.stamp.size

    def cov(value: np.ndarray | None) -> np.ndarray:
        if value is None:
            return np.zeros((n, 36))
        rows = np.array(value, dtype=np.float64)
        rows[(rows == UNKNOWN_COVARIANCE).all(axis=-1)] = 0.0
        return rows

    fields = Fields(n)
    fields.timestamp(1, c.stamp)
    fields.string(2, c.frame_id)
    fields.string(3, c.child_frame_id)
    fields.message(4, pose(c.position, c.orientation))
    for number, value in ((5, c.linear_velocity), (6, c.angular_velocity)):
        if value is not None:
            fields.message(number, doubles(value))
    fields.doubles(7, cov(c.pose_covariance))
    fields.doubles(8, cov(c.twist_covariance))
    return fields.encode()


def _quaternions(rows: pa.Table) -> np.ndarray:
    r, p, y = (np_column(rows, c) for c in ("roll_rad", "pitch_rad", "yaw_rad"))
    ok = np.isfinite(r) & np.isfinite(p) & np.isfinite(y)
    q = np.full((len(r), 4), np.nan)
    if ok.any():
        q[ok] = rpy_to_quaternion(r[ok], p[ok], y[ok])
    return q


def _covariance36(column: pa.ChunkedArray) -> np.ndarray:
    """The lake's 21 upper-triangle values per row → full symmetric 6x6 (null → unknown)."""
    arr = column.combine_chunks()
    n = len(arr)
    out = np.tile(UNKNOWN_COVARIANCE.reshape(6, 6), (n, 1, 1))
    if n and arr.null_count < n:
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        values = np.asarray(arr.flatten().to_numpy(zero_copy_only=False), np.float64)
        values = np.nan_to_num(values.reshape(-1, 21))
        sub = np.zeros((int(valid.sum()), 6, 6))
        sub[:, COV21[:, 0], COV21[:, 1]] = values
        sub[:, COV21[:, 1], COV21[:, 0]] = values
        out[valid] = sub
    return out.reshape(n, 36)


class OdometryBuilder(Builder):
    """normalized/odometry or ground_truth rows (pose, 21-value covariance, twist in the child
    frame) or calibrated/poses rows. What the lake does not know (a null covariance or twist,
    every twist covariance, calibrated/poses' twist) goes out as unknown; a null twist is NaN."""

    def __init__(self, lake, drive, lane, encode, shift_ns=0) -> None:
        super().__init__(lake, drive, lane, encode, shift_ns)
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

    def columns_of(self, rows: pa.Table) -> OdometryColumns:
        pos = np.stack([np_column(rows, c) for c in ("x_m", "y_m", "z_m")], -1)
        twist: dict[str, np.ndarray | None] = {"linear_velocity": None, "angular_velocity": None}
        if self.poses:
            q = np.stack([np_column(rows, c) for c in ("qx", "qy", "qz", "qw")], -1)
            cov = None
        else:
            q = _quaternions(rows)
            cov = _covariance36(rows.column("covariance"))
            twist = {name: vectors(rows, name) for name in twist}  # nulls arrive as NaN
        return columns(
            self.t(rows),
            self.lane.frame_id,
            child_frame_id=self.lane.extra["child_frame_id"],
            position=pos,
            orientation=q,
            pose_covariance=cov,
            **twist,
        )


CODEC = Codec(columns, ros, protobuf, "foxglove.Odometry", "odometry")
TABLES = ("normalized/odometry", "normalized/ground_truth", "calibrated/poses")
KIND = Kind("nav_msgs/msg/Odometry", TABLES, CODEC, OdometryBuilder, faults=("odom",))

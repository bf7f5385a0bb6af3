"""sensor_msgs/Imu from normalized/imu; protobuf: bridge_lake.Imu (bridge_lake.proto).

Without an orientation estimate (orientation None, or a row holding any NaN) the message's
own rule applies: orientation_covariance[0] = -1 ("disregard the associated estimate") and
the orientation is written as (0, 0, 0, 0), the value of an unset ROS 1 Quaternion, which no
reader can mistake for a real attitude, unlike identity; protobuf leaves the field unset
(HasField) and writes the same -1. (REP-145, still a draft, asks for NaN in element 0
instead; readers such as robot_localization check for -1.) Covariances default to all
zeros, which the message defines as "covariance unknown".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.clock import nearest
from bridge_lake.export.kinds.fixed import Field, header_message
from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.protobuf.geometry import doubles
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder, Lane, np_column, read_rows, times, vectors
from bridge_lake.formats.ros.wire import F8

NO_ESTIMATE = -1.0
"""orientation_covariance[0] meaning "no orientation estimate" (sensor_msgs/Imu comments)."""


@dataclass(frozen=True)
class ImuColumns:
    stamp: np.ndarray
    frame_id: str
    orientation: np.ndarray
    """(n, 4) xyzw, zeros where there is no estimate"""
    present: np.ndarray
    """(n,) whether the row has an orientation estimate"""
    orientation_covariance: np.ndarray
    angular_velocity: np.ndarray
    angular_velocity_covariance: np.ndarray
    linear_acceleration: np.ndarray
    linear_acceleration_covariance: np.ndarray


def columns(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    orientation: ArrayLike | None,
    angular_velocity: ArrayLike,
    linear_acceleration: ArrayLike,
    orientation_covariance: ArrayLike | None = None,
    angular_velocity_covariance: ArrayLike | None = None,
    linear_acceleration_covariance: ArrayLike | None = None,
) -> ImuColumns:
    """Orientation (n, 4) xyzw or None, vectors (n, 3), covariances (9,) or (n, 9)."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    zeros9 = np.zeros(9)

    def cov(name: str, value: ArrayLike | None) -> np.ndarray:
        return arg.per_message(name, zeros9 if value is None else value, n, F8, (9,))

    q_cov = cov("orientation_covariance", orientation_covariance)
    if orientation is None:
        q, present = np.zeros((n, 4)), np.zeros(n, bool)
    else:
        q = arg.rows("orientation", orientation, n, F8, (4,))
        present = ~np.isnan(q).any(axis=1)
        q = np.where(present[:, None], q, 0.0)
    if not present.all():
        q_cov = np.array(np.broadcast_to(q_cov, (n, 9)))
        q_cov[~present, 0] = NO_ESTIMATE
    return ImuColumns(
        stamp,
        arg.text("frame_id", frame_id),
        q,
        present,
        q_cov,
        arg.rows("angular_velocity", angular_velocity, n, F8, (3,)),
        cov("angular_velocity_covariance", angular_velocity_covariance),
        arg.rows("linear_acceleration", linear_acceleration, n, F8, (3,)),
        cov("linear_acceleration_covariance", linear_acceleration_covariance),
    )


def ros(c: ImuColumns, ros: int, seq_start: int) -> Serialized:
    fields: list[Field] = [
        ("orientation", F8, 4, c.orientation),
        ("orientation_covariance", F8, 9, c.orientation_covariance),
        ("angular_velocity", F8, 3, c.angular_velocity),
        ("angular_velocity_covariance", F8, 9, c.angular_velocity_covariance),
        ("linear_acceleration", F8, 3, c.linear_acceleration),
        ("linear_acceleration_covariance", F8, 9, c.linear_acceleration_covariance),
    ]
    return header_message(ros, c.stamp, c.frame_id, seq_start, fields)


def protobuf(c: ImuColumns) -> Serialized:
    """bridge_lake.Imu: covariances always 9 values (zeros: unknown)."""
    fields = Fields(c.stamp.size)
    fields.timestamp(1, c.stamp)
    fields.string(2, c.frame_id)
    fields.message(3, doubles(c.orientation), c.present)
    fields.doubles(4, c.orientation_covariance)
    fields.message(5, doubles(c.angular_velocity))
    fields.doubles(6, c.angular_velocity_covariance)
    fields.message(7, doubles(c.linear_acceleration))
    fields.doubles(8, c.linear_acceleration_covariance)
    return fields.encode()


class ImuBuilder(Builder):
    """normalized/imu rows; `options.orientation_from: {stream, tolerance_ms}` fills missing
    orientations from the nearest row of another stream (an AHRS beside a gyro)."""

    columns = ["time_ns"] + [
        f"{v}_{a}" for v in ("angular_velocity", "linear_acceleration") for a in "xyz"
    ] + [f"orientation_{a}" for a in "xyzw"]  # fmt: skip

    def __init__(self, lake, drive, lane, encode, shift_ns=0) -> None:
        super().__init__(lake, drive, lane, encode, shift_ns)
        self.join = None
        spec = lane.rule.options.get("orientation_from")
        if spec:
            side = Lane(lane.topic, lane.rule, lane.frame_id, {"stream": spec["stream"]})
            tables = list(
                read_rows(lake, side, drive, ["time_ns", *self.columns[7:]], None, 1 << 22)
            )
            t = pa.concat_tables(tables) if tables else None
            if t is not None and t.num_rows:
                q = np.stack([np_column(t, f"orientation_{a}") for a in "xyzw"], -1)
                self.join = (times(t), q, int(float(spec.get("tolerance_ms", 10)) * 1e6))

    def columns_of(self, rows: pa.Table) -> ImuColumns:
        t = times(rows)
        q = np.stack([np_column(rows, f"orientation_{a}") for a in "xyzw"], -1)
        if self.join is not None:
            jt, jq, tol = self.join
            i = nearest(jt, t)
            near = np.abs(jt[i] - t) <= tol
            q = np.where((near & np.isnan(q).any(axis=1))[:, None], jq[i], q)
        return columns(
            t - self.shift_ns,
            self.lane.frame_id,
            orientation=q,
            angular_velocity=vectors(rows, "angular_velocity"),
            linear_acceleration=vectors(rows, "linear_acceleration"),
        )


CODEC = Codec(columns, ros, protobuf, "bridge_lake.Imu", "imu")
OPTIONS = {"orientation_from": dict}  # {stream: glob, tolerance_ms: number}
KIND = Kind("sensor_msgs/msg/Imu", ("normalized/imu",), CODEC, ImuBuilder, OPTIONS, faults=("imu",))

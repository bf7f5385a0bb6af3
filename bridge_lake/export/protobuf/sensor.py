"""sensor_msgs/Imu -> bridge_lake.Imu, NavSatFix -> foxglove.LocationFix, LaserScan ->
foxglove.LaserScan, from the same arguments as bridge_lake.export.messages."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from foxglove_schemas_protobuf.KeyValuePair_pb2 import KeyValuePair
from foxglove_schemas_protobuf.LaserScan_pb2 import LaserScan
from foxglove_schemas_protobuf.LocationFix_pb2 import LocationFix
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.sensor import NO_ESTIMATE, covariance_type, fix_status
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.messages.wire import F4, F8, U2
from bridge_lake.export.protobuf.geometry import IDENTITY, doubles
from bridge_lake.export.protobuf.wire import Fields


def imu(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    orientation: ArrayLike | None,
    angular_velocity: ArrayLike,
    linear_acceleration: ArrayLike,
    orientation_covariance: ArrayLike | None = None,
    angular_velocity_covariance: ArrayLike | None = None,
    linear_acceleration_covariance: ArrayLike | None = None,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """bridge_lake.Imu (see bridge_lake.proto), inputs as messages.imu.

    No orientation estimate (orientation None, or a row holding a NaN) leaves the orientation
    field unset, which protobuf readers see directly (HasField), and writes
    orientation_covariance[0] = -1, the sensor_msgs/Imu rule readers ported from ROS check.
    Covariances are always 9 values (zeros: unknown). `ros` and `seq_start` are accepted for
    drop-in use with messages.imu and ignored.
    """
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

    fields = Fields(n)
    fields.timestamp(1, stamp)
    fields.string(2, arg.text("frame_id", frame_id))
    fields.message(3, doubles(q), present)
    fields.doubles(4, q_cov)
    fields.message(5, doubles(arg.rows("angular_velocity", angular_velocity, n, F8, (3,))))
    fields.doubles(6, cov("angular_velocity_covariance", angular_velocity_covariance))
    fields.message(7, doubles(arg.rows("linear_acceleration", linear_acceleration, n, F8, (3,))))
    fields.doubles(8, cov("linear_acceleration_covariance", linear_acceleration_covariance))
    return fields.encode()


def nav_sat_fix(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    latitude_deg: ArrayLike,
    longitude_deg: ArrayLike,
    altitude_m: ArrayLike,
    status: ArrayLike,
    service: ArrayLike,
    position_covariance: ArrayLike | None = None,
    position_covariance_type: ArrayLike = 0,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """foxglove.LocationFix, inputs as messages.nav_sat_fix; NaN altitude stays NaN.

    LocationFix has no fix status, yet status -1 ("no fix") is what tells a reader to ignore
    a fix's position; so status and service go into its `metadata` as the keys "status" and
    "service" with the sensor_msgs/NavSatStatus values as decimal strings (e.g. "-1", "1").
    position_covariance is always 9 values (ENU, m^2); its type maps to the same-numbered
    PositionCovarianceType. `ros` and `seq_start` are ignored.
    """
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    status_arr = fix_status(status, n)
    service_arr = arg.per_message("service", service, n, U2)
    cov_type = covariance_type(position_covariance_type, n)
    cov = np.zeros(9) if position_covariance is None else position_covariance

    fields = Fields(n)
    fields.double(1, arg.rows("latitude_deg", latitude_deg, n, F8))
    fields.double(2, arg.rows("longitude_deg", longitude_deg, n, F8))
    fields.double(3, arg.rows("altitude_m", altitude_m, n, F8))
    fields.doubles(4, arg.per_message("position_covariance", cov, n, F8, (9,)))
    fields.varint(5, cov_type)
    fields.timestamp(6, stamp)
    fields.string(7, arg.text("frame_id", frame_id))
    fields.ragged(_status_metadata(np.broadcast_to(status_arr, (n,)), service_arr, n))
    return fields.encode()


def _status_metadata(status: np.ndarray, service: np.ndarray, n: int) -> pa.LargeBinaryArray:
    """LocationFix field 9 (metadata) per message: protobuf encodes each distinct
    (status, service) pair once, a vectorized take picks one per message."""
    key = (status.astype(np.int64) + 1) << 16 | np.broadcast_to(service, (n,))
    distinct, index = np.unique(key, return_inverse=True)
    encoded = [
        LocationFix(
            metadata=[
                KeyValuePair(key="status", value=str((k >> 16) - 1)),
                KeyValuePair(key="service", value=str(k & 0xFFFF)),
            ]
        ).SerializeToString()
        for k in distinct.tolist()
    ]
    return pa.array(encoded, pa.large_binary()).take(pa.array(index.reshape(-1)))


def laser_scan(
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
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """foxglove.LaserScan, inputs as messages.laser_scan (all checked the same way).

    Foxglove places ray i of k at start + i (end - start) / (k - 1); ROS readers place it at
    angle_min + i angle_increment. So start_angle = angle_min and end_angle = angle_min +
    (k - 1) angle_increment, which puts every ray where ROS tools put it even when a driver's
    angle_max disagrees with its increment. The pose is identity (data in frame_id). Dropped,
    for LaserScan has no fields for them: angle_max, time_increment, scan_time, range_min and
    range_max (Foxglove draws every range; values outside the limits are kept as recorded).
    ranges and intensities become doubles, as the schema has them. `ros` and `seq_start` are
    ignored.
    """
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    offsets = arg.counts("counts", counts, n)
    total = int(offsets[-1])
    ranges_arr = arg.flat("ranges", ranges, total, F4)
    scalars = {
        "angle_min": angle_min,
        "angle_max": angle_max,
        "angle_increment": angle_increment,
        "time_increment": time_increment,
        "scan_time": scan_time,
        "range_min": range_min,
        "range_max": range_max,
    }
    values = {name: arg.per_message(name, v, n, F4) for name, v in scalars.items()}
    start = values["angle_min"].astype(F8)
    rays = np.maximum(np.diff(offsets) - 1, 0)

    fields = Fields(n)
    fields.timestamp(1, stamp)
    fields.string(2, arg.text("frame_id", frame_id))
    fields.constant(LaserScan(pose=IDENTITY).SerializeToString())  # field 3
    fields.double(4, start)
    fields.double(5, start + rays * values["angle_increment"].astype(F8))
    fields.ragged_doubles(6, ranges_arr, offsets)
    if intensities is not None:
        fields.ragged_doubles(7, arg.flat("intensities", intensities, total, F4), offsets)
    return fields.encode()

"""sensor_msgs/Imu, sensor_msgs/NavSatFix and sensor_msgs/LaserScan from numpy columns.

Imu and NavSatFix have one size for all messages of a call (the frame id is the call's), so the
batch is one (n, size) array filled field by field. LaserScan carries two float32 sequences and
is joined from per-message parts (see serialized.join).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed, fixed_part, join, ragged_part
from bridge_lake.export.messages.wire import F4, F8, I1, U1, U2, U4, Layout, header_values

NO_ESTIMATE = -1.0
"""orientation_covariance[0] meaning "no orientation estimate" (sensor_msgs/Imu comments)."""


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
    """sensor_msgs/Imu: orientation (n, 4) xyzw, vectors (n, 3), covariances (9,) or (n, 9).

    Covariances default to all zeros, which the message defines as "covariance unknown".
    Without an orientation estimate (orientation None, or a row holding any NaN) the message's
    own rule applies: orientation_covariance[0] = -1 ("disregard the associated estimate") and
    the orientation is written as (0, 0, 0, 0), the value of an unset ROS 1 Quaternion, which
    no reader can mistake for a real attitude, unlike identity. (REP-145, still a draft, asks
    for NaN in element 0 instead; readers such as robot_localization check for -1.)
    """
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    zeros9 = np.zeros(9)

    def cov(name: str, value: ArrayLike | None) -> np.ndarray:
        return arg.per_message(name, zeros9 if value is None else value, n, F8, (9,))

    q_cov = cov("orientation_covariance", orientation_covariance)
    if orientation is None:
        q = np.zeros(4)
        q_cov = q_cov.copy()
        q_cov[..., 0] = NO_ESTIMATE
    else:
        q = arg.rows("orientation", orientation, n, F8, (4,))
        missing = np.isnan(q).any(axis=1)
        if missing.any():
            q = np.where(missing[:, None], 0.0, q)
            q_cov = np.array(np.broadcast_to(q_cov, (n, 9)))
            q_cov[missing, 0] = NO_ESTIMATE

    layout = Layout.message(ros)
    layout.header(arg.text("frame_id", frame_id))
    layout.field("orientation", F8, 4)
    layout.field("orientation_covariance", F8, 9)
    layout.field("angular_velocity", F8, 3)
    layout.field("angular_velocity_covariance", F8, 9)
    layout.field("linear_acceleration", F8, 3)
    layout.field("linear_acceleration_covariance", F8, 9)
    return fixed(
        layout.fill(
            n,
            {
                **header_values(stamp, ros, seq_start),
                "orientation": q,
                "orientation_covariance": q_cov,
                "angular_velocity": arg.rows("angular_velocity", angular_velocity, n, F8, (3,)),
                "angular_velocity_covariance": cov(
                    "angular_velocity_covariance", angular_velocity_covariance
                ),
                "linear_acceleration": arg.rows(
                    "linear_acceleration", linear_acceleration, n, F8, (3,)
                ),
                "linear_acceleration_covariance": cov(
                    "linear_acceleration_covariance", linear_acceleration_covariance
                ),
            },
        )
    )


def fix_status(status: ArrayLike, n: int) -> np.ndarray:
    """NavSatFix status checked (protobuf.nav_sat_fix takes the same): -1 .. 2, one value for
    all fixes or one per fix."""
    status_arr = arg.per_message("status", status, n, I1)
    if status_arr.size and (status_arr.min() < -1 or status_arr.max() > 2):
        raise ValueError("status must be -1 (no fix), 0 (fix), 1 (SBAS) or 2 (GBAS)")
    return status_arr


def covariance_type(position_covariance_type: ArrayLike, n: int) -> np.ndarray:
    """NavSatFix position_covariance_type checked (as fix_status): 0 .. 3."""
    cov_type = arg.per_message("position_covariance_type", position_covariance_type, n, U1)
    if cov_type.size and cov_type.max() > 3:
        raise ValueError("position_covariance_type must be 0 .. 3")
    return cov_type


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
    """sensor_msgs/NavSatFix. Altitude NaN is written as NaN ("no altitude", per the message).

    status -1 no fix, 0 fix, 1 SBAS, 2 GBAS; service a bit mask (1 GPS, 2 GLONASS, 4 COMPASS,
    8 GALILEO); position_covariance_type 0 unknown, 1 approximated, 2 diagonal known, 3 known.
    Scalars or (n,) for status, service and covariance type; (9,) or (n, 9) for the covariance
    (ENU, m^2, row major; default zeros with type 0).
    """
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    status_arr = fix_status(status, n)
    cov_type = covariance_type(position_covariance_type, n)
    cov = np.zeros(9) if position_covariance is None else position_covariance

    layout = Layout.message(ros)
    layout.header(arg.text("frame_id", frame_id))
    layout.field("status", I1)
    layout.field("service", U2)
    layout.field("latitude", F8)
    layout.field("longitude", F8)
    layout.field("altitude", F8)
    layout.field("position_covariance", F8, 9)
    layout.field("position_covariance_type", U1)
    return fixed(
        layout.fill(
            n,
            {
                **header_values(stamp, ros, seq_start),
                "status": status_arr,
                "service": arg.per_message("service", service, n, U2),
                "latitude": arg.rows("latitude_deg", latitude_deg, n, F8),
                "longitude": arg.rows("longitude_deg", longitude_deg, n, F8),
                "altitude": arg.rows("altitude_m", altitude_m, n, F8),
                "position_covariance": arg.per_message("position_covariance", cov, n, F8, (9,)),
                "position_covariance_type": cov_type,
            },
        )
    )


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
    """sensor_msgs/LaserScan. `ranges` (and `intensities`, or None for empty ones) hold the
    float32 values of all scans back to back, counts[i] of them for scan i; the seven scalars
    are one value for all scans or one per scan.

    Wire: fixed prefix ending with the ranges count, the ranges, the intensities count, the
    intensities. In CDR every piece stays 4-aligned (float32 elements after a uint32 count), so
    no padding depends on a scan's length.
    """
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    offsets = arg.counts("counts", counts, n)
    total = int(offsets[-1])
    ranges_arr = np.ascontiguousarray(arg.flat("ranges", ranges, total, F4))
    scalars = {
        "angle_min": angle_min,
        "angle_max": angle_max,
        "angle_increment": angle_increment,
        "time_increment": time_increment,
        "scan_time": scan_time,
        "range_min": range_min,
        "range_max": range_max,
    }

    prefix = Layout.message(ros)
    prefix.header(arg.text("frame_id", frame_id))
    for name in scalars:
        prefix.field(name, F4)
    prefix.field("ranges_count", U4)
    values = {name: arg.per_message(name, v, n, F4) for name, v in scalars.items()}
    values["ranges_count"] = np.diff(offsets)
    parts = [
        fixed_part(prefix.fill(n, {**header_values(stamp, ros, seq_start), **values})),
        ragged_part(ranges_arr.view(np.uint8), offsets * F4.itemsize),
    ]
    middle = Layout(ros, known_alignment=4)
    if intensities is None:
        middle.constant(U4, 0)
        parts.append(fixed_part(middle.fill(n, {})))
    else:
        intensities_arr = np.ascontiguousarray(arg.flat("intensities", intensities, total, F4))
        middle.field("intensities_count", U4)
        parts.append(fixed_part(middle.fill(n, {"intensities_count": np.diff(offsets)})))
        parts.append(ragged_part(intensities_arr.view(np.uint8), offsets * F4.itemsize))
    return join(parts)

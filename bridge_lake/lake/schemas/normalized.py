"""Normalized layer: every sensor table on the master clock, in sensor frames and SI units,
plus the stream catalog and the quarantine."""

from __future__ import annotations

import pyarrow as pa

from bridge_lake.lake.schemas.base import F32, F64, Column, TableSpec, lidar_point_columns

# Every sensor table starts with the same four columns. `stream` names the source stream
# (an NCLT file kind such as `ms25`, or an ADTF stream name), so conservation, rates and the
# clock fit are per stream while analysts query one table per sensor kind.


def _sensor_columns(sensor_time: bool = True) -> tuple[Column, ...]:
    cols = [
        Column("time_ns", pa.int64(), "master clock, ns since the Unix epoch", nullable=False),
    ]
    if sensor_time:
        cols.append(Column("sensor_time_ns", pa.int64(), "device time stamp from the payload, ns"))
    cols += [
        Column(
            "stream",
            pa.string(),
            "source stream (NCLT file kind or ADTF stream name)",
            nullable=False,
        ),
        Column("frame_id", pa.string(), "sensor frame the values are expressed in", nullable=False),
    ]
    return tuple(cols)


def _xyz(prefix: str, type_: pa.DataType, unit: str, what: str) -> tuple[Column, ...]:
    return tuple(Column(f"{prefix}_{a}", type_, f"{what} {a} [{unit}]") for a in "xyz")


COVARIANCE = Column(
    "covariance",
    pa.list_(F64, 21),
    "upper triangle of the 6x6 pose covariance over (x, y, z, roll, pitch, yaw), row by row",
)
POSE_COLUMNS = (
    Column("x_m", F64, "position x [m]"),
    Column("y_m", F64, "position y [m]"),
    Column("z_m", F64, "position z [m]"),
    Column("roll_rad", F64, "roll [rad]"),
    Column("pitch_rad", F64, "pitch [rad]"),
    Column("yaw_rad", F64, "yaw / heading [rad]"),
)
TWIST_COLUMNS = (
    *_xyz("linear_velocity", F64, "m/s", "velocity of child_frame_id in its own axes:"),
    *_xyz("angular_velocity", F64, "rad/s", "angular velocity of child_frame_id in its own axes:"),
)
"""The twist nav_msgs/Odometry carries (in child_frame_id); null = unknown. NCLT fills it
from the pose derivative (bridge_lake.geometry.body_twist)."""

IMU = TableSpec(
    "normalized",
    "imu",
    "Inertial samples: rates, specific force, optional orientation and magnetic field.",
    (
        *_sensor_columns(),
        *_xyz("angular_velocity", F64, "rad/s", "angular velocity"),
        *_xyz("linear_acceleration", F64, "m/s^2", "specific force"),
        Column("orientation_x", F64, "orientation quaternion x (null if not measured)"),
        Column("orientation_y", F64, "orientation quaternion y"),
        Column("orientation_z", F64, "orientation quaternion z"),
        Column("orientation_w", F64, "orientation quaternion w"),
        *_xyz("magnetic_field", F64, "T", "magnetic field"),
    ),
)

HEADING = TableSpec(
    "normalized",
    "heading",
    "Single-axis heading sources (e.g. the NCLT KVH fibre-optic gyro, integrated).",
    (*_sensor_columns(), Column("heading_rad", F64, "heading [rad]")),
)

GNSS = TableSpec(
    "normalized",
    "gnss",
    "Satellite fixes in WGS-84.",
    (
        *_sensor_columns(),
        Column("lat_deg", F64, "latitude [deg]"),
        Column("lon_deg", F64, "longitude [deg]"),
        Column("alt_m", F64, "altitude [m] (null when the receiver gave none)"),
        Column("fix_mode", pa.int16(), "receiver fix mode as reported (NCLT: 2 = 2D, 3 = 3D)"),
        Column("num_sats", pa.int16(), "satellites used (null: not reported)"),
        Column("track_rad", F64, "course over ground [rad], clockwise from north"),
        Column("speed_mps", F64, "speed over ground [m/s]"),
        Column("error_m", F64, "receiver error estimate [m] (RTK), null if none"),
    ),
)

CAN_FRAMES = TableSpec(
    "normalized",
    "can_frames",
    "Raw CAN frames.",
    (
        *_sensor_columns(),
        Column("channel", pa.int16(), "bus / channel number", nullable=False),
        Column("can_id", pa.int64(), "arbitration id (11 or 29 bit)", nullable=False),
        Column("is_extended", pa.bool_(), "29-bit id", nullable=False),
        Column("is_remote", pa.bool_(), "remote transmission request"),
        Column("dlc", pa.int16(), "data length code", nullable=False),
        Column("data", pa.binary(), "payload bytes (dlc bytes for classic CAN)", nullable=False),
    ),
)

LIDAR_SCANS = TableSpec(
    "normalized",
    "lidar_scans",
    "One row per lidar revolution / frame; points are in lidar_points with the same scan_id.",
    (
        *_sensor_columns(),
        Column(
            "scan_id",
            pa.int64(),
            "scan number, unique within the drive over all lidar streams",
            nullable=False,
        ),
        Column("sensor_scan_id", pa.int64(), "the sensor's own scan / frame counter, if any"),
        Column("end_time_ns", pa.int64(), "time of the last point [ns]", nullable=False),
        Column("point_count", pa.int64(), "points in lidar_points", nullable=False),
        Column("cut", pa.string(), "why the scan ended: azimuth | gap | end | frame"),
    ),
)

LIDAR_POINTS = TableSpec(
    "normalized",
    "lidar_points",
    "Lidar points in the sensor frame, with ring (elevation order). A point's master time is "
    "its scan's time_ns plus time_offset_ns (view lidar_points_timed); storing it per point "
    "would cost a column as large as x. The scan also names the stream: a stream column "
    "here would cost more to write than x.",
    lidar_point_columns("lidar_scans", ""),
)

CAMERA_FRAMES = TableSpec(
    "normalized",
    "camera_frames",
    "Camera frames, kept in their encoding (H.264 access units, JPEG/PNG/TIFF, raw pixels).",
    (
        *_sensor_columns(),
        Column("camera", pa.string(), "camera name", nullable=False),
        Column("width", pa.int32(), "stored width [px]"),
        Column("height", pa.int32(), "stored height [px]"),
        Column(
            "encoding",
            pa.string(),
            "h264 | jpeg | png | tiff | rgb8 | bgr8 | mono8 | ...",
            nullable=False,
        ),
        Column("is_keyframe", pa.bool_(), "H.264: access unit holds an IDR frame"),
        Column("rotate_cw_deg", pa.int16(), "clockwise rotation that makes the image upright"),
        Column("data", pa.binary(), "the encoded frame or raw pixel buffer", nullable=False),
    ),
)

WHEEL_ODOMETRY = TableSpec(
    "normalized",
    "wheel_odometry",
    "Wheel speeds.",
    (
        *_sensor_columns(),
        Column("v_left_mps", F64, "left wheel speed [m/s]"),
        Column("v_right_mps", F64, "right wheel speed [m/s]"),
    ),
)

ODOMETRY = TableSpec(
    "normalized",
    "odometry",
    "Poses of an odometry / dead-reckoning estimate in its own world frame.",
    (
        *_sensor_columns(),
        Column("child_frame_id", pa.string(), "body frame the pose is of"),
        *POSE_COLUMNS,
        COVARIANCE,
        *TWIST_COLUMNS,
    ),
)

GROUND_TRUTH = TableSpec(
    "normalized",
    "ground_truth",
    "Reference poses (e.g. NCLT SLAM ground truth, local NED); null pose = invalid row.",
    (
        *_sensor_columns(),
        Column("child_frame_id", pa.string(), "body frame the pose is of"),
        *POSE_COLUMNS,
        COVARIANCE,
        *TWIST_COLUMNS,
        Column("is_node", pa.bool_(), "a SLAM graph node (precise) rather than interpolated"),
    ),
)

LASER_SCANS = TableSpec(
    "normalized",
    "laser_scans",
    "Planar laser scans (sensor_msgs/LaserScan semantics).",
    (
        *_sensor_columns(),
        Column("angle_min_rad", F32, "angle of the first range [rad]", nullable=False),
        Column("angle_increment_rad", F32, "angle between ranges [rad]", nullable=False),
        Column("range_min_m", F32, "smallest valid range [m]"),
        Column("range_max_m", F32, "largest valid range [m]"),
        Column("ranges_m", pa.list_(F32), "ranges [m]; NaN = no return", nullable=False),
    ),
)

STREAMS = TableSpec(
    "normalized",
    "streams",
    "Stream catalog: one row per source stream with counts, rates, gaps and its clock fit.",
    (
        Column("stream", pa.string(), "source stream", nullable=False),
        Column("source_file", pa.string(), "drive-relative file(s) the stream came from"),
        Column("source_type", pa.string(), "NCLT kind, ADTF meta type or DDL struct"),
        Column("table", pa.string(), "normalized table it went to", nullable=False),
        Column("topic", pa.string(), "default ROS topic for exports"),
        Column("records_read", pa.int64(), "records in the raw file(s)", nullable=False),
        Column("rows_written", pa.int64(), "rows in the table", nullable=False),
        Column("rows_quarantined", pa.int64(), "records in quarantine", nullable=False),
        Column("first_time_ns", pa.int64(), "first master time"),
        Column("last_time_ns", pa.int64(), "last master time"),
        Column("mean_rate_hz", F64, "(rows - 1) / (last - first)"),
        Column("expected_rate_hz", F64, "nominal rate of the sensor, if known"),
        Column("reordered", pa.int64(), "records the normalizer moved to restore time order"),
        Column("out_of_order", pa.int64(), "rows still earlier than their predecessor (0 = ok)"),
        Column("duplicates", pa.int64(), "records sharing a time stamp with another"),
        Column("gaps", pa.int64(), "steps longer than the gap threshold"),
        Column("longest_gap_ns", pa.int64(), "longest step between records"),
        Column("gap_threshold_ns", pa.int64(), "threshold used (5 median periods)"),
        Column("clock_offset_ns", pa.int64(), "device clock fit: master - sensor at first sample"),
        Column("clock_drift_ppm", F64, "device clock fit: drift [ppm]"),
        Column("clock_residual_ns", F64, "device clock fit: RMS residual"),
        Column("clock_outliers", pa.int64(), "samples the robust fit excluded"),
        Column("clock_fit_error", pa.string(), "why no clock fit was possible (if device times)"),
        Column(
            "mapping",
            pa.string(),
            "how the table was chosen: the mapping rule (and its layer), or why the stream "
            "went to a generic table (ADTF)",
        ),
        Column(
            "recording_offset_ns",
            pa.int64(),
            "added to the recording's own times to put it on the master clock (ADTF)",
        ),
        Column(
            "recording_clock",
            pa.string(),
            "how that offset was found: absolute times, the file header, or fitted to another "
            "recording on a shared stream (ADTF)",
        ),
        Column("ddl_struct", pa.string(), "DDL struct describing each sample (ADTF)"),
        Column(
            "ddl",
            pa.string(),
            "the recording's DDL description of the stream (ADTF): element types, units, enums",
        ),
    ),
)

ADTF_PAYLOADS = TableSpec(
    "normalized",
    "adtf_payloads",
    "ADTF samples of streams without a DDL description (raw media types, anonymous streams), "
    "kept byte for byte with their stream type.",
    (
        Column("time_ns", pa.int64(), "master clock, ns since the Unix epoch", nullable=False),
        Column("sample_time_ns", pa.int64(), "the sample's own ADTF time stamp, ns"),
        Column("stream", pa.string(), "ADTF stream name (`stream/substream`)", nullable=False),
        Column("meta_type", pa.string(), "ADTF meta type (adtf/anonymous, adtf/plaintype, ...)"),
        Column("data", pa.binary(), "the sample's payload as the vendor reader returns it"),
    ),
)

QUARANTINE = TableSpec(
    "normalized",
    "quarantine",
    "Every raw record that could not be normalized, with its position and reason.",
    (
        Column("stream", pa.string(), "source stream", nullable=False),
        Column("source_file", pa.string(), "drive-relative file", nullable=False),
        Column("record_index", pa.int64(), "index of the record within its stream"),
        Column("byte_offset", pa.int64(), "byte offset in the file, where known"),
        Column("line", pa.int64(), "1-based line, for text files"),
        Column("byte_length", pa.int64(), "bytes skipped, for binary ranges"),
        Column("reason", pa.string(), "why it was quarantined", nullable=False),
        Column("raw", pa.binary(), "the raw bytes, capped at 4 KiB"),
    ),
)

SENSOR_TABLES: tuple[TableSpec, ...] = (
    IMU,
    HEADING,
    GNSS,
    CAN_FRAMES,
    LIDAR_SCANS,
    LIDAR_POINTS,
    CAMERA_FRAMES,
    WHEEL_ODOMETRY,
    ODOMETRY,
    GROUND_TRUTH,
    LASER_SCANS,
)
"""Normalized sensor tables, each keyed by `stream`."""
NORMALIZED: dict[str, TableSpec] = {
    t.name: t for t in (*SENSOR_TABLES, ADTF_PAYLOADS, STREAMS, QUARANTINE)
}
GENERIC_PREFIX = "ddl_"
"""Generic per-struct tables of the normalized layer are named `ddl_<struct>` (see
`bridge_lake.normalize.adtf_generic`): one per DDL struct that no mapping rule took, their
columns the struct's elements. They are not in NORMALIZED because their schemas come from
the recordings."""
QUARANTINE_RAW_CAP = 4096

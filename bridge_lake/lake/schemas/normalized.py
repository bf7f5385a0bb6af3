"""Normalized layer: every sensor table on the master clock, in sensor frames and SI units,
plus the stream catalog and the quarantine."""

from __future__ import annotations

import pyarrow as pa

from bridge_lake.lake.schemas.base import (
    F64,
    TIME_NS,
    Column,
    TableSpec,
    columns,
    lidar_point_columns,
)

SENSOR_COLUMNS = columns(
    (TIME_NS,),
    """
    sensor_time_ns  int64    device time stamp from the payload, ns
    stream          string!  source stream (NCLT file kind or ADTF stream name)
    frame_id        string!  sensor frame the values are expressed in
    """,
)
"""Every sensor table starts with these four columns. `stream` names the source stream (an
NCLT file kind such as `ms25`, or an ADTF stream name), so conservation, rates and the clock
fit are per stream while analysts query one table per sensor kind."""


def _xyz(prefix: str, type_: pa.DataType, unit: str, what: str) -> tuple[Column, ...]:
    return tuple(Column(f"{prefix}_{a}", type_, f"{what} {a} [{unit}]") for a in "xyz")


ODOMETRY_COLUMNS = columns(
    """
    child_frame_id  string             body frame the pose is of
    x_m             float64            position x [m]
    y_m             float64            position y [m]
    z_m             float64            position z [m]
    roll_rad        float64            roll [rad]
    pitch_rad       float64            pitch [rad]
    yaw_rad         float64            yaw / heading [rad]
    covariance      list<float64>[21]  upper triangle of the 6x6 pose covariance over (x, y,
        z, roll, pitch, yaw), row by row
    """,
    _xyz("linear_velocity", F64, "m/s", "velocity of child_frame_id in its own axes:"),
    _xyz("angular_velocity", F64, "rad/s", "angular velocity of child_frame_id in its own axes:"),
)
"""A pose of a body frame with its covariance and its twist, as nav_msgs/Odometry carries
them: odometry and ground truth alike. The twist is in child_frame_id; null = unknown. NCLT
fills it from the pose derivative (bridge_lake.geometry.body_twist)."""

IMU = TableSpec(
    "normalized",
    "imu",
    "Inertial samples: rates, specific force, optional orientation and magnetic field; one row "
    "per measurement (NCLT: an ms25 row carries the orientation of the ms25_euler.csv line of "
    "its utime, which writes no row of its own).",
    columns(
        SENSOR_COLUMNS,
        _xyz("angular_velocity", F64, "rad/s", "angular velocity"),
        _xyz("linear_acceleration", F64, "m/s^2", "specific force"),
        """
        orientation_x  float64  orientation quaternion x (null if not measured)
        orientation_y  float64  orientation quaternion y
        orientation_z  float64  orientation quaternion z
        orientation_w  float64  orientation quaternion w
        """,
        _xyz("magnetic_field", F64, "T", "magnetic field"),
    ),
)

HEADING = TableSpec(
    "normalized",
    "heading",
    "Single-axis heading sources (e.g. the NCLT KVH fibre-optic gyro, integrated).",
    columns(SENSOR_COLUMNS, "heading_rad  float64  heading [rad]"),
)

GNSS = TableSpec(
    "normalized",
    "gnss",
    "Satellite fixes in WGS-84, one row a fix (NCLT gps_rtk_err.csv is the error_m of the "
    "gps_rtk fix of its utime, no row of its own).",
    columns(
        SENSOR_COLUMNS,
        """
        lat_deg    float64  latitude [deg]
        lon_deg    float64  longitude [deg]
        alt_m      float64  altitude [m] (null when the receiver gave none)
        fix_mode   int16    receiver fix mode as reported (NCLT: 2 = 2D, 3 = 3D)
        num_sats   int16    satellites used (null: not reported)
        track_rad  float64  course over ground [rad], clockwise from north
        speed_mps  float64  speed over ground [m/s]
        error_m    float64  receiver error estimate [m] (RTK), null if none
        """,
    ),
)

CAN_FRAMES = TableSpec(
    "normalized",
    "can_frames",
    "Raw CAN frames.",
    columns(
        SENSOR_COLUMNS,
        """
        channel      int16!   bus / channel number
        can_id       int64!   arbitration id (11 or 29 bit)
        is_extended  bool!    29-bit id
        is_remote    bool     remote transmission request
        dlc          int16!   data length code
        data         binary!  payload bytes (dlc bytes for classic CAN)
        """,
    ),
)

LIDAR_SCANS = TableSpec(
    "normalized",
    "lidar_scans",
    "One row per lidar revolution / frame; points are in lidar_points with the same scan_id. "
    "One point stream per physical lidar: NCLT's HDL-32E is `velodyne_hits` (every revolution, "
    "per-packet point times); its `velodyne_sync` subset is read only when drive.yaml "
    "`nclt_velodyne` asks (then normalized_streams lists the other as `skipped`); checked by "
    "`one_stream_per_lidar`.",
    columns(
        SENSOR_COLUMNS,
        """
        scan_id         int64!  scan number, unique within the drive over all lidar streams
        sensor_scan_id  int64   the sensor's own scan / frame counter, if any
        end_time_ns     int64!  time of the last point [ns]: time_ns + the largest
            time_offset_ns of the scan's points (time_ns when they carry none, e.g. NCLT
            velodyne_sync); checked by `scan_end`
        point_count     int64!  points in lidar_points
        cut             string  why the scan ended: azimuth | gap | end | frame
        """,
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
    columns(
        SENSOR_COLUMNS,
        """
        camera         string!  camera name
        width          int32    stored width [px]
        height         int32    stored height [px]
        encoding       string!  h264 | jpeg | png | tiff | rgb8 | bgr8 | mono8 | ...
        is_keyframe    bool     H.264: access unit holds an IDR frame
        rotate_cw_deg  int16    clockwise rotation that makes the image upright
        data           binary!  the encoded frame or raw pixel buffer
        """,
    ),
)

WHEEL_ODOMETRY = TableSpec(
    "normalized",
    "wheel_odometry",
    "Wheel speeds.",
    columns(
        SENSOR_COLUMNS,
        """
        v_left_mps   float64  left wheel speed [m/s]
        v_right_mps  float64  right wheel speed [m/s]
        """,
    ),
)

ODOMETRY = TableSpec(
    "normalized",
    "odometry",
    "Poses of an odometry / dead-reckoning estimate in its own world frame, one row a pose "
    "(NCLT odometry_cov*.csv is the covariance of the odometry_mu* pose of its utime).",
    columns(SENSOR_COLUMNS, ODOMETRY_COLUMNS),
)

GROUND_TRUTH = TableSpec(
    "normalized",
    "ground_truth",
    "Reference poses (e.g. NCLT SLAM ground truth, local NED); null pose = invalid row.",
    columns(
        SENSOR_COLUMNS,
        ODOMETRY_COLUMNS,
        "is_node  bool  a SLAM graph node (precise) rather than interpolated",
    ),
)

GROUND_TRUTH_NODES = TableSpec(
    "normalized",
    "ground_truth_nodes",
    "SLAM graph nodes of a reference trajectory (NCLT cov_<date>.csv): the node times and their "
    "pose covariance, one row a node. The files give no pose at a node's time, so the nodes "
    "are their own table, not null-pose ground_truth rows; a ground_truth row at exactly a "
    "node's time has is_node = true.",
    columns(
        SENSOR_COLUMNS,
        """
        covariance  list<float64>[21]!  upper triangle of the 6x6 pose covariance over (x, y,
            z, roll, pitch, yaw), row by row
        """,
    ),
)

LASER_SCANS = TableSpec(
    "normalized",
    "laser_scans",
    "Planar laser scans (sensor_msgs/LaserScan semantics).",
    columns(
        SENSOR_COLUMNS,
        """
        angle_min_rad        float32!        angle of the first range [rad]
        angle_increment_rad  float32!        angle between ranges [rad]
        range_min_m          float32         smallest valid range [m]
        range_max_m          float32         largest valid range [m]
        ranges_m             list<float32>!  ranges [m]; NaN = no return
        """,
    ),
)

STREAMS = TableSpec(
    "normalized",
    "streams",
    "Stream catalog: one row per source stream with counts, rates, gaps and its clock fit.",
    columns(
        """
        stream               string!  source stream
        source_file          string   drive-relative file(s) the stream came from
        source_type          string   NCLT kind, ADTF meta type or DDL struct
        table                string!  normalized table it went to
        topic                string   default ROS topic for exports
        records_read         int64!   records in the raw file(s)
        rows_written         int64!   rows in the table
        records_joined       int64!   records whose values went into the row of another
            record of the same instant (a side file joined by time, e.g. NCLT ms25_euler.csv
            onto ms25.csv): records_read = rows_written + records_joined + rows_quarantined
        rows_quarantined     int64!   records in quarantine
        first_time_ns        int64    first master time
        last_time_ns         int64    last master time
        mean_rate_hz         float64  (rows - 1) / (last - first)
        expected_rate_hz     float64  nominal rate of the sensor, if known
        reordered            int64    records the normalizer moved to restore time order
        out_of_order         int64    rows still earlier than their predecessor (0 = ok)
        duplicates           int64    records sharing a time stamp with another
        gaps                 int64    steps longer than the gap threshold
        longest_gap_ns       int64    longest step between records
        gap_threshold_ns     int64    threshold used (5 median periods)
        clock_offset_ns      int64    device clock fit: master - sensor at first sample
        clock_drift_ppm      float64  device clock fit: drift [ppm]
        clock_residual_ns    float64  device clock fit: RMS residual
        clock_outliers       int64    samples the robust fit excluded
        clock_fit_error      string   why no clock fit was possible (if device times)
        mapping              string   how the table was chosen: the mapping rule (and its
            layer), or why the stream went to a generic table (ADTF)
        recording_offset_ns  int64    added to the recording's own times to put it on the
            master clock (ADTF)
        recording_clock      string   how that offset was found: absolute times, the file
            header, or fitted to another recording on a shared stream (ADTF)
        ddl_struct           string   DDL struct describing each sample (ADTF)
        ddl                  string   the recording's DDL description of the stream (ADTF):
            element types, units, enums
        skipped              string   why the stream's files were not read (a second stream
            of a sensor that another stream already holds, e.g. NCLT velodyne_sync, read only
            when drive.yaml asks for it); null when they were
        """
    ),
)

ADTF_PAYLOADS = TableSpec(
    "normalized",
    "adtf_payloads",
    "ADTF samples of streams without a DDL description (raw media types, anonymous streams), "
    "kept byte for byte with their stream type.",
    columns(
        (TIME_NS,),
        """
        sample_time_ns  int64    the sample's own ADTF time stamp, ns
        stream          string!  ADTF stream name (`stream/substream`)
        meta_type       string   ADTF meta type (adtf/anonymous, adtf/plaintype, ...)
        data            binary   the sample's payload as the vendor reader returns it
        """,
    ),
)

QUARANTINE = TableSpec(
    "normalized",
    "quarantine",
    "Every raw record that could not be normalized, with its position and reason.",
    columns(
        """
        stream        string!  source stream
        source_file   string!  drive-relative file
        record_index  int64    index of the record within its stream
        byte_offset   int64    byte offset in the file, where known
        line          int64    1-based line, for text files
        byte_length   int64    bytes skipped, for binary ranges
        reason        string!  why it was quarantined
        raw           binary   the raw bytes, capped at 4 KiB
        """
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
    GROUND_TRUTH_NODES,
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

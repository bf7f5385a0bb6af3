"""Calibrated layer: the drive in one vehicle frame and one map (REP-103 base_link, ENU map).

Rows here come from the normalized tables and the drive's rig calibration; the exports read
`/tf_static`, `/tf` and the point clouds from these tables.
"""

from __future__ import annotations

import pyarrow as pa

from bridge_lake.lake.schemas.base import F64, Column, TableSpec, lidar_point_columns


def _transform(what: str) -> tuple[Column, ...]:
    return (
        Column("x_m", F64, f"{what} translation x [m]", nullable=False),
        Column("y_m", F64, f"{what} translation y [m]", nullable=False),
        Column("z_m", F64, f"{what} translation z [m]", nullable=False),
        Column("qx", F64, f"{what} rotation quaternion x", nullable=False),
        Column("qy", F64, f"{what} rotation quaternion y", nullable=False),
        Column("qz", F64, f"{what} rotation quaternion z", nullable=False),
        Column("qw", F64, f"{what} rotation quaternion w (≥ 0)", nullable=False),
    )


TF_STATIC = TableSpec(
    "calibrated",
    "tf_static",
    "One row per static transform of the drive's rig (parent → child, the pose of the child in "
    "the parent, REP-103): the single source of /tf_static in the exports. Camera intrinsics on "
    "camera rows.",
    (
        Column("parent_frame", pa.string(), "parent frame id", nullable=False),
        Column("child_frame", pa.string(), "child frame id", nullable=False),
        *_transform("child in parent:"),
        Column("kind", pa.string(), "imu | gnss | lidar | camera | laser | heading | mount"),
        Column("time_offset_ns", pa.int64(), "add to the sensor's times for true time [ns]"),
        Column("width", pa.int32(), "camera image width [px]"),
        Column("height", pa.int32(), "camera image height [px]"),
        Column("k", pa.list_(F64, 9), "camera matrix K, row by row [px]"),
        Column("distortion_model", pa.string(), "plumb_bob | equidistant | lookup_table | ..."),
        Column("d", pa.list_(F64), "distortion coefficients"),
        Column("rig_file", pa.string(), "rig YAML the row came from", nullable=False),
        Column("rig_valid_from", pa.date32(), "first day the calibration holds", nullable=False),
    ),
)

POSES = TableSpec(
    "calibrated",
    "poses",
    "base_link in the drive's map frame (ENU, metres; origin in calibrated/map_origin) at the "
    "pose source's rate: NCLT ground truth where present, else fused from GNSS + IMU, else "
    "GNSS alone (heading from the track). Empty for a drive whose vehicle has no rig.",
    (
        Column("time_ns", pa.int64(), "master clock, ns since the Unix epoch", nullable=False),
        Column("frame_id", pa.string(), "map frame", nullable=False),
        Column("child_frame_id", pa.string(), "body frame (base_link)", nullable=False),
        *_transform("base_link in map:"),
        Column("speed_mps", F64, "horizontal speed [m/s]"),
        Column("yaw_rad", F64, "heading of base_link x, counter-clockwise from east [rad]"),
        Column("source", pa.string(), "ground_truth | gnss_imu | gnss", nullable=False),
    ),
)

MAP_ORIGIN = TableSpec(
    "calibrated",
    "map_origin",
    "One row per drive: the geodetic origin of its map frame (local tangent plane, ENU) and "
    "how the poses were made.",
    (
        Column("frame_id", pa.string(), "map frame", nullable=False),
        Column("lat_deg", F64, "origin latitude [deg] (WGS-84)", nullable=False),
        Column("lon_deg", F64, "origin longitude [deg]", nullable=False),
        Column("alt_m", F64, "origin altitude [m]", nullable=False),
        Column(
            "origin_source", pa.string(), "rig ground_truth origin | base_link at the first pose"
        ),
        Column("estimator", pa.string(), "how calibrated/poses were made", nullable=False),
        Column("pose_count", pa.int64(), "rows in calibrated/poses", nullable=False),
        Column("dropped_poses", pa.int64(), "source poses dropped (invalid / NaN)", nullable=False),
    ),
)

LIDAR_POINTS = TableSpec(
    "calibrated",
    "lidar_points",
    "Every lidar point in base_link (REP-103), keeping ring, intensity and per-point time; "
    "optionally deskewed to its scan's time (calibrated/frames.deskewed).",
    lidar_point_columns("normalized/lidar_scans", "base_link"),
)

MATCH = pa.struct(
    [
        pa.field("sensor", pa.string(), nullable=False),
        pa.field("table", pa.string(), nullable=False),
        pa.field("time_ns", pa.int64()),
        pa.field("dt_ns", pa.int64()),
        pa.field("tolerance_ns", pa.int64(), nullable=False),
        pa.field("ok", pa.bool_(), nullable=False),
    ]
)

FRAMES = TableSpec(
    "calibrated",
    "frames",
    "One row per key frame (lidar scan): its pose (slerp-interpolated at the scan time) and the "
    "nearest sample of every camera, IMU and GNSS stream. Frames whose match exceeds the "
    "tolerance are marked (ok = false), never dropped.",
    (
        Column("scan_id", pa.int64(), "normalized/lidar_scans.scan_id", nullable=False),
        Column("stream", pa.string(), "lidar stream", nullable=False),
        Column("time_ns", pa.int64(), "scan start, master clock [ns]", nullable=False),
        Column("end_time_ns", pa.int64(), "scan end [ns]", nullable=False),
        Column("point_count", pa.int64(), "points of the scan", nullable=False),
        Column("x_m", F64, "base_link in map at time_ns: x [m] (null beyond the limit)"),
        Column("y_m", F64, "y [m]"),
        Column("z_m", F64, "z [m]"),
        Column("qx", F64, "rotation quaternion x"),
        Column("qy", F64, "rotation quaternion y"),
        Column("qz", F64, "rotation quaternion z"),
        Column("qw", F64, "rotation quaternion w"),
        Column(
            "pose_extrapolated_ns",
            pa.int64(),
            "distance of time_ns outside the poses' time range (0 inside)",
            nullable=False,
        ),
        Column("deskewed", pa.bool_(), "points motion-compensated to time_ns", nullable=False),
        Column(
            "matches",
            pa.list_(MATCH),
            "nearest sample per stream: sensor (stream), table, its time, dt = its time - "
            "time_ns (time offsets of the rig applied), tolerance, ok = |dt| ≤ tolerance",
        ),
        Column("all_ok", pa.bool_(), "every match within its tolerance", nullable=False),
    ),
)

CALIBRATED: dict[str, TableSpec] = {
    t.name: t for t in (TF_STATIC, POSES, MAP_ORIGIN, LIDAR_POINTS, FRAMES)
}

"""Calibrated layer: the drive in one vehicle frame and one map (REP-103 base_link, ENU map).

Rows here come from the normalized tables and the drive's rig calibration; the exports read
`/tf_static`, `/tf` and the point clouds from these tables.
"""

from __future__ import annotations

import pyarrow as pa

from bridge_lake.lake.schemas.base import TIME_NS, Column, TableSpec, columns, lidar_point_columns


def _transform(what: str) -> tuple[Column, ...]:
    return columns(
        f"""
        x_m  float64!  {what} translation x [m]
        y_m  float64!  {what} translation y [m]
        z_m  float64!  {what} translation z [m]
        qx   float64!  {what} rotation quaternion x
        qy   float64!  {what} rotation quaternion y
        qz   float64!  {what} rotation quaternion z
        qw   float64!  {what} rotation quaternion w (≥ 0)
        """
    )


TF_STATIC = TableSpec(
    "calibrated",
    "tf_static",
    "One row per static transform of the drive's rig (parent → child, the pose of the child in "
    "the parent, REP-103): the single source of /tf_static in the exports. Camera intrinsics on "
    "camera rows.",
    columns(
        """
        parent_frame  string!  parent frame id
        child_frame   string!  child frame id
        """,
        _transform("child in parent:"),
        """
        kind              string            imu | gnss | lidar | camera | laser | heading | mount
        time_offset_ns    int64             add to the sensor's times for true time [ns]
        width             int32             camera image width [px]
        height            int32             camera image height [px]
        k                 list<float64>[9]  camera matrix K, row by row [px]
        distortion_model  string            plumb_bob | equidistant | lookup_table | ...
        d                 list<float64>     distortion coefficients
        rig_file          string!           rig YAML the row came from
        rig_valid_from    date32!           first day the calibration holds
        """,
    ),
)

POSES = TableSpec(
    "calibrated",
    "poses",
    "base_link in the drive's map frame (ENU, metres; origin in calibrated/map_origin) at the "
    "pose source's rate: NCLT ground truth where present, else fused from GNSS + IMU, else "
    "GNSS alone (heading from the track). Empty for a drive whose vehicle has no rig.",
    columns(
        (TIME_NS,),
        """
        frame_id        string!  map frame
        child_frame_id  string!  body frame (base_link)
        """,
        _transform("base_link in map:"),
        """
        speed_mps  float64  horizontal speed [m/s]
        yaw_rad    float64  heading of base_link x, counter-clockwise from east [rad]
        source     string!  ground_truth | gnss_imu | gnss
        """,
    ),
)

MAP_ORIGIN = TableSpec(
    "calibrated",
    "map_origin",
    "One row per drive: the geodetic origin of its map frame (local tangent plane, ENU) and "
    "how the poses were made.",
    columns(
        """
        frame_id       string!   map frame
        lat_deg        float64!  origin latitude [deg] (WGS-84)
        lon_deg        float64!  origin longitude [deg]
        alt_m          float64!  origin altitude [m]
        origin_source  string    rig ground_truth origin | base_link at the first pose
        estimator      string!   how calibrated/poses were made
        pose_count     int64!    rows in calibrated/poses
        dropped_poses  int64!    source poses dropped (invalid / NaN)
        """
    ),
)

LIDAR_TRANSFORMS = TableSpec(
    "calibrated",
    "lidar_transforms",
    "One row per lidar scan: the rigid transform that moves its points from the sensor frame "
    "into base_link (REP-103), p_base = R p + t, from the drive's rig. With it, every "
    "normalized/lidar_points row is a base_link point without a second stored copy: the view "
    "calibrated_lidar_points (sql/views.sql, bridge_lake.lake.query.scan) applies it in float32, "
    "the exporters likewise. A deskewed drive stores its points in calibrated/deskewed_points "
    "instead (stored = true).",
    columns(
        """
        scan_id   int64!    normalized/lidar_scans.scan_id
        frame_id  string!   the scan's sensor frame
        r00       float32!  rotation row 0, column 0 (sensor → base_link)
        r01       float32!  rotation row 0, column 1
        r02       float32!  rotation row 0, column 2
        r10       float32!  rotation row 1, column 0
        r11       float32!  rotation row 1, column 1
        r12       float32!  rotation row 1, column 2
        r20       float32!  rotation row 2, column 0
        r21       float32!  rotation row 2, column 1
        r22       float32!  rotation row 2, column 2
        tx        float32!  translation x [m]
        ty        float32!  translation y [m]
        tz        float32!  translation z [m]
        stored    bool!     the drive is deskewed: this scan's base_link points are the
            stored rows of calibrated/deskewed_points, not computed from this row
        """
    ),
)

DESKEWED_POINTS = TableSpec(
    "calibrated",
    "deskewed_points",
    "Every base_link point of a deskewed drive (drive.yaml `deskew: true`), each moved to where "
    "it would have been seen at its scan's start, p_ref = T_ref⁻¹ T(t) p (points without a "
    "time or a pose only transformed; calibrated/frames.deskewed says which scans moved): a "
    "motion no per-scan transform can express. Empty for drives without deskew.",
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
    columns(
        """
        scan_id               int64!       normalized/lidar_scans.scan_id
        stream                string!      lidar stream
        time_ns               int64!       scan start, master clock [ns]
        end_time_ns           int64!       scan end [ns]
        point_count           int64!       points of the scan
        x_m                   float64      base_link in map at time_ns: x [m] (null beyond the
            limit)
        y_m                   float64      y [m]
        z_m                   float64      z [m]
        qx                    float64      rotation quaternion x
        qy                    float64      rotation quaternion y
        qz                    float64      rotation quaternion z
        qw                    float64      rotation quaternion w
        pose_extrapolated_ns  int64!       distance of time_ns outside the poses' time range (0
            inside)
        deskewed              bool!        points motion-compensated to time_ns
        matches               list<MATCH>  nearest sample per stream: sensor (stream), table, its
            time, dt = its time - time_ns (time offsets of the rig applied), tolerance, ok =
            |dt| ≤ tolerance
        all_ok                bool!        every match within its tolerance
        """,
        structs={"MATCH": MATCH},
    ),
)

CALIBRATED: dict[str, TableSpec] = {
    t.name: t for t in (TF_STATIC, POSES, MAP_ORIGIN, LIDAR_TRANSFORMS, DESKEWED_POINTS, FRAMES)
}

"""Poses (ground truth through the rig, GNSS + IMU fusion), interpolation limits, point
transforms and deskew, each against answers known analytically."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
import yaml
from scipy.spatial.transform import Rotation

from bridge_lake.calibrate.poses import PoseTrack, poses_from_ground_truth
from bridge_lake.calibrate.rig import SHIPPED_RIGS, load_rig
from bridge_lake.calibrate.transforms import PointTransformer, tf_static_table
from bridge_lake.geometry import quaternion_to_rpy, wrap_angle

T0 = 1_700_000_000_000_000_000


def gt_table(rows: list[tuple[float, ...]]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    names = ("x_m", "y_m", "z_m", "roll_rad", "pitch_rad", "yaw_rad")
    return pa.table(
        {"time_ns": [T0 + i * 10_000_000 for i in range(len(rows))]}
        | {n: list(c) for n, c in zip(names, cols, strict=True)}
    )


def test_ground_truth_ned_frd_becomes_enu_base_link():
    rig = load_rig(SHIPPED_RIGS / "nclt-segway.yaml")
    r, p, y = math.radians(10), math.radians(5), math.radians(30)
    track = poses_from_ground_truth(
        gt_table([(10.0, 5.0, -2.0, 0.0, 0.0, math.pi / 2), (10.0, 5.0, -2.0, r, p, y)]), rig
    )
    # body 10 m north, 5 m east, 2 m up, facing east → base_link at (5, 10, 2) facing ENU x
    np.testing.assert_allclose(track.position[0], [5, 10, 2], atol=1e-12)
    np.testing.assert_allclose(track.rotation[0].as_quat(canonical=True), [0, 0, 0, 1], atol=1e-12)
    # R_enu_flu = Rz(90° - yaw) Ry(-pitch) Rx(roll): roll keeps its sign, pitch flips
    np.testing.assert_allclose(
        quaternion_to_rpy(track.rotation[1].as_quat()), [r, -p, math.pi / 2 - y], atol=1e-12
    )
    assert track.origin == (42.293227, -83.709657, 270.0) and track.source == "ground_truth"


def test_invalid_ground_truth_rows_are_dropped_and_counted():
    rig = load_rig(SHIPPED_RIGS / "nclt-segway.yaml")
    rows = [(0.0, 0, 0, 0, 0, 0), (math.nan,) * 6, (1.0, 0, 0, 0, 0, 0)]
    track = poses_from_ground_truth(gt_table(rows), rig)
    assert len(track) == 2 and track.dropped == 1


def straight_track(n: int = 11) -> PoseTrack:
    t = T0 + np.arange(n) * 100_000_000
    pos = np.stack([np.arange(n) * 1.0, np.zeros(n), np.zeros(n)], -1)
    rot = Rotation.from_euler("z", np.linspace(0, math.pi / 2, n)[:, None])
    return PoseTrack(t, pos, rot, np.ones(n), "test", (0, 0, 0), "test", "test")


def test_pose_interpolation_slerps_and_never_extrapolates_beyond_the_limit():
    track = straight_track()
    t = np.array([T0 + 50_000_000, T0 - 50_000_000, T0 - 150_000_000, T0 + 1_050_000_000])
    pos, quat, outside = track.at(t, limit_ns=100_000_000)
    np.testing.assert_allclose(pos[0], [0.5, 0, 0])
    assert quaternion_to_rpy(quat[0])[2] == pytest.approx(math.pi / 40)
    np.testing.assert_allclose(pos[1], [0, 0, 0])  # 50 ms before: the first pose, held
    assert outside.tolist() == [0, 50_000_000, 150_000_000, 50_000_000]
    assert np.isnan(pos[2]).all() and np.isnan(quat[2]).all()  # beyond the limit: no pose
    np.testing.assert_allclose(pos[3], [10, 0, 0])


def identity_rig(tmp_path, translation=(1.0, 0.0, 2.0), rpy=(0.0, 0.0, 90.0)):
    doc = {
        "vehicle": "car",
        "valid_from": "2020-01-01",
        "frames": {
            "lidar": {"kind": "lidar", "translation": list(translation), "rpy_deg": list(rpy)}
        },
    }
    path = tmp_path / "car.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_rig(path)


def points_batch(scan_ids, xyz, offsets=None) -> pa.RecordBatch:
    n = len(scan_ids)
    return pa.RecordBatch.from_pydict(
        {
            "scan_id": pa.array(scan_ids, pa.int64()),
            "x": pa.array(xyz[:, 0], pa.float32()),
            "y": pa.array(xyz[:, 1], pa.float32()),
            "z": pa.array(xyz[:, 2], pa.float32()),
            "intensity": pa.array(np.ones(n), pa.float32()),
            "ring": pa.array(np.zeros(n), pa.int16()),
            "time_offset_ns": pa.array(offsets if offsets is not None else [None] * n, pa.int32()),
        }
    )


def test_points_land_where_the_rig_says(tmp_path):
    rig = identity_rig(tmp_path)
    scans = pa.table({"scan_id": [7], "frame_id": ["lidar"], "time_ns": [T0]})
    t = PointTransformer(rig, scans)
    out = t(points_batch([7, 7], np.array([[10.0, 0, 0], [0, 0, -2.0]])))
    # the lidar looks left (yaw 90°) from 1 m forward, 2 m up: its x is base_link's y
    np.testing.assert_allclose(out[0], [1, 1], atol=1e-6)
    np.testing.assert_allclose(out[1], [10, 0], atol=1e-6)
    np.testing.assert_allclose(out[2], [2, 0], atol=1e-6)
    # the scan's row of calibrated/lidar_transforms moves its points the same way
    row = t.transforms_table().to_pylist()[0]
    r = np.array([[row[f"r{i}{j}"] for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(
        r @ [10.0, 0, 0] + [row["tx"], row["ty"], row["tz"]], [1, 10, 2], atol=1e-6
    )
    assert row["scan_id"] == 7 and row["frame_id"] == "lidar" and not row["stored"]
    assert t.stats.points == 2 and t.stats.non_finite == 0
    table = tf_static_table(rig)
    assert table.column("child_frame").to_pylist() == ["lidar"]
    assert table.column("qz")[0].as_py() == pytest.approx(math.sqrt(0.5))


def test_deskew_removes_the_motion_smear_of_a_moving_scan(tmp_path):
    """A car at 10 m/s turning at 0.5 rad/s sees a static wall during a 100 ms scan. Read
    at the scan's start time, the undeskewed points are smeared by up to a metre; deskewed
    they fall where the wall was seen from the start pose."""
    rig = identity_rig(tmp_path, translation=(1.0, 0.2, 1.8), rpy=(0.0, 0.0, 30.0))
    v, w = 10.0, 0.5
    t = np.arange(0, 2.0, 0.005)
    yaw = w * t
    x, y = (v / w) * np.sin(yaw), (v / w) * (1 - np.cos(yaw))
    track = PoseTrack(
        T0 + np.round(t * 1e9).astype(np.int64),
        np.stack([x, y, np.zeros_like(t)], -1),
        Rotation.from_euler("z", yaw[:, None]),
        np.full_like(t, v),
        "test",
        (0, 0, 0),
        "test",
        "test",
    )
    t_ref = 0.5
    n = 2000
    offsets = np.linspace(0, 0.1, n)
    rng = np.random.default_rng(0)
    world = np.stack([rng.uniform(0, 40, n), np.full(n, 15.0), rng.uniform(0, 3, n)], -1)

    def base_at(seconds):
        yaw_s = w * seconds
        p = np.stack([(v / w) * np.sin(yaw_s), (v / w) * (1 - np.cos(yaw_s)), 0 * seconds], -1)
        return Rotation.from_euler("z", yaw_s[:, None]), p

    r_i, p_i = base_at(t_ref + offsets)
    in_base = r_i.inv().apply(world - p_i)
    mount = rig.to_base("lidar")
    in_sensor = mount.inverse().apply(in_base)
    r_ref, p_ref = base_at(np.array([t_ref]))
    truth = r_ref.inv().apply(world - p_ref)
    scans = pa.table({"scan_id": [1], "frame_id": ["lidar"], "time_ns": [T0 + 500_000_000]})
    batch = points_batch(np.ones(n, int), in_sensor, np.round(offsets * 1e9).astype(np.int32))

    def error(points: np.ndarray) -> np.ndarray:
        return np.linalg.norm(points.T - truth, axis=1)

    plain = PointTransformer(rig, scans, track=track, deskew=False)(batch)
    deskewer = PointTransformer(rig, scans, track=track, deskew=True)
    fixed = deskewer(batch)
    assert error(plain).max() > 0.9  # 10 m/s x 100 ms, plus the turn
    assert error(fixed).max() < 2e-3  # float32 points and a 200 Hz pose track
    assert deskewer.stats.deskewed_points == n and deskewer.deskewed_scans == {1}


def test_gnss_imu_poses_follow_the_generator_truth(synthetic_lake):
    """The fused trajectory of the synthetic ADTF drive against the generator's track.
    Measured: 6.6 cm RMS, 10 cm max; heading 0.03° RMS (docs/ARCHITECTURE.md)."""
    from bridge_lake.geometry import geodetic_to_enu
    from bridge_lake.synth import adtf

    drive = synthetic_lake.drives["adtf"]
    lake = synthetic_lake.lake
    poses = lake.read_partition("calibrated", "poses", drive.drive_id)
    origin = lake.read_partition("calibrated", "map_origin", drive.drive_id).to_pylist()[0]
    assert poses.column("source")[0].as_py() == "gnss_imu"
    offset = geodetic_to_enu(
        origin["lat_deg"], origin["lon_deg"], origin["alt_m"], *adtf.GNSS_ORIGIN
    )
    seed = int(drive.drive_id.rsplit("s", 1)[1])
    truth = adtf.truth_track(synthetic_lake.minutes, seed)
    start = poses.column("time_ns").to_numpy()
    first_ns = int(adtf.START.timestamp() + 7 * 60 * (seed % 1000)) * 1_000_000_000
    sec = (start - first_ns) / 1e9
    dx = poses.column("x_m").to_numpy() + offset[0] - truth.at(sec, "x")
    dy = poses.column("y_m").to_numpy() + offset[1] - truth.at(sec, "y")
    err = np.hypot(dx, dy)
    assert np.sqrt(np.mean(err**2)) < 0.15 and err.max() < 0.3
    dyaw = wrap_angle(poses.column("yaw_rad").to_numpy() - truth.at(sec, "heading"))
    assert np.degrees(np.sqrt(np.mean(dyaw**2))) < 0.2
    assert abs(poses.column("z_m").to_numpy() + offset[2]).max() < 0.1  # the track is flat

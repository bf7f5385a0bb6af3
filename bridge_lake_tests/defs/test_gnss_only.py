"""A GNSS-only NCLT drive (issue 22, finding 9): a synthetic NCLT session reduced to gps.csv
gets poses from GNSS alone, marked as such, and waypoints from them (asset and CLI). The
oracle is the same session's ground truth (gps.csv + groundtruth csv only), calibrated
through the rig."""

from __future__ import annotations

import csv
import shutil

import dagster as dg
import numpy as np
import pytest

from bridge_lake.calibrate.poses import ESTIMATOR_GNSS
from bridge_lake.cli import main
from bridge_lake.defs.calibrated import calibrated
from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.defs.waypoints import waypoints
from bridge_lake.geometry import enu_to_geodetic, geodetic_to_enu
from bridge_lake.lake import Lake
from bridge_lake.synth import synthesize

DATE = "2012-01-08"


@pytest.fixture(scope="module")
def drives(tmp_path_factory):
    root = tmp_path_factory.mktemp("gnss_only")
    (made,) = synthesize(root / "synth", drives=1, minutes=1.0, seed=3, source="nclt", light=True)
    landing = root / "landing"
    for drive, names in (
        ("gps-only", ["gps.csv"]),
        ("truth", ["gps.csv", f"groundtruth_{DATE}.csv"]),
    ):
        (landing / drive / DATE).mkdir(parents=True)
        shutil.copy(made.path / "drive.yaml", landing / drive / "drive.yaml")
        for name in names:
            shutil.copy(made.path / DATE / name, landing / drive / DATE / name)
    shutil.rmtree(root / "synth")  # the rest of the session is not needed
    results = {}
    with dg.instance_for_test() as instance:
        for drive in ("gps-only", "truth"):
            instance.add_dynamic_partitions("drives", [drive])
            results[drive] = dg.materialize(
                [raw_manifest, normalized, calibrated, waypoints],
                partition_key=drive,
                instance=instance,
                resources={
                    "lake": LakeResource(root=str(root / "lake")),
                    "landing": LandingZoneResource(root=str(landing)),
                },
                raise_on_error=False,
            )
    return root / "lake", results


def _track(lake: Lake, drive: str):
    poses = lake.read_partition("calibrated", "poses", drive)
    origin = lake.read_partition("calibrated", "map_origin", drive).to_pylist()[0]
    xyz = np.column_stack([poses.column(c).to_numpy() for c in ("x_m", "y_m", "z_m")])
    return poses, origin, xyz


def test_gnss_only_poses_are_marked_and_follow_the_ground_truth(drives):
    lake_root, results = drives
    assert results["gps-only"].success and results["truth"].success
    checks = {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in results["gps-only"].get_asset_check_evaluations()
    }
    assert not [k for k, e in checks.items() if not e.passed and e.severity.value == "ERROR"]
    available = checks[("calibrated_poses", "poses_available")]
    assert available.passed and "from gnss" in available.description
    lake = Lake(str(lake_root))
    poses, origin, xyz = _track(lake, "gps-only")
    assert set(poses.column("source").to_pylist()) == {"gnss"}  # marked as such
    assert origin["estimator"] == ESTIMATOR_GNSS
    truth, t_origin, t_xyz = _track(lake, "truth")
    assert set(truth.column("source").to_pylist()) == {"ground_truth"}
    # the GNSS-only track in the truth's map frame, compared at the fixes' times
    lat, lon, alt = enu_to_geodetic(xyz, origin["lat_deg"], origin["lon_deg"], origin["alt_m"])
    mine = geodetic_to_enu(
        lat, lon, alt, t_origin["lat_deg"], t_origin["lon_deg"], t_origin["alt_m"]
    )
    t, tt = poses.column("time_ns").to_numpy(), truth.column("time_ns").to_numpy()
    inside = (t >= tt[0]) & (t <= tt[-1])
    ref = np.column_stack([np.interp(t[inside], tt, t_xyz[:, k]) for k in range(2)])
    err = np.hypot(*(mine[inside, :2] - ref).T)
    # the generator's consumer GPS: a random walk of 0.15 m per fix (measured 1.25 m RMS)
    assert inside.sum() > 150 and np.sqrt((err**2).mean()) < 2.0 and err.max() < 4.0
    yaw = poses.column("yaw_rad").to_numpy()[inside]
    ref_yaw = np.interp(t[inside], tt, np.unwrap(truth.column("yaw_rad").to_numpy()))
    moving = poses.column("speed_mps").to_numpy()[inside] > 0.5
    d_yaw = np.degrees(np.angle(np.exp(1j * (yaw - ref_yaw))))[moving]
    assert moving.sum() > 100 and np.sqrt((d_yaw**2).mean()) < 8.0  # measured 4.3 deg


def test_waypoints_of_a_gnss_only_drive_from_the_asset_and_the_cli(drives, tmp_path):
    lake_root, results = drives
    (mat,) = [
        m.materialization
        for m in results["gps-only"].get_asset_materialization_events()
        if m.asset_key.to_user_string() == "waypoints"
    ]
    assert mat.metadata["dagster/row_count"].value > 50  # a 1-minute Segway loop, ~80 m
    assert "no_route" not in mat.metadata
    checks = [
        e
        for e in results["gps-only"].get_asset_check_evaluations()
        if e.asset_key.to_user_string() == "waypoints"
    ]
    assert checks and all(e.passed for e in checks if e.severity.value == "ERROR")
    out = tmp_path / "w.csv"
    assert (
        main(["waypoints", "--drive", "gps-only", "--lake", str(lake_root), "--out", str(out)]) == 0
    )
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["x", "y", "z", "yaw", "velocity", "change_flag"]
    assert len(rows) == mat.metadata["dagster/row_count"].value

"""Waypoints of synthetic drives against the generators' truth, under Dagster and the CLI.

Measured (ADTF 0.5 min, seed 2000, 360 m from standstill into the first curve): waypoints
0.4 cm RMS / 1.3 cm max off the generator's path (cross-track), yaw 0.03° RMS / 0.24° max,
length within 1 cm of the truth's, velocity never above the driven speed (+2 mm/s); NCLT
0.2 min (ground-truth poses = the generator's trajectory, 9 m): 0.1 mm max.
"""

import dagster as dg
import numpy as np
import pyarrow as pa
import pytest
from scipy.spatial import cKDTree

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.cli import main
from bridge_lake.defs.resources import LakeResource
from bridge_lake.defs.waypoints import waypoints as waypoints_asset
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.geometry import geodetic_to_enu, wrap_angle
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake.synth import adtf, synthesize
from bridge_lake.waypoints import (
    CHECKS,
    build_waypoints,
    check_waypoints,
    lake_waypoints,
    poses_from_bag,
    poses_from_lake,
    read_csv,
)
from bridge_lake_tests.support import register

MINUTES = 0.5


@pytest.fixture(scope="module")
def lake(tmp_path_factory, synthetic_lake):
    """An ADTF drive of 0.5 min (into the oval's first curve), plus the NCLT drive's
    calibrated poses copied from the session lake (which tests must not write into)."""
    root = tmp_path_factory.mktemp("waypoints_lake")
    (made,) = synthesize(
        root / "landing", drives=1, minutes=MINUTES, seed=2, source="adtf", light=True
    )
    store, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    register(landing, store, made.drive_id)
    assert normalize_drive(landing, store, made.drive_id, made.source)[1]
    assert calibrate_drive(store, made.drive_id)[1]
    nclt = synthetic_lake.drives["nclt"].drive_id
    for table in ("poses", "map_origin"):
        rows = synthetic_lake.lake.read_partition("calibrated", table, nclt)
        store.write_partition("calibrated", table, nclt, rows)
    return store, made.drive_id, nclt


def _park(store: Lake, drive: str, parked: str) -> None:
    """A drive that stands still the whole time (GNSS jitter only): no route."""
    poses = store.read_partition("calibrated", "poses", drive).slice(0, 300)
    rng = np.random.default_rng(0)
    for name in ("x_m", "y_m"):
        jitter = pa.array(5.0 + rng.normal(0, 0.02, poses.num_rows))
        poses = poses.set_column(poses.schema.get_field_index(name), name, jitter)
    speed = pa.array(np.zeros(poses.num_rows))
    poses = poses.set_column(poses.schema.get_field_index("speed_mps"), "speed_mps", speed)
    store.write_partition("calibrated", "poses", parked, poses)


def _cross_track(px: np.ndarray, py: np.ndarray, qx: np.ndarray, qy: np.ndarray) -> np.ndarray:
    """Distance of every point q to the polyline p (segments either side of the nearest
    vertex), so the polyline's own sample spacing does not count as error."""
    _, k = cKDTree(np.column_stack([px, py])).query(np.column_stack([qx, qy]))
    best = np.full(len(qx), np.inf)
    for a in (np.maximum(k - 1, 0), k):
        b = np.minimum(a + 1, len(px) - 1)
        ex, ey = px[b] - px[a], py[b] - py[a]
        t = np.clip(
            ((qx - px[a]) * ex + (qy - py[a]) * ey) / np.maximum(ex**2 + ey**2, 1e-12), 0, 1
        )
        best = np.minimum(best, np.hypot(px[a] + t * ex - qx, py[a] + t * ey - qy))
    return best


def test_adtf_waypoints_follow_the_generator_truth(lake):
    store, drive, _ = lake
    made = lake_waypoints(store, drive)
    wp = made.waypoints
    assert made.passed and all(f.passed for f in made.findings), made.findings
    origin = store.read_partition("calibrated", "map_origin", drive).to_pylist()[0]
    offset = geodetic_to_enu(
        origin["lat_deg"], origin["lon_deg"], origin["alt_m"], *adtf.GNSS_ORIGIN
    )
    truth = adtf.truth_track(MINUTES, int(drive.rsplit("s", 1)[1]))
    span = truth.t <= MINUTES * 60
    tx, ty = truth.x[span] - offset[0], truth.y[span] - offset[1]
    err = _cross_track(tx, ty, wp.x, wp.y)
    assert np.sqrt(np.mean(err**2)) < 0.03 and err.max() < 0.06  # measured 0.4 / 1.3 cm
    _, k = cKDTree(np.column_stack([tx, ty])).query(np.column_stack([wp.x, wp.y]))
    dyaw = np.degrees(wrap_angle(wp.yaw - truth.heading[span][k]))
    assert np.sqrt(np.mean(dyaw**2)) < 0.2 and np.abs(dyaw).max() < 1.0  # 0.03° / 0.24°
    travelled = np.concatenate([[0.0], np.cumsum(np.hypot(np.diff(tx), np.diff(ty)))])
    assert wp.length_m == pytest.approx(travelled[k[-1]] - travelled[k[0]], rel=1e-3)
    assert wp.length_m > 300 and (np.abs(wp.curvature) > 1 / 70).any()  # it reached the curve
    # the profile never asks for more than was driven, and respects the curve's limit
    assert (wp.velocity_mps <= truth.speed[span][k] + 0.05).all()
    assert (wp.velocity_mps <= np.sqrt(2.0 / np.maximum(np.abs(wp.curvature), 1e-6)) + 1e-9).all()
    assert wp.velocity_mps[0] == 0 and wp.velocity_mps[-1] == 0  # standing start, end


def test_nclt_waypoints_follow_the_ground_truth(lake):
    store, _, drive = lake
    poses = poses_from_lake(store, drive)  # NCLT ground truth = the generator's trajectory
    wp = build_waypoints(poses)
    assert all(f.passed for f in check_waypoints(wp)), check_waypoints(wp)
    assert _cross_track(poses.x, poses.y, wp.x, wp.y).max() < 0.01  # measured 0.1 mm


def test_the_asset_materializes_with_its_checklist(lake):
    store, adtf_drive, nclt_drive = lake
    _park(store, adtf_drive, "parked-car")
    store.write_bytes("exports/drive=parked-car/waypoints.csv", b"stale")  # an earlier run's
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", [adtf_drive, nclt_drive, "parked-car"])

        def run(drive: str):
            result = dg.materialize(
                [waypoints_asset],
                partition_key=drive,
                instance=instance,
                resources={"lake": LakeResource(root=store.root)},
            )
            assert result.success
            checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
            assert set(checks) == set(CHECKS)
            (mat,) = [m.materialization for m in result.get_asset_materialization_events()]
            return checks, mat.metadata

        for drive in (adtf_drive, nclt_drive):
            checks, meta = run(drive)
            assert all(e.passed for e in checks.values()), {
                n: e.description for n, e in checks.items() if not e.passed
            }
            path = meta["path"].value
            assert path.endswith(f"exports/drive={drive}/waypoints.csv")
            table = read_csv(path)
            assert len(table["x"]) == meta["dagster/row_count"].value > 5
            assert meta["plot"].value.endswith(f"exports/drive={drive}/waypoints.svg")
            report = meta["report"].value
            assert report.endswith(f"reports/drive={drive}/waypoints.html")
            page = open(report, encoding="utf-8").read()
            assert '<svg xmlns="http://www.w3.org/2000/svg" id="waypoints"' in page
            assert "point_count" in page
        # a drive that never moves: no CSV (the stale one is gone), warnings that say why
        checks, meta = run("parked-car")
        assert meta["dagster/row_count"].value == 0 and "never moves" in meta["no_route"].value
        assert all(
            not e.passed and e.severity == dg.AssetCheckSeverity.WARN for e in checks.values()
        )
        assert not store.fs.exists(f"{store.base}/exports/drive=parked-car/waypoints.csv")
        assert "never moves" in open(meta["report"].value, encoding="utf-8").read()


@pytest.mark.parametrize("encoding", ["ros2", "ros1"])
def test_waypoints_from_the_drives_own_mcap_export(lake, tmp_path, encoding):
    """Our MCAP export of /tf read back by the bag path: the same route as from the lake."""
    store, drive, _ = lake
    out = tmp_path / "tf.mcap"
    export_drive(store, drive, out, ExportRequest(format="mcap", encoding=encoding, topics=["/tf"]))
    from_mcap = build_waypoints(poses_from_bag(out, "/tf"))
    from_lake = build_waypoints(poses_from_lake(store, drive))
    assert abs(len(from_mcap) - len(from_lake)) <= 1
    assert _cross_track(from_lake.x, from_lake.y, from_mcap.x, from_mcap.y).max() < 0.03


def test_cli_from_the_lake(lake, tmp_path, capsys):
    store, drive, _ = lake
    out = tmp_path / "route.csv"
    assert main(["waypoints", "--lake", store.root, "--drive", drive, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"from drive {drive} calibrated/poses" in printed and "FAIL" not in printed
    assert out.read_text().startswith("x,y,z,yaw,velocity,change_flag\n")
    assert out.with_suffix(".svg").exists()
    assert main(["waypoints", "--lake", store.root, "--drive", "nope", "--out", str(out)]) == 2
    assert "no partition drive=nope" in capsys.readouterr().err

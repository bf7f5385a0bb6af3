"""Rig files: the shipped rigs, every rotation convention, frame chains and bad input."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from bridge_lake.calibrate.rig import (
    SHIPPED_RIGS,
    RigError,
    RigNotFoundError,
    find_rig,
    load_rig,
    rig_dirs,
)
from bridge_lake.formats.nclt import constants as C
from bridge_lake_tests.testdata import NCLT_CALIBRATION

REPO = Path(__file__).resolve().parents[2]
CALIBRATION = NCLT_CALIBRATION
NCLT = SHIPPED_RIGS / "nclt-segway.yaml"


def rot_zyx(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """The devkit's ssc_to_homo rotation, written out independently of the package."""
    cr, sr, cp, sp, cy, sy = (
        math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw),
        math.sin(yaw),
    )  # fmt: skip
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def homo(x: list[float]) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = rot_zyx(*np.radians(x[3:]))
    m[:3, 3] = x[:3]
    return m


def write_rig(folder: Path, doc: dict, name: str = "rig.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_nclt_rig_has_every_number_of_calibration_yaml():
    cal = yaml.safe_load(CALIBRATION.read_text())
    rig = load_rig(NCLT)
    names = {
        "x_body_vel": "velodyne", "x_body_lb3": "lb3", "x_body_imu": "ms25",
        "x_body_gps": "gps", "x_body_rtk": "gps_rtk", "x_body_fog": "kvh",
        "x_body_hokuyo_30m": "hokuyo_30m", "x_body_hokuyo_4m": "hokuyo_4m",
        **{f"x_lb3_c{k}": f"lb3_cam{k}_optical" for k in range(6)},
    }  # fmt: skip
    for key, frame in names.items():
        parent = "lb3" if key.startswith("x_lb3") else "body"
        want = homo(cal["extrinsics"][key])
        got = np.linalg.inv(rig.to_base(parent).matrix4) @ rig.to_base(frame).matrix4
        np.testing.assert_allclose(got, want, atol=1e-12, err_msg=key)
    for k in range(6):
        i = cal["cameras"]["intrinsics"][f"cam{k}"]
        cam = rig.frames[f"lb3_cam{k}"].camera
        assert cam.k == (i["fx"], 0, i["cx"], 0, i["fy"], i["cy"], 0, 0, 1)
        assert (cam.width, cam.height) == (1616, 1232)
    gt = rig.ground_truth
    origin = cal["ground_truth_origin"]
    assert (gt.lat_deg, gt.lon_deg, gt.alt_m) == (origin["lat_deg"], origin["lon_deg"], 270.0)
    assert gt.linearization == (
        origin["earth_equatorial_radius_m"],
        origin["earth_polar_radius_m"],
    )
    # the reader's copy of the Velodyne mount (scan seam) is the rig's
    np.testing.assert_allclose(
        rig.frames["velodyne"].transform.matrix4, homo(list(C.VELODYNE_IN_BODY)), atol=1e-15
    )


def test_nclt_body_to_base_link_known_vectors():
    rig = load_rig(NCLT)
    body = rig.to_base("body")
    # body x forward, y right, z down → base_link x forward, y left, z up
    np.testing.assert_allclose(body.apply([1, 0, 0]), [1, 0, 0], atol=1e-15)
    np.testing.assert_allclose(body.apply([0, 1, 0]), [0, -1, 0], atol=1e-15)
    np.testing.assert_allclose(body.apply([0, 0, 1]), [0, 0, -1], atol=1e-15)
    # the Velodyne sits 0.957 m above the axle, 4 mm to the left
    np.testing.assert_allclose(rig.to_base("velodyne").translation, [0.002, 0.004, 0.957])
    # its yaw of -90.703° about FRD's z (down) turns its x to the body's -y, i.e. left:
    # +y in base_link (to 0.7°)
    x_axis = rig.to_base("velodyne").matrix[:, 0]
    assert x_axis[1] > 0.999 and abs(x_axis[2]) < 0.02
    # Cam5 looks forward: its optical z is base_link x
    z5 = rig.to_base("lb3_cam5_optical").matrix[:, 2]
    assert z5[0] > 0.999


@pytest.mark.parametrize(
    "rotation",
    [
        {"rpy_deg": [0.0, 0.0, 90.0]},
        {"rpy_rad": [0.0, 0.0, math.pi / 2]},
        {"quaternion_xyzw": [0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)]},
        {"matrix": [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]},
    ],
)
def test_every_rotation_convention_gives_the_analytic_answer(tmp_path, rotation):
    """A lidar 2 m forward, 1.5 m up, turned 90° left; a camera whose optical frame is given:
    a point 10 m ahead of the lidar's own x axis is 10 m to the left of base_link."""
    doc = {
        "vehicle": "car",
        "valid_from": "2020-01-01",
        "frames": {
            "lidar": {"kind": "lidar", "translation": [2.0, 0.0, 1.5], **rotation},
            "cam": {
                "kind": "camera",
                "optical": True,
                "translation": [1.0, 0.0, 1.0],
                "matrix": [[0, 0, 1], [-1, 0, 0], [0, -1, 0]],
            },
        },
    }
    rig = load_rig(write_rig(tmp_path, doc))
    np.testing.assert_allclose(rig.to_base("lidar").apply([10, 0, 0]), [2, 10, 1.5], atol=1e-12)
    np.testing.assert_allclose(rig.to_base("lidar").apply([0, 1, 0]), [1, 0, 1.5], atol=1e-12)
    # optical given as z forward: the body frame is then aligned with base_link
    np.testing.assert_allclose(rig.to_base("cam").matrix, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(rig.to_base("cam_optical").apply([0, 0, 5]), [6, 0, 1], atol=1e-12)
    np.testing.assert_allclose(rig.to_base("cam_optical").apply([1, 0, 0]), [1, -1, 1], atol=1e-12)


def good_doc() -> dict:
    return {
        "vehicle": "car",
        "valid_from": "2023-06-01",
        "frames": {"imu": {"kind": "imu", "translation": [0, 0, 0], "rpy_deg": [0, 0, 0]}},
    }


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        (lambda d: d.pop("vehicle"), "vehicle", "non-empty string"),
        (lambda d: d.update(valid_from="soon"), "valid_from", "date"),
        (lambda d: d.update(extra=1), "extra", "unknown key"),
        (lambda d: d["frames"]["imu"].update(rpy_deg=[0, 0]), "frames.imu.rpy_deg", "3 numbers"),
        (
            lambda d: d["frames"]["imu"].update(quaternion_xyzw=[0, 0, 0, 2]),
            "frames.imu",
            "exactly one rotation",
        ),
        (
            lambda d: (
                d["frames"]["imu"].pop("rpy_deg"),
                d["frames"]["imu"].update(quaternion_xyzw=[0, 0, 0, 2]),
            ),
            "frames.imu.quaternion_xyzw",
            "unit quaternion",
        ),
        (
            lambda d: (
                d["frames"]["imu"].pop("rpy_deg"),
                d["frames"]["imu"].update(matrix=[[1, 0, 0], [0, 1, 0.2], [0, 0, 1]]),
            ),
            "frames.imu.matrix",
            "not a rotation matrix",
        ),
        (
            lambda d: (
                d["frames"]["imu"].pop("rpy_deg"),
                d["frames"]["imu"].update(matrix=[[1, 0, 0], [0, 1, 0], [0, 0, -1]]),
            ),
            "frames.imu.matrix",
            "det",
        ),
        (lambda d: d["frames"]["imu"].update(parent="roof"), "frames.imu.parent", "unknown frame"),
        (lambda d: d["frames"]["imu"].update(kind="radar"), "frames.imu.kind", "not in"),
        (lambda d: d["frames"]["imu"].update(translation=[0, "x", 0]), "translation[1]", "number"),
        (
            lambda d: d["frames"].update(
                a={"parent": "b", "translation": [0, 0, 0], "rpy_deg": [0, 0, 0]},
                b={"parent": "a", "translation": [0, 0, 0], "rpy_deg": [0, 0, 0]},
            ),
            "frames.a.parent",
            "cycle",
        ),
        (
            lambda d: d["frames"].update(
                cam={
                    "kind": "camera",
                    "translation": [0, 0, 0],
                    "rpy_deg": [0, 0, 0],
                    "camera": {
                        "width": 10,
                        "height": 10,
                        "K": [1, 0, 0, 0, 1, 0, 0, 0, 1],
                        "distortion_model": "plumb_bob",
                        "D": [0, 0],
                    },
                }
            ),
            "frames.cam.camera.D",
            "needs 5",
        ),
    ],
)
def test_bad_rig_files_name_the_file_and_key(tmp_path, change, key, words):
    doc = good_doc()
    change(doc)
    path = write_rig(tmp_path, doc)
    with pytest.raises(RigError) as err:
        load_rig(path)
    assert str(path) in str(err.value) and key in str(err.value) and words in str(err.value)


def test_malformed_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("vehicle: [unclosed\n")
    with pytest.raises(RigError, match=r"bad\.yaml: not valid YAML"):
        load_rig(bad)
    with pytest.raises(RigError, match="cannot read"):
        load_rig(tmp_path / "absent.yaml")
    with pytest.raises(RigError, match="expected a mapping"):
        load_rig(write_rig(tmp_path, ["a"], "list.yaml"))


def test_the_calibration_valid_at_the_drive_date_is_chosen(tmp_path):
    old, new = good_doc(), good_doc()
    old["valid_from"], new["valid_from"] = "2023-01-01", "2023-06-01"
    new["frames"]["imu"]["translation"] = [0, 0, 1.0]
    write_rig(tmp_path, old, "car-2023a.yaml")
    write_rig(tmp_path, new, "car-2023b.yaml")
    dirs = [tmp_path]
    assert find_rig("car", dt.date(2023, 3, 1), dirs).valid_from == dt.date(2023, 1, 1)
    assert find_rig("car", dt.date(2023, 6, 1), dirs).to_base("imu").translation[2] == 1.0
    with pytest.raises(RigNotFoundError, match=r"'car' valid on 2022-12-31.*2023-01-01"):
        find_rig("car", dt.date(2022, 12, 31), dirs)
    with pytest.raises(RigNotFoundError, match=r"no rig calibration for vehicle 'truck'.*car"):
        find_rig("truck", dt.date(2023, 3, 1), dirs)


def test_user_rig_folders_come_first_and_override_shipped(tmp_path, monkeypatch):
    mine = load_rig(NCLT)
    doc = yaml.safe_load(NCLT.read_text())
    doc["frames"]["velodyne"]["translation"] = [0.0, 0.0, -2.0]
    write_rig(tmp_path, doc, "my-nclt.yaml")
    monkeypatch.setenv("BRIDGE_LAKE_RIGS", str(tmp_path))
    assert rig_dirs()[0] == tmp_path and rig_dirs()[-1] == SHIPPED_RIGS
    rig = find_rig("nclt-segway", dt.date(2012, 5, 1))
    assert rig.path.endswith("my-nclt.yaml") and rig.path != mine.path
    assert rig.frames["velodyne"].transform.translation[2] == -2.0

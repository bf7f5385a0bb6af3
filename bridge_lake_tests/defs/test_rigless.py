"""A drive without a rig (issue 22, finding 5; issue 21): calibrated does not block, the
exports run in sensor frames without /tf_static and /tf and warn, and `bridge-lake rig init`
writes the template that, once filled in, gives the drive its transforms."""

from __future__ import annotations

import re
import shutil

import dagster as dg
import pytest
from mcap.reader import make_reader
from rosbags.highlevel import AnyReader

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.calibrate.quality import NO_RIG, findings
from bridge_lake.calibrate.rig import SHIPPED_RIGS, RigError, find_rig, load_rig
from bridge_lake.cli import main
from bridge_lake.defs.calibrated import calibrated
from bridge_lake.defs.exports import exports
from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.lake import Lake
from bridge_lake.synth import synthesize
from bridge_lake_tests.testdata import ADTF_TESTDATA

VEHICLE = "car-without-rig"
SHIPPED_RIG = SHIPPED_RIGS / "test-vehicle-01.yaml"
"""The synthetic ADTF vehicle's rig: a real calibration to move to a later date."""


def _materialize(landing, lake_root, drive_id, formats=("mcap",)):
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", [drive_id])
        return dg.materialize(
            [raw_manifest, normalized, calibrated, exports],
            partition_key=drive_id,
            instance=instance,
            resources={
                "lake": LakeResource(root=str(lake_root)),
                "landing": LandingZoneResource(root=str(landing)),
            },
            run_config={"ops": {"exports": {"config": {"formats": list(formats)}}}},
            raise_on_error=False,
        )


def _checks(result) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }


def _errors(result) -> list[tuple[str, str]]:
    return sorted(
        k for k, e in _checks(result).items() if not e.passed and e.severity.value == "ERROR"
    )


@pytest.fixture(scope="module")
def rigless(tmp_path_factory):
    """The synthetic ADTF drive (lidar, camera, GNSS, IMU) of a vehicle no rig knows."""
    root = tmp_path_factory.mktemp("rigless")
    (drive,) = synthesize(
        root / "landing", drives=1, minutes=0.1, seed=7, source="adtf", light=True
    )
    yaml_path = drive.path / "drive.yaml"
    yaml_path.write_text(re.sub(r"vehicle: .*", f"vehicle: {VEHICLE}", yaml_path.read_text()))
    result = _materialize(root / "landing", root / "lake", drive.drive_id, ("mcap", "bag1"))
    return root, drive.drive_id, result


def test_a_drive_with_sensors_but_no_rig_is_calibrated_and_exported_in_sensor_frames(rigless):
    root, drive, result = rigless
    assert result.success
    assert _errors(result) == []
    checks = _checks(result)
    rig = checks[("calibrated_tf_static", "rig_found")]
    assert not rig.passed and rig.severity == dg.AssetCheckSeverity.WARN
    assert rig.description.startswith(NO_RIG) and VEHICLE in rig.description
    assert f"bridge-lake rig init --drive {drive}" in rig.description
    transforms = checks[("exports", "transforms")]
    assert not transforms.passed and transforms.severity == dg.AssetCheckSeverity.WARN
    assert transforms.description.startswith(NO_RIG)
    assert checks[("exports", "health")].passed
    exports_dir = root / "lake" / "exports" / f"drive={drive}"
    with open(exports_dir / f"{drive}.mcap", "rb") as f:  # the mcap library, not ours
        summary = make_reader(f).get_summary()
    topics = {c.topic for c in summary.channels.values()}
    assert "/tf" not in topics and "/tf_static" not in topics
    assert {"/sensor/lidar/points", "/sensor/imu/data", "/sensor/gps/fix"} <= topics
    assert not summary.attachment_indexes  # no rig, nothing to attach
    frames = {}
    with AnyReader([exports_dir / f"{drive}.bag"]) as reader:  # rosbags, ROS 1
        assert "/tf" not in reader.topics and "/tf_static" not in reader.topics
        for conn, _, raw in reader.messages():
            if conn.topic not in frames:
                frames[conn.topic] = reader.deserialize(raw, conn.msgtype).header.frame_id
    assert frames["/sensor/lidar/points"] == "lidar_top"  # its sensor frame, not base_link
    assert frames["/sensor/imu/data"] == "imu"


def test_a_rig_valid_only_from_a_later_date_is_no_rig_either(rigless, tmp_path):
    root, drive, _ = rigless
    later = tmp_path / "rigs"
    later.mkdir()
    text = re.sub(r"vehicle: .*", f"vehicle: {VEHICLE}", SHIPPED_RIG.read_text())
    (later / "later.yaml").write_text(re.sub(r"valid_from: .*", "valid_from: 2100-01-01", text))
    result, published = calibrate_drive(Lake(str(root / "lake")), drive, rig_folders=[later])
    assert published and result.rigless
    assert "valid_from 2100-01-01" in result.rig_problem
    found = {(f.table, f.check): f for f in findings(result)}
    assert not [k for k, f in found.items() if f.error and not f.passed]
    assert found[("tf_static", "rig_found")].summary.startswith(NO_RIG)


def test_a_drive_without_spatial_sensors_passes_calibrated_with_a_note(tmp_path):
    """Real recordings whose streams land in adtf_payloads only: no sensor frame, no rig
    needed; every calibrated check passes with that reason, and the export runs."""
    d = tmp_path / "landing" / "plain"
    d.mkdir(parents=True)
    (d / "drive.yaml").write_text(f"vehicle: {VEHICLE}\nsource: adtf\n")
    shutil.copy(ADTF_TESTDATA / "test_type_seek.dat", d)
    result = _materialize(tmp_path / "landing", tmp_path / "lake", "plain")
    assert result.success
    cal = {k: e for k, e in _checks(result).items() if k[0].startswith("calibrated_")}
    assert len(cal) == 11 and all(e.passed for e in cal.values())
    assert (
        "no spatial sensor rows: no rig needed"
        in cal[("calibrated_tf_static", "rig_found")].description
    )
    assert _checks(result)[("exports", "health")].passed


def test_rig_init_writes_a_template_that_loads_once_filled_in(rigless, tmp_path, capsys):
    root, drive, _ = rigless
    out = tmp_path / "rigs" / f"{VEHICLE}.yaml"
    out.parent.mkdir()
    code = main(["rig", "init", "--drive", drive, "--lake", str(root / "lake"), "--out", str(out)])
    assert code == 0
    assert "4 sensor frame(s)" in capsys.readouterr().out
    text = out.read_text()
    for frame, kind in (("lidar_top", "lidar"), ("front_camera", "camera"), ("imu", "imu")):
        assert re.search(rf"^  {frame}: +# rows in .*\n    kind: {kind}$", text, re.M), frame
    assert "REP-103" in text and "R = Rz(yaw) Ry(pitch)" in text  # the conventions
    # unfilled, the loader refuses it, naming the frame and key: never a silent identity
    with pytest.raises(RigError, match=r"frames\.\w+\.translation"):
        load_rig(out)
    assert (
        main(["rig", "init", "--drive", drive, "--lake", str(root / "lake"), "--out", str(out)])
        == 2
    )
    assert "exists" in capsys.readouterr().err
    # filled with identity transforms, it loads and the drive calibrates with every extrinsic
    out.write_text(
        text.replace("translation: null", "translation: [0, 0, 0]").replace(
            "rpy_deg: null", "rpy_deg: [0, 0, 0]"
        )
    )
    rig = load_rig(out)
    assert rig.vehicle == VEHICLE
    assert {"lidar_top", "front_camera", "front_camera_optical", "imu", "gnss"} <= set(rig.frames)
    store = Lake(str(root / "lake"))
    result, published = calibrate_drive(store, drive, rig_folders=[out.parent])
    assert published and result.rig is not None and not result.missing_extrinsics
    assert find_rig(VEHICLE, result.drive_date, [out.parent]).path == str(out)
    assert store.read_partition("calibrated", "tf_static", drive).num_rows > 0


def test_rig_init_from_a_recording_lists_its_mapped_frames(rigless, capsys):
    root, drive, _ = rigless
    (rec,) = (root / "landing" / drive).glob("*.dat")
    assert main(["rig", "init", str(rec), "--vehicle", "car9"]) == 0
    text = capsys.readouterr().out
    assert "vehicle: car9" in text
    frames = re.findall(r"^  (\S+): +# rows in", text, re.M)
    assert frames == ["front_camera", "gnss", "imu", "lidar_top"]
    assert main(["rig", "init", str(rec)]) == 2  # without --vehicle: one line, exit 2
    assert "--vehicle" in capsys.readouterr().err

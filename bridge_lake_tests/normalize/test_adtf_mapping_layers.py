"""ADTF mappings are the user's: drive / user / default layers matched in that order, the
drive's file kept inside its folder, the environment's user file, and mapped values that do
not fit an integer column quarantined per row instead of failing the drive."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from bridge_lake.errors import BridgeLakeError, DriveMetadataError
from bridge_lake.lake import Lake
from bridge_lake.normalize.adtf import normalize_adtf
from bridge_lake.normalize.adtf_mapping import (
    AdtfMappingError,
    DriveMappingError,
    Mapping,
    load_mapping,
    parse_mapping,
    resolve_mapping,
)
from bridge_lake.normalize.sink import DriveSink
from bridge_lake_tests.normalize.adtf_structs import Struct, records, write_recording

IMU_LIKE = Struct(
    "vendor_motion_t",
    [
        ("stamp", "tUInt64"),
        ("ax", "tFloat32"),
        ("ay", "tFloat32"),
        ("az", "tFloat32"),
    ],
)
IMU_RULE = """
  - name: motion
    match: {{struct: vendor_motion_t}}
    table: imu
    fields: {{linear_acceleration_x: {field}}}
"""
GNSS_LIKE = Struct(
    "pos_t",
    [
        ("la", "tFloat64"),
        ("lo", "tFloat64"),
        ("sats", "tUInt32"),
        ("mode", "tFloat64"),
        ("quality", "tInt64"),
    ],
)


def _rules(*bodies: str) -> str:
    return "rules:" + "".join(bodies)


def _normalize(tmp_path, drive, mapping=None, **kw):
    lake = Lake(str(tmp_path / "lake"))
    with DriveSink(lake, "d1") as sink:
        normalize_adtf(drive, sink, mapping, **kw)
        result = sink.finish()
    return lake, result


def _rows(lake: Lake, table: str) -> pa.Table:
    return lake.read_partition("normalized", table, "d1")


def _imu_drive(tmp_path, name="d1"):
    drive = tmp_path / "landing" / name
    write_recording(
        drive / "rec.dat", {"motion": (IMU_LIKE, records(IMU_LIKE, 5, ax=np.arange(5), ay=7))}
    )
    return drive


# --- layer order ------------------------------------------------------------------------------


def test_layers_match_drive_then_user_then_default(tmp_path):
    drive = parse_mapping(_rules(IMU_RULE.format(field="ax")), path="drive.yaml", layer="drive")
    user = parse_mapping(_rules(IMU_RULE.format(field="ay")), path="user.yaml", layer="user")
    stack = Mapping.layered(drive, user, load_mapping())
    found = stack.lookup("motion", "adtf/default", "vendor_motion_t", {})
    assert (found.rule.fields[0].element, found.layer, found.path) == ("ax", "drive", "drive.yaml")
    assert stack.rule_for("motion", "adtf/default", "vendor_motion_t", {}) is found.rule
    assert found.describe() == "rule motion (drive: drive.yaml)"
    # without the drive layer the user's rule wins; the default still maps what it knows
    stack = Mapping.layered(None, user, load_mapping())
    assert stack.lookup("motion", None, "vendor_motion_t", {}).layer == "user"
    can = stack.lookup("can0", "adtf/default", "tCANData", {})
    assert (can.rule.name, can.layer) == ("can_tcandata", "default")
    assert stack.origin_of(can.rule).path.endswith("adtf_mapping.yaml")
    assert [o.layer for o in stack.layers] == ["user", "default"]
    assert stack.lookup("x", None, "nothing_t", {}) is None


def test_user_rules_override_default_for_the_same_struct():
    user = parse_mapping(
        "rules:\n  - name: imu_timudata\n    match: {struct: tImuData}\n    table: imu\n"
        "    fields: {linear_acceleration_x: f32AccY}\n",
        path="mine.yaml",
    )
    stack = Mapping.layered(user, load_mapping())
    found = stack.lookup("imu", "adtf/default", "tImuData", {})
    assert (found.layer, found.rule.fields[0].element) == ("user", "f32AccY")


def test_empty_rules_are_a_valid_layer_but_missing_rules_are_not(tmp_path):
    assert parse_mapping("version: 1\nrules: []\n").rules == ()
    with pytest.raises(AdtfMappingError, match="'rules' must be a list"):
        parse_mapping("version: 1\n", path="m.yaml")


# --- where the layers come from -----------------------------------------------------------


def _drive_yaml(drive, extra: str = "") -> None:
    (drive / "drive.yaml").write_text(f"vehicle: v\nsource: adtf\n{extra}")


def test_drive_yaml_mapping_and_env_user_mapping(tmp_path, monkeypatch):
    drive = _imu_drive(tmp_path)
    (drive / "maps").mkdir()
    (drive / "maps" / "m.yaml").write_text(_rules(IMU_RULE.format(field="ax")))
    _drive_yaml(drive, "mapping: maps/m.yaml\n")
    user = tmp_path / "user.yaml"
    user.write_text(_rules(IMU_RULE.format(field="ay")))
    monkeypatch.setenv("BRIDGE_LAKE_ADTF_MAPPING", str(user))
    stack = resolve_mapping(drive)
    assert [o.layer for o in stack.layers] == ["drive", "user", "default"]
    assert stack.layers[1].path == str(user)
    lake, _ = _normalize(tmp_path, drive)  # the layers as the Dagster asset uses them
    imu = _rows(lake, "imu")
    assert imu.column("linear_acceleration_x").to_pylist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    # the drive's file gone: the user's rule (from the environment) maps ay
    _drive_yaml(drive)
    lake, _ = _normalize(tmp_path / "again", drive)
    assert _rows(lake, "imu").column("linear_acceleration_x").to_pylist() == [7.0] * 5
    # an explicit user file beats the environment's
    other = tmp_path / "other.yaml"
    other.write_text(_rules(IMU_RULE.format(field="az")))
    lake, _ = _normalize(tmp_path / "third", drive, user_mapping=other)
    assert _rows(lake, "imu").column("linear_acceleration_x").to_pylist() == [0.0] * 5


def test_env_mapping_that_is_broken_names_the_file(tmp_path, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [\n")
    monkeypatch.setenv("BRIDGE_LAKE_ADTF_MAPPING", str(bad))
    with pytest.raises(AdtfMappingError) as err:
        resolve_mapping()
    assert str(err.value).startswith(str(bad))
    monkeypatch.setenv("BRIDGE_LAKE_ADTF_MAPPING", "")
    assert [o.layer for o in resolve_mapping().layers] == ["default"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/etc/passwd", "is an absolute path"),
        ("../outside.yaml", "leaves the drive folder"),
        ("maps/../../outside.yaml", "leaves the drive folder"),
        ("link.yaml", "outside the drive folder (symlink)"),
        ("linkdir/m.yaml", "outside the drive folder (symlink)"),
        ("absent.yaml", "no such file"),
        ("[1, 2]", "must be a file name"),
        ("''", "must be a file name"),
    ],
)
def test_drive_mapping_must_stay_inside_the_drive(tmp_path, value, message):
    drive = _imu_drive(tmp_path, "drive-7")
    outside = tmp_path / "outside.yaml"
    outside.write_text(_rules(IMU_RULE.format(field="ax")))
    (tmp_path / "odir").mkdir()
    (tmp_path / "odir" / "m.yaml").write_text(outside.read_text())
    os.symlink(outside, drive / "link.yaml")
    os.symlink(tmp_path / "odir", drive / "linkdir")
    _drive_yaml(drive, f"mapping: {value}\n")
    with pytest.raises(DriveMappingError) as err:
        resolve_mapping(drive)
    assert isinstance(err.value, DriveMetadataError | BridgeLakeError)
    text = str(err.value)
    assert text.startswith("drive drive-7: drive.yaml key 'mapping': ")
    assert message in text
    assert err.value.drive == "drive-7" and err.value.key == "mapping"


def test_symlink_inside_the_drive_is_fine(tmp_path):
    drive = _imu_drive(tmp_path)
    (drive / "real.yaml").write_text(_rules(IMU_RULE.format(field="ax")))
    os.symlink(drive / "real.yaml", drive / "alias.yaml")
    _drive_yaml(drive, "mapping: alias.yaml\n")
    assert resolve_mapping(drive, use_env=False).layers[0].layer == "drive"


# --- values that do not fit an integer column ---------------------------------------------


def test_unfit_integer_values_quarantine_their_rows(tmp_path):
    drive = tmp_path / "landing" / "d1"
    n = 8
    recs = records(GNSS_LIKE, n, la=48.1, lo=11.5, sats=9, mode=30.0, quality=1)
    recs["sats"][1] = 70_000  # overflows int16 as it is
    recs["mode"][2] = np.nan  # not a number
    recs["mode"][3] = 25.0  # 2.5 after scaling: a fraction
    recs["mode"][4] = 1e6  # 100000 after scaling: overflows int16
    recs["quality"][5] = 2**62  # an integer beyond 2^53 onto a float column: fine
    write_recording(drive / "rec.dat", {"pos": (GNSS_LIKE, recs)})
    mapping = parse_mapping(
        "rules:\n  - name: pos\n    match: {struct: pos_t}\n    table: gnss\n    fields:\n"
        "      lat_deg: la\n      lon_deg: lo\n      num_sats: sats\n"
        "      fix_mode: {element: mode, scale: 0.1}\n"  # 30 * 0.1 = 3.0000000000000004
        "      error_m: quality\n"
    )
    lake, result = _normalize(tmp_path, drive, mapping)
    (s,) = [s for s in result.streams if s.info.stream == "pos" and s.info.table == "gnss"]
    assert (s.records_read, s.rows_written, s.rows_quarantined) == (n, 4, 4)
    assert s.conserved
    gnss = _rows(lake, "gnss")
    assert gnss.column("num_sats").to_pylist() == [9] * 4
    assert gnss.column("fix_mode").to_pylist() == [3] * 4
    assert gnss.column("error_m").to_pylist() == [1.0, 2.0**62, 1.0, 1.0]
    q = _rows(lake, "quarantine")
    reasons = dict(
        zip(q.column("record_index").to_pylist(), q.column("reason").to_pylist(), strict=True)
    )
    assert reasons == {
        1: "column num_sats (int16): value 70000 overflows (element sats)",
        2: "column fix_mode (int16): value nan is not finite (element mode * 0.1)",
        3: "column fix_mode (int16): value 2.5 is not an integer (element mode * 0.1)",
        4: "column fix_mode (int16): value 100000.0 overflows (element mode * 0.1)",
    }


def test_unfit_lidar_point_quarantines_its_scan(tmp_path):
    import bridge_lake.synth.adtf as synth
    from bridge_lake.formats.adtf import DatWriter

    drive = tmp_path / "landing" / "d1"
    drive.mkdir(parents=True)
    head = np.zeros(1, dtype=synth.LIDAR_HEAD)
    with DatWriter(drive / "l.dat", version=0x0500) as w:
        sid = w.add_stream("lidar", stream_type=synth._ddl_type("tLidarScan", "tLidarPoint"))
        for k in range(3):
            head["count"], head["frame"] = 4, k
            pts = np.zeros(4, dtype=synth.LIDAR_POINT)
            pts["x"] = k
            pts["ring"] = 7
            if k == 1:
                pts["ring"][2] = 40_000  # uint16 40000 overflows int16 ring: the third point
            w.write_sample(sid, 1_000 + k * 100_000_000, head.tobytes() + pts.tobytes())
    lake, result = _normalize(tmp_path, drive, load_mapping())
    (s,) = [s for s in result.streams if s.info.table == "lidar_scans"]
    assert (s.records_read, s.rows_written, s.rows_quarantined) == (3, 2, 1)
    q = _rows(lake, "quarantine")
    assert q.column("reason").to_pylist() == [
        "point 2: column ring (int16): value 40000 overflows (element ui16Ring)"
    ]
    assert q.column("record_index").to_pylist() == [1]
    points = _rows(lake, "lidar_points")
    assert points.num_rows == 8 and set(points.column("ring").to_pylist()) == {7}
    assert sorted(set(points.column("x").to_pylist())) == [0.0, 2.0]
    assert all(s.conserved for s in result.streams)

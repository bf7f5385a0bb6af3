"""`bridge-lake mapping suggest|check` and the mapping column of `bridge-lake info`."""

import json
import re

import numpy as np
import pytest

import bridge_lake.synth.adtf as synth
from bridge_lake.cli import main
from bridge_lake.lake import Lake
from bridge_lake.normalize.adtf import normalize_adtf
from bridge_lake.normalize.adtf_mapping import Mapping, load_mapping, parse_mapping
from bridge_lake.normalize.adtf_mapping_tools import DEG, suggest_mapping
from bridge_lake.normalize.sink import DriveSink
from bridge_lake_tests.normalize.adtf_structs import Struct, records, write_recording
from bridge_lake_tests.testdata import ADTF_TESTDATA as ADTF

REAL = sorted([*ADTF.glob("*.dat"), *ADTF.glob("*.adtfdat")])

INERTIAL = Struct(
    "VendorInertial_v2",
    [
        ("ts_ns", "tUInt64"),
        ("lin_acc", "tFloat32", 3, "m/s2"),
        ("w_x", "tFloat32", 1, "deg/s"),
        ("w_y", "tFloat32", 1, "deg/s"),
        ("w_z", "tFloat32", 1, "deg/s"),
        ("temp_c", "tFloat32"),
    ],
)
NAV = Struct(
    "nav_solution",
    [
        ("latitude_deg", "tFloat64"),
        ("longitude_deg", "tFloat64"),
        ("height", "tFloat32", 1, "m"),
        ("num_sv", "tUInt8"),
        ("course", "tFloat32", 1, "rad"),
    ],
)
BUS = Struct(
    "BusMsg",
    [
        ("t_us", "tInt64"),
        ("bus", "tUInt8"),
        ("arb_id", "tUInt32"),
        ("len", "tUInt8"),
        ("payload", "tUInt8", 8),
    ],
)
BLINKER = Struct("Blinker", [("state", "tUInt8"), ("since", "tUInt32")])
N = 12


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """A writer-made recording whose IMU, GNSS and CAN structs no shipped rule knows."""
    drive = tmp_path_factory.mktemp("odd") / "drive"
    k = np.arange(N)
    streams = {
        "inertial": (
            INERTIAL,
            records(
                INERTIAL,
                N,
                ts_ns=5_000_000_000 + k * 10_000_000,
                lin_acc=np.stack([k, k + 0.5, 9.81 + 0 * k], axis=1),
                w_x=90.0,
                w_y=-k,
                w_z=0.25,
            ),
        ),
        "nav": (NAV, records(NAV, N, latitude_deg=48.1 + k * 1e-5, longitude_deg=11.5, num_sv=9)),
        "bus0": (
            BUS,
            records(BUS, N, bus=2, arb_id=0x123 + k, len=3, payload=np.arange(8, dtype=np.uint8)),
        ),
        "blinker": (BLINKER, records(BLINKER, N, state=k % 2)),
    }
    return write_recording(drive / "odd.dat", streams)


def _normalize(lake_dir, path, mapping):
    lake = Lake(str(lake_dir))
    with DriveSink(lake, "d1") as sink:
        normalize_adtf(path.parent, sink, mapping, files=[path])
        result = sink.finish()
    return lake, result


def test_suggest_for_unusual_names_lands_rows_in_the_sensor_tables(odd, tmp_path, capsys):
    out = tmp_path / "mapping.yaml"
    assert main(["mapping", "suggest", str(odd), "--out", str(out)]) == 0
    assert "3 rule(s) ready" in capsys.readouterr().out
    text = out.read_text()
    assert "#   lin_acc                      tFloat32[3]  unit: m/s2" in text
    assert "#   w_x                          tFloat32  unit: deg/s" in text
    assert "without a rule it lands in ddl_blinker" in text
    suggested = parse_mapping(text, path=str(out))
    assert {r.table for r in suggested.rules} == {"imu", "gnss", "can_frames"}
    # the suggested mapping alone, the shipped default removed
    lake, result = _normalize(tmp_path / "lake", odd, Mapping.layered(suggested))
    tables = {
        s.info.stream: (s.info.table, s.rows_written, s.rows_quarantined) for s in result.streams
    }
    assert tables == {
        "inertial": ("imu", N, 0),
        "nav": ("gnss", N, 0),
        "bus0": ("can_frames", N, 0),
        "blinker": ("ddl_blinker", N, 0),
    }
    imu = lake.read_partition("normalized", "imu", "d1")
    k = np.arange(N)
    assert imu.column("linear_acceleration_x").to_pylist() == k.tolist()
    assert imu.column("linear_acceleration_y").to_pylist() == (k + 0.5).tolist()
    assert np.allclose(imu.column("angular_velocity_x").to_numpy(), 90.0 * DEG)
    assert np.allclose(imu.column("angular_velocity_y").to_numpy(), -k * DEG)
    assert imu.column("sensor_time_ns").to_pylist() == (5_000_000_000 + k * 10_000_000).tolist()
    gnss = lake.read_partition("normalized", "gnss", "d1")
    assert np.allclose(gnss.column("lat_deg").to_numpy(), 48.1 + k * 1e-5)
    assert gnss.column("num_sats").to_pylist() == [9] * N
    assert gnss.column("alt_m").to_pylist() == [0.0] * N
    can = lake.read_partition("normalized", "can_frames", "d1")
    assert can.column("can_id").to_pylist() == (0x123 + k).tolist()
    assert can.column("channel").to_pylist() == [2] * N
    assert can.column("data").to_pylist() == [bytes([0, 1, 2])] * N
    assert all(s.conserved for s in result.streams)


def test_suggest_on_the_synthetic_drive_maps_it_without_the_default(tmp_path, capsys):
    drive = tmp_path / "drive"
    drive.mkdir()
    (path,) = synth.write_adtf_drive(drive, minutes=0.05, seed=2)
    mapping = tmp_path / "m.yaml"
    mapping.write_text(suggest_mapping(path))
    capsys.readouterr()
    argv = ["mapping", "check", str(path), "--mapping", str(mapping), "--no-default", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [x["layer"] for x in doc["layers"]] == ["user"]
    streams = {(r["stream"], r["table"]): r for r in doc["streams"]}
    for stream, table in [
        ("imu", "imu"),
        ("gnss", "gnss"),
        ("can_chassis", "can_frames"),
        ("can_powertrain", "can_frames"),
        ("lidar_top", "lidar_scans"),
        ("lidar_top", "lidar_points"),
        ("front_camera", "camera_frames"),
    ]:
        r = streams[(stream, table)]
        assert r["rows_written"] == r["records_read"] > 0, stream
        assert r["rows_quarantined"] == 0
    assert streams[("imu", "imu")]["layer"] == "user"
    assert doc["ok"] is True


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_suggest_on_real_files_gives_mappings_check_accepts(path, tmp_path, capsys):
    out = tmp_path / "m.yaml"
    assert main(["mapping", "suggest", str(path), "--out", str(out)]) == 0
    parse_mapping(out.read_text())
    capsys.readouterr()
    assert main(["mapping", "check", str(path), "--mapping", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["streams"]
    assert all(r["target"] != "quarantine" or r["rows_quarantined"] for r in doc["streams"])


def test_check_table_shows_rule_layer_rows_and_quarantine_reasons(odd, tmp_path, capsys):
    mapping = tmp_path / "m.yaml"
    mapping.write_text(
        "rules:\n  - name: sv_as_fix\n    match: {struct: nav_solution}\n    table: gnss\n"
        "    fields: {lat_deg: latitude_deg, lon_deg: longitude_deg,"
        " fix_mode: {element: num_sv, scale: 10000}}\n"
    )
    assert main(["mapping", "check", str(odd), "--mapping", str(mapping)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("nav "))
    assert "gnss" in line and "rule sv_as_fix (user)" in line
    assert re.search(
        rf" {N} +0 +{N}  column fix_mode \(int16\): value 90000.0 overflows "
        rf"\(element num_sv \* 10000\) \({N}\)$",
        line,
    )
    assert f"user {mapping}" in out and "default " in out
    blinker = next(x for x in out.splitlines() if x.strip().startswith("blinker "))
    assert "ddl_blinker" in blinker and "generic" in blinker


def test_check_fails_when_a_rule_cannot_decode_its_stream(odd, tmp_path, capsys):
    mapping = tmp_path / "m.yaml"
    mapping.write_text(
        "rules:\n  - name: broken\n    match: {stream: blinker}\n    table: heading\n"
        "    fields: {heading_rad: no_such_element}\n"
    )
    assert main(["mapping", "check", str(odd), "--mapping", str(mapping)]) == 1
    out = capsys.readouterr().out
    assert "problem: blinker: rule broken cannot apply: struct Blinker has no element" in out


def test_info_shows_where_each_stream_would_be_mapped(odd, tmp_path, capsys, monkeypatch):
    assert main(["info", str(odd)]) == 0
    out = capsys.readouterr().out
    assert "mapping:     default " in out
    assert "inertial  ddl_vendorinertial_v2  generic" in out
    mapping = tmp_path / "m.yaml"
    mapping.write_text(suggest_mapping(odd))
    monkeypatch.setenv("BRIDGE_LAKE_ADTF_MAPPING", str(mapping))
    assert main(["info", str(odd)]) == 0
    out = capsys.readouterr().out
    assert "inertial  imu" in out and "rule imu_vendorinertial_v2 (user)" in out
    assert "bus0      can_frames" in out
    other = tmp_path / "other.yaml"
    other.write_text(
        "rules:\n  - name: nav\n    match: {stream: nav}\n    table: heading\n"
        "    fields: {heading_rad: course}\n"
    )
    assert main(["info", "--json", str(odd), "--mapping", str(other)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [x["layer"] for x in d["mapping_layers"]] == ["user", "default"]
    by_name = {s["name"]: s["mapping"] for s in d["streams"]}
    assert by_name["nav"] == [
        {
            "stream": "nav",
            "type": "adtf/default:nav_solution",
            "ddl_struct": "nav_solution",
            "table": "heading",
            "target": "mapped",
            "rule": "nav",
            "layer": "user",
            "file": str(other),
            "note": None,
            "frame_id": "nav",  # the rule gives none: the stream name (what the rig needs)
        }
    ]
    assert by_name["inertial"][0]["target"] == "generic"


def test_info_and_check_read_the_drive_mapping_beside_the_recording(odd, tmp_path, capsys):
    drive = tmp_path / "d9"
    drive.mkdir()
    (drive / "odd.dat").write_bytes(odd.read_bytes())
    (drive / "m.yaml").write_text(
        "rules:\n  - name: blink\n    match: {struct: Blinker}\n    table: heading\n"
        "    fields: {heading_rad: state}\n"
    )
    (drive / "drive.yaml").write_text("vehicle: v\nsource: adtf\nmapping: m.yaml\n")
    assert main(["info", str(drive / "odd.dat")]) == 0
    out = capsys.readouterr().out
    assert "rule blink (drive)" in out
    (drive / "drive.yaml").write_text("vehicle: v\nsource: adtf\nmapping: ../m.yaml\n")
    assert main(["mapping", "check", str(drive / "odd.dat")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "drive d9: drive.yaml key 'mapping': '../m.yaml' leaves the drive folder" in err


def test_mapping_commands_fail_in_one_line(odd, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {name: x, match: {struct: a}, table: nope, fields: {a: b}}\n")
    not_adtf = tmp_path / "x.dat"
    not_adtf.write_bytes(b"hello world, not a recording")
    out = tmp_path / "exists.yaml"
    out.write_text("keep me")
    for argv, message in [
        (["mapping", "check", str(odd), "--mapping", str(bad)], f"{bad}: rule 'x': table 'nope'"),
        (["mapping", "check", str(odd), "--mapping", str(tmp_path / "no.yaml")], "cannot read"),
        (["mapping", "suggest", str(not_adtf)], "not an ADTF recording"),
        (["mapping", "suggest", str(tmp_path / "missing.dat")], "missing.dat"),
        (["mapping", "suggest", str(odd), "--out", str(out)], "exists (give --force"),
        (["info", str(odd), "--mapping", str(bad)], "table 'nope'"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("bridge-lake: error: ") and err.count("\n") == 1, err
        assert message in err, err
    assert out.read_text() == "keep me"
    assert main(["mapping", "suggest", str(odd), "--out", str(out), "--force"]) == 0
    assert out.read_text().startswith("# ADTF stream mapping suggested")


def test_suggest_to_stdout_parses_and_names_the_default_overlap(tmp_path, capsys):
    drive = tmp_path / "drive"
    drive.mkdir()
    (path,) = synth.write_adtf_drive(drive, minutes=0.02, seed=4)
    assert main(["mapping", "suggest", str(path)]) == 0
    text = capsys.readouterr().out
    assert "the shipped default maps it too (rule imu_timudata → imu)" in text
    names = {r.name for r in parse_mapping(text).rules}
    assert names >= {"imu_timudata", "gnss_tgnssfix", "can_frames_tcandata"}
    assert "video_front_camera" in names
    # rule names may repeat the default's: names are unique per file, layers are separate
    assert "imu_timudata" in {r.name for r in load_mapping().rules}

import hashlib
import os

import dagster as dg
import polars as pl
import pytest

from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake_tests.conftest import ADTF_TESTDATA, make_adtf_drive


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def _run(instance, landing, lake_root, drive_id):
    instance.add_dynamic_partitions("drives", [drive_id])
    return dg.materialize(
        [raw_manifest],
        partition_key=drive_id,
        instance=instance,
        resources={
            "lake": LakeResource(root=str(lake_root)),
            "landing": LandingZoneResource(root=str(landing)),
        },
        raise_on_error=False,
    )


def _checks(result):
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def test_manifest_registers_every_file_with_checksum_and_format(instance, landing, tmp_path):
    make_adtf_drive(landing, "d1")
    (landing / "d1" / "notes.txt").write_text("hello")
    result = _run(instance, landing, tmp_path / "lake", "d1")
    assert result.success
    assert _checks(result) == {
        "drive_yaml_valid": True,
        "has_recording": True,
        "no_unreadable_file": True,
        "formats_valid": True,
    }
    df = pl.read_parquet(tmp_path / "lake/raw/manifest/drive=d1/part-00000.parquet")
    assert df["path"].to_list() == [
        "drive.yaml",
        "notes.txt",
        "rec/front.dat",
        "rec/front.dat.description",
        "test_type_seek.dat",
    ]
    rows = {r["path"]: r for r in df.iter_rows(named=True)}
    front = rows["rec/front.dat"]
    data = (ADTF_TESTDATA / "test_file_rec_newfile.dat").read_bytes()
    assert front["sha256"] == hashlib.sha256(data).hexdigest()
    assert front["size_bytes"] == len(data)
    assert (front["format"], front["format_version"]) == ("adtf", 0x0201)
    assert (rows["test_type_seek.dat"]["format"], rows["test_type_seek.dat"]["format_version"]) == (
        "adtf",
        0x0400,
    )
    assert rows["rec/front.dat.description"]["format"] == "adtf_description"
    assert rows["notes.txt"]["format"] == "unknown"
    drives = pl.read_parquet(tmp_path / "lake/raw/drives/drive=d1/part-00000.parquet")
    assert drives.row(0, named=True) == {
        "vehicle": "test-car",
        "source": "adtf",
        "operator": "alice",
        "route": "ring road",
        "weather": "sunny",
        "notes": "fixture drive",
        "recorded_at": None,
        "tags": [],
        "extra_json": "{}",
        "metadata_problem": None,
        "file_count": 5,
        "total_bytes": int(df["size_bytes"].sum()),
        "recording_count": 2,
    }
    mat = result.asset_materializations_for_node("raw_manifest")[0]
    assert mat.partition == "d1"
    assert mat.metadata["dagster/row_count"].value == 5
    evaluation = result.get_asset_check_evaluations()[0]
    assert evaluation.partition == "d1"


def test_rematerializing_gives_identical_bytes(instance, landing, tmp_path):
    make_adtf_drive(landing, "d1")
    part = tmp_path / "lake/raw/manifest/drive=d1/part-00000.parquet"
    assert _run(instance, landing, tmp_path / "lake", "d1").success
    first = part.read_bytes()
    assert _run(instance, landing, tmp_path / "lake", "d1").success
    assert part.read_bytes() == first


def test_missing_drive_yaml_fails_blocking_check(instance, landing, tmp_path):
    make_adtf_drive(landing, "d2", drive_yaml=None)
    result = _run(instance, landing, tmp_path / "lake", "d2")
    assert not result.success
    assert _checks(result)["drive_yaml_valid"] is False
    problem = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "drive_yaml_valid"
    ]
    assert "missing" in problem[0].metadata["problem"].value


def test_invalid_drive_yaml_and_no_recording(instance, landing, tmp_path):
    d = landing / "d3"
    d.mkdir()
    (d / "drive.yaml").write_text("vehicle: car\nsource: lidar-only\n")
    (d / "readme.txt").write_text("no data")
    result = _run(instance, landing, tmp_path / "lake", "d3")
    checks = _checks(result)
    assert checks["drive_yaml_valid"] is False
    assert checks["has_recording"] is False


def test_unreadable_file_fails_check(instance, landing, tmp_path):
    make_adtf_drive(landing, "d4")
    outside = tmp_path / "secret.dat"
    outside.write_bytes(b"IFHD" + bytes(100))
    os.symlink(outside, landing / "d4" / "escape.dat")
    result = _run(instance, landing, tmp_path / "lake", "d4")
    assert _checks(result)["no_unreadable_file"] is False
    df = pl.read_parquet(tmp_path / "lake/raw/manifest/drive=d4/part-00000.parquet")
    row = df.filter(pl.col("path") == "escape.dat").row(0, named=True)
    assert row["readable"] is False and row["sha256"] is None
    assert "outside drive folder" in row["problem"]


def test_unknown_ifhd_version_is_a_warning(instance, landing, tmp_path):
    make_adtf_drive(landing, "d5")
    head = bytearray((ADTF_TESTDATA / "test_type_seek.dat").read_bytes())
    head[4:8] = (0x0999).to_bytes(4, "little")
    (landing / "d5" / "odd.dat").write_bytes(bytes(head))
    result = _run(instance, landing, tmp_path / "lake", "d5")
    assert result.success  # WARN severity does not block
    evaluation = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "formats_valid"
    ]
    assert evaluation[0].passed is False
    assert evaluation[0].severity == dg.AssetCheckSeverity.WARN

"""Issue 33, fault 4: an ADTF 3 recording cut at 50 % beside a finished recording of the same
car. The raw manifest says it is cut (readable = false, the reason); its streams take their
names and types from the other drive's finished recording, found by the vehicle (or named by
drive.yaml `catalog_from`); without any such recording the drive fails a blocking check that
names that fix. Counts are checked against the vendor's reader (adtf_file) on the intact file
and the rows against a normalization of the intact recording.

On the code before this change the manifest said readable = true with no problem, and the
streams landed as `stream1..6` raw payloads only (the drive was "warn")."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from bridge_lake.synth import synthesize
from bridge_lake_tests.defs import materialize_normalized
from bridge_lake_tests.formats.test_adtf_recover import chunk_ends, vendor

TABLES = ("imu", "gnss", "can_frames", "camera_frames", "lidar_scans")


def _read(lake: Path, layer: str, table: str, drive: str) -> pl.DataFrame:
    return pl.read_parquet(lake / layer / table / f"drive={drive}" / "*.parquet")


def _checks(result) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }


@pytest.fixture(scope="module")
def car(tmp_path_factory):
    """Two synthetic ADTF 3 drives of vehicle test-vehicle-01 (same stream ids); the second
    one's recording is kept intact in `intact/` and cut at 50 % in the landing zone."""
    root = tmp_path_factory.mktemp("cut")
    drives = synthesize(root / "synth", drives=2, minutes=0.1, source="adtf", light=True)
    finished, victim = drives
    (recording,) = [f for f in victim.files if f.suffix == ".dat"]
    data = recording.read_bytes()
    at = len(data) // 2
    return root, finished, victim, recording, at


def _landing(root: Path, car, name: str, *, with_finished: bool, yaml_extra: str = "") -> Path:
    _, finished, victim, recording, at = car
    landing = root / name / "landing"
    if with_finished:
        shutil.copytree(finished.path, landing / finished.drive_id)
    cut_dir = landing / victim.drive_id
    shutil.copytree(victim.path, cut_dir)
    (cut_dir / recording.name).write_bytes(recording.read_bytes()[:at])
    if yaml_extra:
        with (cut_dir / "drive.yaml").open("a") as f:
            f.write(yaml_extra)
    return landing


def _kept(recording: Path, at: int) -> Counter:
    """Samples per stream name in the complete chunks of the cut (the vendor's reader)."""
    names, items = vendor(recording)
    complete = sum(1 for e in chunk_ends(recording) if e <= at)
    return Counter(names[sid] for sid, kind, *_ in items[:complete] if kind == "Sample")


@pytest.fixture(scope="module")
def intact_lake(car, tmp_path_factory):
    """The victim drive normalized from its intact recording: the reference rows."""
    _, _, victim, _, _ = car
    base = tmp_path_factory.mktemp("intact")
    shutil.copytree(victim.path, base / "landing" / victim.drive_id)
    result = materialize_normalized(base / "landing", base / "lake", victim.drive_id)
    assert result.success
    return base / "lake"


def test_a_cut_recording_takes_its_names_from_a_finished_one_of_the_same_car(
    car, intact_lake, tmp_path
):
    _, finished, victim, recording, at = car
    landing = _landing(tmp_path, car, "auto", with_finished=True)
    lake = tmp_path / "auto" / "lake"
    result = materialize_normalized(landing, lake, victim.drive_id)
    assert result.success
    checks = _checks(result)

    manifest = _read(lake, "raw", "manifest", victim.drive_id)
    row = manifest.filter(pl.col("path") == recording.name).to_dicts()[0]
    assert row["readable"] is False
    assert row["problem"].startswith("cut short: its extension table")
    assert f"past the end of the file ({at} bytes)" in row["problem"]
    assert checks[("raw_manifest", "has_recording")].passed
    formats = checks[("raw_manifest", "formats_valid")]
    assert not formats.passed and formats.severity == dg.AssetCheckSeverity.WARN
    assert recording.name in formats.description and "cut short" in formats.description

    (finished_rec,) = [f.name for f in finished.files if f.suffix == ".dat"]
    files = checks[("normalized_streams", "files")]
    assert f"stream names from catalog ({finished.drive_id}/{finished_rec} (landing zone" in (
        files.description
    )
    assert checks[("normalized_streams", "decoded")].passed
    assert checks[("normalized_streams", "mapped")].passed  # every stream named and mapped

    streams = _read(lake, "normalized", "streams", victim.drive_id)
    read = {
        s: n
        for s, t, n in streams.select("stream", "table", "records_read").iter_rows()
        if not s.endswith("#file") and t != "lidar_points"  # points: records are points
    }
    assert read == dict(_kept(recording, at))  # the vendor's count of every kept sample
    assert _read(lake, "normalized", "adtf_payloads", victim.drive_id).height == 0
    for table in TABLES:  # a normalization of the intact file gives the same rows first
        got = _read(lake, "normalized", table, victim.drive_id)
        ref = _read(intact_lake, "normalized", table, victim.drive_id)
        assert got.height > 0, table
        for stream in got["stream"].unique():
            mine = got.filter(pl.col("stream") == stream)
            want = ref.filter(pl.col("stream") == stream).head(mine.height)
            assert mine.equals(want), (table, stream)


def test_drive_yaml_names_the_catalog(car, tmp_path):
    """The finished recording belongs to a car of another name: only the key finds it."""
    _, finished, victim, recording, at = car
    (finished_rec,) = [f.name for f in finished.files if f.suffix == ".dat"]
    landing = _landing(
        tmp_path,
        car,
        "named",
        with_finished=True,
        yaml_extra=f"catalog_from: {finished.drive_id}/{finished_rec}\n",
    )
    other = landing / finished.drive_id / "drive.yaml"
    other.write_text(other.read_text().replace("test-vehicle-01", "another-car"))
    result = materialize_normalized(landing, tmp_path / "named" / "lake", victim.drive_id)
    assert result.success
    files = _checks(result)[("normalized_streams", "files")]
    assert f"(drive.yaml catalog_from '{finished.drive_id}/{finished_rec}')" in files.description
    streams = _read(tmp_path / "named" / "lake", "normalized", "streams", victim.drive_id)
    assert set(_kept(recording, at)) <= set(streams["stream"])


def test_without_a_finished_recording_the_drive_fails_naming_the_fix(car, tmp_path):
    _, _, victim, recording, _ = car
    landing = _landing(tmp_path, car, "alone", with_finished=False)
    result = materialize_normalized(landing, tmp_path / "alone" / "lake", victim.drive_id)
    assert not result.success
    checks = _checks(result)
    decoded = checks[("normalized_streams", "decoded")]
    assert not decoded.passed and decoded.severity == dg.AssetCheckSeverity.ERROR
    text = decoded.description
    assert "landed only as raw payloads" in text and recording.name in text
    assert "catalog_from: DRIVE/FILE" in text and "test-vehicle" not in text
    assert "mapping suggest" not in text
    assert "mapping suggest" not in checks[("normalized_streams", "mapped")].description
    files = checks[("normalized_streams", "files")].description
    assert "no finished recording of the vehicle was found" in files

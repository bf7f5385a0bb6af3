"""NCLT sessions in the dataset's tarball form (issue 15): detected, streamed out, and
normalized to exactly what the unpacked session gives; then ingested with an ADTF drive."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from bridge_lake.cli import main
from bridge_lake.detect import detect
from bridge_lake.errors import FormatError
from bridge_lake.formats.nclt.archives import unpacked
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake.synth import synthesize
from bridge_lake_tests.support import register

LOOSE = ("groundtruth", "cov_")
PACKS = {
    "sen": lambda rel: rel.endswith(".csv") and not rel.split("/")[-1].startswith(LOOSE),
    "vel": lambda rel: "velodyne" in rel,
    "hokuyo": lambda rel: "hokuyo" in rel,
    "lb3": lambda rel: "/lb3/" in rel,
}  # fmt: skip


def pack(drive: Path) -> None:
    """Re-pack a synthetic session as the dataset ships it: <date>_<part>.tar.gz with
    <date>/... inside, ground truth and its covariance as loose CSVs."""
    session = next(p for p in drive.iterdir() if p.is_dir())
    date = session.name
    files = sorted(p for p in session.rglob("*") if p.is_file())
    for part, wanted in PACKS.items():
        with tarfile.open(drive / f"{date}_{part}.tar.gz", "w:gz") as tar:
            for path in files:
                rel = path.relative_to(drive).as_posix()
                if wanted(rel):
                    tar.add(path, arcname=rel)
                    path.unlink()
    for path in files:
        if path.exists() and path.name.startswith(("groundtruth_", "cov_")):
            path.rename(drive / path.name)
        elif path.exists():
            path.unlink()  # the synthesizer's truth file: not part of a real session


@pytest.fixture(scope="module")
def drives(tmp_path_factory):
    root = tmp_path_factory.mktemp("nclt_archives")
    plain = synthesize(root / "plain", drives=1, minutes=0.05, source="nclt", light=True)[0]
    packed = synthesize(root / "packed", drives=1, minutes=0.05, source="nclt", light=True)[0]
    (packed.path / "2012-01-08" / "_synth_truth.json").unlink()
    (plain.path / "2012-01-08" / "_synth_truth.json").unlink()
    pack(packed.path)
    return root, plain, packed


def test_archives_are_detected_as_recordings(drives):
    _, _, packed = drives
    d = detect("2012-01-08_vel.tar.gz", b"\x1f\x8b\x08")
    assert d.format == "nclt" and d.kind == "archive:vel"
    assert sorted(p.name for p in packed.path.glob("*.tar.gz")) == [
        "2012-01-08_hokuyo.tar.gz", "2012-01-08_lb3.tar.gz", "2012-01-08_sen.tar.gz",
        "2012-01-08_vel.tar.gz",
    ]  # fmt: skip


def test_a_packed_session_normalizes_like_the_unpacked_one(drives, tmp_path):
    root, plain, packed = drives
    results = {}
    for name, d in (("plain", plain), ("packed", packed)):
        landing, lake = LandingZone(str(root / name)), Lake(str(tmp_path / name))
        register(landing, lake, d.drive_id)
        result, published = normalize_drive(landing, lake, d.drive_id, "nclt")
        assert published
        results[name] = result
    rows = {k: r.table_rows for k, r in results.items()}
    assert rows["packed"] == rows["plain"] and rows["packed"]["lidar_points"] > 0
    sources = {s.info.stream: s.info.source_file for s in results["packed"].streams}
    assert sources["gps"] == "2012-01-08_sen.tar.gz!/2012-01-08/gps.csv"
    assert sources["groundtruth"] == "groundtruth_2012-01-08.csv"


def test_an_archive_that_would_escape_its_folder_is_refused(tmp_path):
    drive = tmp_path / "d"
    drive.mkdir()
    data = b"1,2\n"
    with tarfile.open(drive / "2012-01-08_sen.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("../../escape/gps.csv")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(FormatError, match=r"2012-01-08_sen\.tar\.gz"), unpacked(drive):
        pass
    assert not (tmp_path / "escape").exists()


def test_ingest_a_packed_nclt_session_and_an_adtf_drive(drives, tmp_path, capsys, monkeypatch):
    _, _, packed = drives
    landing = tmp_path / "landing"
    landing.mkdir()

    shutil.copytree(packed.path, landing / packed.drive_id)
    synthesize(landing, drives=1, minutes=0.05, source="adtf", light=True, seed=3)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    lake = tmp_path / "lake"
    assert main(["ingest", str(landing), "--lake", str(lake)]) == 0
    assert " 0 failed" in capsys.readouterr().out
    sql = "select drive, count(*) n from normalized_lidar_points group by all order by drive"
    assert main(["query", sql, "--lake", str(lake), "--format", "json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert [c["drive"] for c in counts] == sorted(c["drive"] for c in counts) and len(counts) == 2
    assert all(c["n"] > 0 for c in counts)

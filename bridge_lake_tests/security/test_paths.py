"""Names that come from input cannot leave their root: drive ids (lake and landing paths),
file names in a drive folder, drive.yaml's `mapping` and `export_mapping` files, NCLT
archive members, export outputs (`bridge-lake export --out`, TUM), scene ids, variant
names and the clean scene a manifest names; symlinks included. Every refusal is a typed
BridgeLakeError; every "victim" outside the roots is checked to be untouched."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pyarrow as pa
import pytest

from bridge_lake.errors import BridgeLakeError, DriveIdError, LakePathError
from bridge_lake.export.exporter import ExportRequest, export_drive, export_tum
from bridge_lake.export.lake_exports import drive_mapping
from bridge_lake.formats.nclt.archives import unpacked
from bridge_lake.lake import Lake
from bridge_lake.lake.paths import exports_dir, partition_dir, safe_relative, validate_drive_id
from bridge_lake.landing import LandingZone
from bridge_lake.manifest import build_manifest
from bridge_lake.normalize.adtf_mapping import DriveMappingError, drive_mapping_file
from bridge_lake.scenes.faults import FaultError, check_variant_name
from bridge_lake.scenes.sets import (
    MANIFEST_KIND,
    MANIFEST_VERSION,
    SCENE_ID_PATTERN,
    SceneSetError,
    load_manifest,
)
from bridge_lake_tests.support import register

HOSTILE_IDS = [
    "..",
    ".",
    "../x",
    "a/b",
    "a/../../b",
    "a\\b",
    "/etc",
    "a\0b",
    "a\nb",
    "x\n",
    "",
    ".hidden",
    "-rf",
    "a" * 129,
    "é",
    "a b",
    "a=b",
    "a,b",
    "drive=x",
]


@pytest.mark.parametrize("drive", HOSTILE_IDS)
def test_hostile_drive_ids_never_become_paths(drive, tmp_path):
    with pytest.raises(DriveIdError):
        validate_drive_id(drive)
    with pytest.raises(DriveIdError):
        partition_dir(str(tmp_path), "raw", "manifest", drive)
    with pytest.raises(DriveIdError):
        exports_dir(str(tmp_path), drive)
    with pytest.raises(DriveIdError):
        LandingZone(str(tmp_path)).drive_dir(drive)
    with pytest.raises(DriveIdError):
        Lake(str(tmp_path)).partition_files("raw", "manifest", drive)


def test_landing_scan_rejects_folders_whose_names_are_not_drive_ids(tmp_path):
    for name in ("good-1", "a b", "é", "x=y", ".hidden", "_upload"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "drive.yaml").write_text("vehicle: v\nsource: adtf\n")
    scan = LandingZone(str(tmp_path)).scan()
    assert set(scan.drives) == {"good-1"}
    assert set(scan.rejected) == {"a b", "é", "x=y"}


@pytest.mark.parametrize(
    "rel", ["../other/drive.yaml", "/etc/passwd", "a/../../x", "..\\x", "..", ".", "a/../.."]
)
def test_relative_file_names_cannot_leave_the_drive(rel, tmp_path):
    with pytest.raises(LakePathError):
        safe_relative(rel)
    landing = tmp_path / "landing"
    (landing / "d1").mkdir(parents=True)
    (landing / "other").mkdir()
    (landing / "other" / "drive.yaml").write_text("secret")
    with pytest.raises(LakePathError):
        LandingZone(str(landing)).open("d1", rel)


@pytest.fixture
def zone(tmp_path) -> tuple[LandingZone, Path]:
    """A landing zone with symlinks out of it: a file, a folder inside a drive, and a whole
    drive folder; `outside` holds what they point at."""
    landing, outside = tmp_path / "landing", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.yaml").write_text("vehicle: stolen\nsource: adtf\n")
    (outside / "sub" / "gps.csv").write_text("1,2\n")
    good = landing / "good"
    good.mkdir(parents=True)
    (good / "drive.yaml").write_text("vehicle: v\nsource: adtf\n")
    (good / "link.yaml").symlink_to(outside / "secret.yaml")
    (good / "linkdir").symlink_to(outside / "sub")
    (landing / "evil").symlink_to(outside)
    return LandingZone(str(landing)), outside


@pytest.mark.parametrize(
    ("drive", "rel"),
    [("good", "link.yaml"), ("good", "linkdir/gps.csv"), ("evil", "secret.yaml")],
)
def test_symlinks_out_of_the_landing_zone_are_not_followed(zone, drive, rel):
    landing, _ = zone
    with pytest.raises(BridgeLakeError, match="outside"):
        landing.open(drive, rel)
    with pytest.raises(BridgeLakeError, match="outside"):
        landing.local_path(drive, rel)
    with pytest.raises(BridgeLakeError, match="outside"), landing.local_drive(drive):
        pass
    with landing.open("good", "drive.yaml") as f:  # the control: a plain file reads
        assert f.read().startswith(b"vehicle: v")


def test_the_raw_manifest_marks_links_out_unreadable(zone):
    landing, _ = zone
    entries = {e.file.path: e for e in build_manifest(landing, "good").entries}
    assert entries["drive.yaml"].readable
    assert not entries["link.yaml"].readable and "outside" in entries["link.yaml"].error


@pytest.mark.parametrize(
    "value",
    ["/etc/passwd", "../other.yaml", "sub/../../other.yaml", "..\\other.yaml", "C:/m.yaml", ""],
)
def test_drive_yaml_mapping_must_name_a_file_inside_the_drive(value, tmp_path):
    drive = tmp_path / "d1"
    drive.mkdir()
    (tmp_path / "other.yaml").write_text("rules: []\n")
    (drive / "drive.yaml").write_text(
        json.dumps({"vehicle": "v", "source": "adtf", "mapping": value})
    )
    with pytest.raises(DriveMappingError):
        drive_mapping_file(drive)


def test_drive_yaml_mapping_symlinked_out_is_refused(tmp_path):
    drive = tmp_path / "d1"
    drive.mkdir()
    (tmp_path / "other.yaml").write_text("rules: []\n")
    (drive / "m.yaml").symlink_to(tmp_path / "other.yaml")
    (drive / "own.yaml").write_text("rules: []\n")
    (drive / "drive.yaml").write_text("vehicle: v\nsource: adtf\nmapping: m.yaml\n")
    with pytest.raises(DriveMappingError, match="symlink"):
        drive_mapping_file(drive)
    (drive / "drive.yaml").write_text("vehicle: v\nsource: adtf\nmapping: own.yaml\n")
    assert drive_mapping_file(drive) == drive / "own.yaml"


@pytest.mark.parametrize("value", ["../outside.yaml", "/etc/hostname", "link.yaml", "ok.yaml"])
def test_export_mapping_of_drive_yaml_is_read_only_inside_the_drive(value, tmp_path):
    landing = tmp_path / "landing"
    drive = landing / "d1"
    drive.mkdir(parents=True)
    (landing / "outside.yaml").write_text("topics: [stolen]\n")
    (drive / "link.yaml").symlink_to(landing / "outside.yaml")
    (drive / "ok.yaml").write_text("version: 1\n")
    (drive / "drive.yaml").write_text(f"vehicle: v\nsource: adtf\nexport_mapping: {value}\n")
    zone, lake = LandingZone(str(landing)), Lake(str(tmp_path / "lake"))
    register(zone, lake, "d1")
    out = tmp_path / "copied"
    out.mkdir()
    if value == "ok.yaml":
        assert drive_mapping(lake, "d1", out).read_text() == "version: 1\n"
        return
    with pytest.raises(BridgeLakeError):
        drive_mapping(lake, "d1", out)
    assert list(out.iterdir()) == []


def _tar_gz(members: list[tarfile.TarInfo], data: bytes = b"1,2\n") -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(data) if m.isfile() else None)
    return gzip.compress(raw.getvalue())


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 4 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    "member",
    [
        "../{outside}/2012-01-08/gps.csv",
        "{outside}/2012-01-08/gps.csv",
        ("2012-01-08/gps.csv", tarfile.SYMTYPE, "{outside}/secret"),
        ("2012-01-08/kvh.csv", tarfile.SYMTYPE, "../../../../../../../../{outside}/secret"),
        ("2012-01-08/ms25.csv", tarfile.LNKTYPE, "{outside}/secret"),
    ],
    ids=["dotdot", "absolute", "symlink-abs", "symlink-up", "hardlink"],
)
def test_nclt_archive_members_cannot_leave_the_extraction_folder(member, tmp_path):
    """Refused, or (absolute names, as tarfile's data filter does) put inside the folder:
    nothing is written outside it and no extracted path resolves outside it."""
    drive, outside = tmp_path / "drive", tmp_path / "outside"
    drive.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("secret")
    name, kind, link = member if isinstance(member, tuple) else (member, tarfile.REGTYPE, "")
    fill = {"outside": str(outside).lstrip("/")}
    info = _member(name.format(**fill), kind, link.format(**fill))
    if info.name.startswith(fill["outside"]):
        info.name = "/" + info.name
    if link.startswith("{outside}"):
        info.linkname = "/" + info.linkname
    (drive / "2012-01-08_sen.tar.gz").write_bytes(_tar_gz([info]))
    try:
        with unpacked(drive) as root:
            for p in root.rglob("*"):
                assert p.resolve().is_relative_to(root.resolve()), p
    except BridgeLakeError as exc:
        assert "unpack" in str(exc)
    assert sorted(p.name for p in outside.rglob("*")) == ["secret"]
    assert (outside / "secret").read_text() == "secret"


def test_scene_ids_and_variant_names_are_file_names():
    for bad in ["..", "../x", "a/b", ".x", "a\\b", "", "a" * 201, "x\n"]:
        assert not SCENE_ID_PATTERN.fullmatch(bad), bad
        with pytest.raises(FaultError):
            check_variant_name(bad)
    assert SCENE_ID_PATTERN.fullmatch("drive-1.hard_brake.003")
    assert check_variant_name("drop-5") == "drop-5"


@pytest.mark.parametrize("source", ["../clean.mcap", "/etc/passwd", "sub/clean.mcap", "..", 7])
def test_a_manifest_cannot_name_a_source_scene_outside_its_folder(source, tmp_path):
    doc = {
        "kind": MANIFEST_KIND,
        "manifest_version": MANIFEST_VERSION,
        "window": {"start_ns": 0, "end_ns": 1},
        "file": {"sha256": "0" * 64},
        "topics": {},
        "source": {"file": source, "sha256": "0" * 64},
    }
    path = tmp_path / "s--v.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SceneSetError, match="source"):
        load_manifest(path)
    doc["source"]["file"] = "s.mcap"
    path.write_text(json.dumps(doc))
    assert load_manifest(path)["source"]["file"] == "s.mcap"


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim" / "precious.txt"
    path.parent.mkdir()
    path.write_text("keep me")
    return path


def _untouched(victim: Path) -> None:
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_export_out_over_a_symlink_replaces_the_link_not_its_target(
    synthetic_lake, tmp_path, victim
):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "out.mcap"
    out.symlink_to(victim)
    request = ExportRequest(topics=["/sensor/imu/data"])
    with pytest.raises(BridgeLakeError, match="exists"):
        export_drive(lake, drive, out, request)
    export_drive(lake, drive, out, ExportRequest(topics=["/sensor/imu/data"], force=True))
    assert not out.is_symlink() and out.read_bytes().startswith(b"\x89MCAP")
    _untouched(victim)
    dangling = tmp_path / "dangling.mcap"
    dangling.symlink_to(victim.parent / "created-through-link.mcap")
    export_drive(lake, drive, dangling, request)
    assert not dangling.is_symlink()
    _untouched(victim)


def test_bag2_export_over_a_symlinked_folder_leaves_the_target_folder(
    synthetic_lake, tmp_path, victim
):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "bag"
    out.symlink_to(victim.parent, target_is_directory=True)
    request = ExportRequest(format="bag2", topics=["/sensor/imu/data"], force=True)
    with contextlib.suppress(BridgeLakeError, OSError):  # refusing is fine, following is not
        export_drive(lake, drive, out, request)
    _untouched(victim)


def test_tum_export_does_not_follow_a_planted_partial_file(synthetic_lake, tmp_path, victim):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "tum"
    out.mkdir()
    for name in ("poses.tum", "ground_truth.tum"):
        (out / f".{name}.partial").symlink_to(victim)
    written = export_tum(lake, drive, out)
    assert written[0].name == "poses.tum"
    assert (out / "poses.tum").read_text().startswith("# timestamp")
    _untouched(victim)
    assert os.path.islink(out / ".poses.tum.partial")  # left alone, not written through


@pytest.mark.parametrize("scene_id", ["../../escape", "/tmp/abs", "a/b", ".hidden", "ok-1"])
def test_scene_ids_from_the_catalog_are_checked_before_naming_files(scene_id, tmp_path):
    from bridge_lake.lake.schemas.scenes import CATALOG
    from bridge_lake.scenes.sets import read_catalog, scene_file_name

    lake = Lake(str(tmp_path / "lake"))
    row = {"scene_id": [scene_id], "t_start_ns": [0], "t_end_ns": [1], "tags": [["x"]]}
    row |= {"score": [1.0], "rules": [["r"]], "rule_hashes": [["h"]]}
    lake.write_partition("scenes", "catalog", "d1", pa.table(row, schema=CATALOG.schema))
    if scene_id == "ok-1":  # the control
        assert scene_file_name(read_catalog(lake, "d1")[0].scene_id) == "ok-1.mcap"
        return
    with pytest.raises(SceneSetError, match="cannot name a file"):
        read_catalog(lake, "d1")


def test_export_mapping_is_read_from_the_lake_as_raw_captured_it(tmp_path):
    """The export never reads the landing zone: the mapping is the text raw captured, even
    after the landing file changed or went; a drive whose raw layer predates the capture
    is a MappingError saying to materialize raw_manifest again."""
    landing = tmp_path / "landing"
    drive = landing / "d1"
    drive.mkdir(parents=True)
    (drive / "m.yaml").write_text("version: 1\n")
    (drive / "drive.yaml").write_text("vehicle: v\nsource: adtf\nexport_mapping: m.yaml\n")
    zone, lake = LandingZone(str(landing)), Lake(str(tmp_path / "lake"))
    register(zone, lake, "d1")
    (drive / "m.yaml").unlink()
    out = tmp_path / "copied"
    out.mkdir()
    assert drive_mapping(lake, "d1", out).read_text() == "version: 1\n"
    older = Lake(str(tmp_path / "older"))
    older.write_partition("raw", "drives", "d1", build_manifest(zone, "d1").drive_table())
    with pytest.raises(BridgeLakeError, match="raw_manifest"):
        drive_mapping(older, "d1", out)

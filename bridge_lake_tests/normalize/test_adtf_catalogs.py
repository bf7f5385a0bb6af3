"""Where a cut recording finds its stream names: a real ADTF 3 file cut at 50 % beside its
finished copy in another drive of the car, a recovered copy in the lake once the landing
folder is gone, the catalog on S3 read with a few ranged reads, and never a recording of the
other ADTF generation."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import s3fs

from bridge_lake.detect import detect
from bridge_lake.drive_meta import DriveMeta
from bridge_lake.formats.adtf.recover import copy_catalog, read_catalog
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.manifest import DriveManifest
from bridge_lake.normalize.adtf import normalize_adtf
from bridge_lake.normalize.adtf_catalogs import CatalogPlaces
from bridge_lake.normalize.adtf_recovery import SOURCE_TYPE
from bridge_lake.normalize.sink import DriveSink
from bridge_lake.synth.adtf import write_adtf_drive
from bridge_lake_tests.formats.test_adtf_recover import vendor
from bridge_lake_tests.testdata import ADTF_TESTDATA

REAL = ADTF_TESTDATA / "test_type_seek.dat"  # ADTF 3 (IFHD 0x0400), streams in1, in2


def _drive(landing: Path, drive: str, vehicle: str, files: dict[str, bytes]) -> Path:
    d = landing / drive
    d.mkdir(parents=True)
    (d / "drive.yaml").write_text(f"vehicle: {vehicle}\nsource: adtf\n")
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def _normalize(landing: Path, lake: Lake, drive: str, vehicle: str, landing_zone=None):
    zone = landing_zone or LandingZone(str(landing))
    places = CatalogPlaces(drive, vehicle=vehicle, landing=zone, lake=lake)
    with DriveSink(lake, drive) as sink:
        normalize_adtf(landing / drive, sink, catalogs=places)
        return sink.finish()


def _recovery_reason(result) -> str:
    (row,) = [s for s in result.streams if s.info.source_type == SOURCE_TYPE]
    return next(iter(row.reasons))


def test_a_real_adtf3_file_cut_in_half_takes_the_names_of_its_finished_copy(tmp_path):
    data = REAL.read_bytes()
    cut = data[: len(data) // 2]
    found = detect("cut.dat", cut[:2048], len(cut))
    assert found.cut and found.problem.startswith("cut short")
    assert detect("x.dat", data[:2048], len(data)).problem is None

    landing = tmp_path / "landing"
    _drive(landing, "finished", "car-7", {"full.dat": data})
    _drive(landing, "crashed", "car-7", {"cut.dat": cut})
    result = _normalize(landing, Lake(str(tmp_path / "lake")), "crashed", "car-7")
    assert "stream names from catalog (finished/full.dat (landing zone" in _recovery_reason(result)
    names, _ = vendor(REAL)
    landed = {s.info.stream for s in result.streams if s.info.source_file == "cut.dat"}
    assert set(names.values()) <= landed


def test_a_car_of_another_name_is_no_catalog(tmp_path):
    data = REAL.read_bytes()
    landing = tmp_path / "landing"
    _drive(landing, "finished", "car-8", {"full.dat": data})
    _drive(landing, "crashed", "car-7", {"cut.dat": data[: len(data) // 2]})
    result = _normalize(landing, Lake(str(tmp_path / "lake")), "crashed", "car-7")
    assert "no finished recording of the vehicle was found" in _recovery_reason(result)


def test_a_recording_of_the_other_adtf_generation_is_never_taken(tmp_path):
    """Same stream ids, other envelopes: an ADTF 2 file cannot describe ADTF 3 streams."""
    data = REAL.read_bytes()
    adtf2 = (ADTF_TESTDATA / "test_file_rec_newfile.dat").read_bytes()
    landing = tmp_path / "landing"
    _drive(landing, "old", "car-7", {"adtf2.dat": adtf2})
    _drive(landing, "crashed", "car-7", {"cut.dat": data[: len(data) // 2]})
    result = _normalize(landing, Lake(str(tmp_path / "lake")), "crashed", "car-7")
    assert "catalog (" not in _recovery_reason(result)


def test_a_recovered_copy_in_the_lake_is_a_catalog_once_the_landing_folder_is_gone(tmp_path):
    landing = tmp_path / "landing"
    (tmp_path / "synth").mkdir()
    (full,) = write_adtf_drive(tmp_path / "synth", minutes=0.05, seed=3, lidar_points=200)
    data = full.read_bytes()
    cut = data[: len(data) // 2]
    _drive(landing, "finished", "car-9", {"rec.dat": data})
    _drive(landing, "first-crash", "car-9", {"rec.dat": cut})
    lake = Lake(str(tmp_path / "lake"))
    lake.write_partition("raw", "drives", "first-crash", _drives_row("car-9"))
    first = _normalize(landing, lake, "first-crash", "car-9")
    assert "catalog (finished/rec.dat" in _recovery_reason(first)

    shutil.rmtree(landing / "finished")
    _drive(landing, "second-crash", "car-9", {"rec.dat": cut})
    second = _normalize(landing, lake, "second-crash", "car-9")
    reason = _recovery_reason(second)
    assert "raw/_recovered/drive=first-crash/rec.dat (lake, recovered" in reason
    names = {s.info.stream for s in second.streams if s.info.table == "imu"}
    assert names == {"imu"}


def _drives_row(vehicle: str):
    return DriveManifest("x", [], DriveMeta(vehicle=vehicle, source="adtf"), None).drive_table()


class _Counting(io.BufferedReader):
    read_bytes = 0

    def read(self, n=-1):
        out = super().read(n)
        type(self).read_bytes += len(out)
        return out


def test_a_catalog_is_read_with_a_few_ranged_reads(tmp_path):
    (full,) = write_adtf_drive(tmp_path, minutes=0.2, seed=4, lidar_points=200)
    size = full.stat().st_size
    with _Counting(io.FileIO(full)) as f:
        copy_catalog(f, size, tmp_path / "stub.dat")
    assert _Counting.read_bytes < size // 50
    assert read_catalog(tmp_path / "stub.dat")[1] == read_catalog(full)[1]
    assert (tmp_path / "stub.dat").stat().st_size == size
    assert (tmp_path / "stub.dat").stat().st_blocks * 512 < size // 10  # sparse: holes


def test_a_catalog_in_an_s3_landing_zone(tmp_path, s3_bucket, s3_options):
    (tmp_path / "synth").mkdir()
    (full,) = write_adtf_drive(tmp_path / "synth", minutes=0.05, seed=6, lidar_points=200)
    data = full.read_bytes()
    fs = s3fs.S3FileSystem(**s3_options)
    fs.pipe(f"{s3_bucket}/landing/finished/drive.yaml", b"vehicle: car-s3\nsource: adtf\n")
    fs.pipe(f"{s3_bucket}/landing/finished/rec.dat", data)
    local = tmp_path / "local"
    _drive(local, "crashed", "car-s3", {"rec.dat": data[: len(data) // 2]})
    zone = LandingZone(f"s3://{s3_bucket}/landing", s3_options)
    result = _normalize(local, Lake(str(tmp_path / "lake")), "crashed", "car-s3", zone)
    assert "catalog (finished/rec.dat (landing zone" in _recovery_reason(result)
    assert {s.info.stream for s in result.streams if s.info.table == "gnss"} == {"gnss"}

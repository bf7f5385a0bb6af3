"""One rule for "is an ADTF recording" (the IFHD magic, whatever the name): the raw
manifest's detection and the normalizer list the same files."""

from __future__ import annotations

import shutil

from bridge_lake.detect import HEAD_BYTES, detect
from bridge_lake.lake import Lake
from bridge_lake.normalize.adtf import find_recordings, normalize_adtf
from bridge_lake.normalize.sink import DriveSink
from bridge_lake_tests.testdata import ADTF_TESTDATA


def test_raw_and_normalize_agree_on_what_is_a_recording(tmp_path):
    drive = tmp_path / "drive"
    (drive / "rec").mkdir(parents=True)
    shutil.copy(ADTF_TESTDATA / "test_type_seek.dat", drive / "rec" / "capture.bin")
    shutil.copy(ADTF_TESTDATA / "test_sample_info.dat", drive / "front.DAT")
    (drive / "notes.dat").write_text("not a recording, named like one\n")
    (drive / "readme.txt").write_text("hello\n")

    def is_recording(path):
        rel = path.relative_to(drive).as_posix()
        return detect(rel, path.read_bytes()[:HEAD_BYTES]).format == "adtf"

    by_raw = sorted(p for p in drive.rglob("*") if p.is_file() and is_recording(p))
    assert find_recordings(drive) == by_raw == [drive / "front.DAT", drive / "rec" / "capture.bin"]
    notes = detect("notes.dat", (drive / "notes.dat").read_bytes()[:HEAD_BYTES])
    assert notes.format == "unknown" and "no IFHD magic" in notes.problem

    with DriveSink(Lake(str(tmp_path / "lake")), "d1") as sink:
        normalize_adtf(drive, sink, None)
        result = sink.finish()
    files = {s.info.source_file for s in result.streams}
    assert files == {"front.DAT", "rec/capture.bin"}
    assert sum(s.rows_written for s in result.streams if s.info.source_file == "rec/capture.bin")

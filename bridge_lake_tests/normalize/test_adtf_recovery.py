"""Issue 25 in the lake: a drive whose recording was cut short lands everything recoverable,
with its stream names from the drive's finished recording, a WARN naming the file, the cut
offset and the loss, a quarantine row saying the same, and the recovered copy in the lake's
raw layer beside the tables (the landing file untouched)."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc

from bridge_lake.lake import Lake, paths
from bridge_lake.normalize.adtf import normalize_adtf
from bridge_lake.normalize.adtf_recovery import SOURCE_TYPE
from bridge_lake.normalize.quality import files_finding
from bridge_lake.normalize.sink import DriveSink
from bridge_lake.synth.adtf import write_adtf_drive
from bridge_lake_tests.formats.test_adtf_recover import chunk_ends, vendor


def test_cut_recording_lands_under_its_real_stream_names(tmp_path, caplog):
    drive = tmp_path / "drive"
    drive.mkdir()
    (intact,) = write_adtf_drive(drive, minutes=0.05, seed=5, lidar_points=200)
    names, items = vendor(intact)
    data = intact.read_bytes()
    at = len(data) * 3 // 5
    cut = drive / "crashed.dat"
    cut.write_bytes(data[:at])
    landing_sha = hashlib.sha256(cut.read_bytes()).hexdigest()
    complete = sum(1 for e in chunk_ends(intact) if e <= at)
    kept = Counter(names[sid] for sid, kind, *_ in items[:complete] if kind == "Sample")

    lake = Lake(str(tmp_path / "lake"))
    with caplog.at_level(logging.WARNING), DriveSink(lake, "d1") as sink:
        normalize_adtf(drive, sink)
        result = sink.finish()

    ends = chunk_ends(intact)
    offset = ends[complete - 1]
    (warn,) = [r for r in caplog.records if "cut short" in r.getMessage()]
    text = warn.getMessage()
    assert warn.levelno == logging.WARNING
    assert "crashed.dat" in text and f"cut short at offset {offset}" in text
    assert f"lost {at - offset} bytes" in text and "catalog" in text

    mine = [s for s in result.streams if s.info.source_file == "crashed.dat"]
    landed = {
        s.info.stream.split("@")[0]: s.records_read
        for s in mine
        if s.info.source_type != SOURCE_TYPE and s.info.table != "lidar_points"
    }
    assert landed == dict(kept)  # named from the catalog (not stream<N>), every sample read
    (record,) = [s for s in mine if s.info.source_type == SOURCE_TYPE]
    assert (record.records_read, record.rows_quarantined) == (1, 1)
    q = lake.read_partition("normalized", "quarantine", "d1")
    row = q.filter(pc.equal(q.column("stream"), "crashed.dat#file"))
    assert row.column("byte_offset")[0].as_py() == offset
    assert row.column("byte_length")[0].as_py() == at - offset

    files = files_finding(result.streams)  # the drive's `files` check: a WARN naming it
    assert not files.passed and not files.error
    assert f"crashed.dat (recording cut short at offset {offset}" in files.summary

    copy = Path(paths.recovered_dir(lake.base, "d1")) / "crashed.dat"
    got_names, got = vendor(copy)
    assert got_names == names and got == items[:complete]
    assert hashlib.sha256(cut.read_bytes()).hexdigest() == landing_sha
    assert "_recovered" not in lake.tables("raw")

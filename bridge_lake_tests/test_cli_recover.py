"""`bridge-lake health` on damaged files and `bridge-lake recover`, as a user runs them, on
files the project's exporter wrote from a synthetic lake (issue 25)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from bridge_lake.cli import main
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake_tests.formats.ros_files import (
    any_messages,
    bag1_chunks,
    mcap_chunks,
    mcap_messages,
)
from bridge_lake_tests.formats.test_adtf_recover import chunk_ends, vendor


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def exported(synthetic_lake, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("exported")
    drive = synthetic_lake.drives["adtf"].drive_id
    made = {}
    for fmt, enc, name in (
        ("mcap", "ros2", "d.mcap"),
        ("bag1", "ros1", "d.bag"),
        ("bag2", "ros2", "d2"),
    ):
        export_drive(
            synthetic_lake.lake,
            drive,
            out / name,
            ExportRequest(format=fmt, encoding=enc, chunk_size=256 << 10),
        )
        made[fmt] = out / name
    return made


def test_health_of_a_cut_mcap_names_the_cut_not_a_garbage_length(exported, tmp_path, capsys):
    src = exported["mcap"]
    chunks = mcap_chunks(src)
    torn = chunks[len(chunks) // 2]
    cut = tmp_path / "cut.mcap"
    at = (torn.start + torn.end) // 2
    cut.write_bytes(src.read_bytes()[:at])
    rc, out, err = run(capsys, "health", cut)
    assert rc == 1 and not err
    n = chunks.index(torn)
    assert f"the file ends inside chunk {n} at offset {torn.start}" in out
    assert f"readable: {n} complete chunks" in out
    assert f"lost: {at - torn.start} bytes after the last complete record at {torn.start}" in out
    assert f"bridge-lake recover {cut} " in out
    assert "RecordLengthLimitExceeded" not in out and "opcode" not in out
    rc, out, _ = run(capsys, "health", cut, "--json")
    doc = json.loads(out)
    assert not doc["ok"] and doc["details"]["scan"]["damages"][0]["offset"] == torn.start


def test_recover_a_cut_export_then_it_is_healthy(exported, tmp_path, capsys):
    for fmt in ("mcap", "bag1"):
        src = exported[fmt]
        data = src.read_bytes()
        at = len(data) * 3 // 5
        cut = tmp_path / f"cut{src.suffix}"
        cut.write_bytes(data[:at])
        out = tmp_path / f"rec{src.suffix}"
        rc, stdout, err = run(capsys, "recover", cut, out, "--json")
        assert rc == 1 and not err, err
        doc = json.loads(stdout)
        assert doc["damaged"] and doc["kept"] > 0
        if fmt == "mcap":
            chunks = mcap_chunks(src)
            complete = [m for c in chunks if c.end <= at for m in c.messages]
            got = mcap_messages(out)
            assert got[: len(complete)] == complete and len(got) == doc["kept"]
        else:
            chunks = bag1_chunks(src)
            complete = Counter(m for c in chunks if c.end <= at for m in c.messages)
            got = Counter((t, ts) for t, ts, _ in any_messages(out))
            assert complete <= got and sum(got.values()) == doc["kept"]
        assert sum(t["kept"] for t in doc["topics"].values()) == doc["kept"]
        rc, _, _ = run(capsys, "health", out)
        assert rc == 0  # decoded by independent readers, counts per topic intact


def test_recover_an_intact_export_keeps_every_message(exported, tmp_path, capsys):
    src = exported["mcap"]
    out = tmp_path / "same.mcap"
    rc, stdout, _ = run(capsys, "recover", src, out)
    assert rc == 0 and "dropped 0" in stdout
    assert mcap_messages(out) == mcap_messages(src)
    assert any_messages(out) == any_messages(src)


def test_crashed_ros2_bag_folder(exported, tmp_path, capsys):
    src = exported["bag2"]
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    (storage,) = sorted(src.glob("*.mcap"))
    data = storage.read_bytes()
    (crashed / storage.name).write_bytes(data[: len(data) // 2])  # no metadata.yaml
    rc, out, _ = run(capsys, "health", crashed)
    assert rc == 1 and "no readable metadata.yaml" in out and "bridge-lake recover" in out
    rc, out, _ = run(capsys, "recover", crashed, tmp_path / "fixed")
    assert rc == 1
    got = any_messages(tmp_path / "fixed")
    chunks = mcap_chunks(storage)
    complete = [m for c in chunks if c.end <= len(data) // 2 for m in c.messages]
    assert Counter(got) >= Counter(complete) and len(got) > len(complete) * 0.9
    assert run(capsys, "health", tmp_path / "fixed")[0] == 0


def test_recover_adtf_with_catalog_from_the_command_line(synthetic_lake, tmp_path, capsys):
    landing = Path(synthetic_lake.landing.root) / synthetic_lake.drives["adtf"].drive_id
    (rec,) = sorted(landing.glob("*.dat"))
    names, items = vendor(rec)
    data = rec.read_bytes()
    cut = tmp_path / "cut.dat"
    cut.write_bytes(data[: len(data) // 2])
    out = tmp_path / "fixed.dat"
    rc, stdout, err = run(capsys, "recover", cut, out, "--catalog-from", rec, "--json")
    assert rc == 1 and not err
    doc = json.loads(stdout)
    complete = sum(1 for e in chunk_ends(rec) if e <= len(data) // 2)
    assert doc["chunks"] == complete
    assert {s["name"] for s in doc["streams"].values()} == set(names.values())
    got_names, got = vendor(out)
    assert got_names == names and got == items[:complete]


def test_recover_errors_are_one_line(exported, tmp_path, capsys):
    src = exported["mcap"]
    rc, _, err = run(capsys, "recover", src, src)
    assert rc == 2 and "never writes over its input" in err and len(err.splitlines()) == 1
    existing = tmp_path / "x.mcap"
    existing.write_bytes(b"")
    rc, _, err = run(capsys, "recover", src, existing)
    assert rc == 2 and "exists" in err
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world" * 100)
    rc, _, err = run(capsys, "recover", junk, tmp_path / "o.bin")
    assert rc == 2 and "neither an MCAP file" in err and not (tmp_path / "o.bin").exists()
    shutil.copy(src, tmp_path / "y.mcap")
    rc, _, _ = run(capsys, "recover", src, existing, "--force")
    assert rc == 0


def test_health_of_a_cut_bag_diagnoses_instead_of_failing(exported, tmp_path, capsys):
    """The issue's first report: a real bag cut at 700 KB was 'cannot be read: Bag index
    looks damaged'."""
    src = exported["bag1"]
    chunks = bag1_chunks(src)
    at = 700_000
    torn = next(c for c in chunks if c.start <= at < c.end)
    cut = tmp_path / "cut.bag"
    cut.write_bytes(src.read_bytes()[:at])
    rc, out, err = run(capsys, "health", cut)
    assert rc == 1 and not err
    n = chunks.index(torn)
    assert f"the file ends inside chunk {n} at offset {torn.start}" in out
    assert f"readable: {n} complete chunks" in out and "cannot be read" not in out
    assert f"bridge-lake recover {cut} {tmp_path / 'cut.recovered.bag'}" in out


def test_info_of_a_cut_adtf_recording_names_the_recover_command(tmp_path, capsys):
    from bridge_lake_tests.testdata import ADTF_TESTDATA

    cut = tmp_path / "cut.dat"
    cut.write_bytes((ADTF_TESTDATA / "test_type_seek.dat").read_bytes()[:6000])
    rc, out, _ = run(capsys, "info", cut)
    assert rc == 1
    assert f"cut short: run bridge-lake recover {cut} {tmp_path / 'cut.recovered.dat'}" in out
    rc, out, _ = run(capsys, "info", ADTF_TESTDATA / "test_type_seek.dat")
    assert rc == 0 and "cut short" not in out

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from bridge_lake.cli import main
from bridge_lake.drive_meta import parse_drive_yaml
from bridge_lake_tests.conftest import REPO
from bridge_lake_tests.testdata import ADTF_TESTDATA


def test_synth_writes_drive_folders_for_both_sources(tmp_path, capsys):
    assert (
        main(["synth", "--out", str(tmp_path), "--drives", "2", "--minutes", "0.05", "--seed", "7"])
        == 0
    )
    drives = sorted(p.name for p in tmp_path.iterdir())
    assert drives == ["adtf-test-vehicle-s7001", "nclt-2012-01-08-s7000"]
    metas = [parse_drive_yaml((tmp_path / d / "drive.yaml").read_bytes()) for d in drives]
    assert [m.source for m in metas] == ["adtf", "nclt"]
    assert (tmp_path / "nclt-2012-01-08-s7000" / "2012-01-08" / "velodyne_hits.bin").stat().st_size
    assert list((tmp_path / "adtf-test-vehicle-s7001").glob("*.dat"))
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_synth_is_deterministic(tmp_path):
    for name in ("a", "b"):
        assert (
            main(
                [
                    "synth",
                    "--out",
                    str(tmp_path / name),
                    "--minutes",
                    "0.05",
                    "--source",
                    "all",
                    "--drives",
                    "2",
                ]
            )
            == 0
        )
    files_a = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    files_b = sorted(
        p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file()
    )
    assert files_a == files_b
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def _command_lines() -> list[str]:
    """The command line of every process of the machine (Linux /proc)."""
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    return lines


def test_demo_runs_the_pipeline_and_prints_summary(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert main(["demo", "--workdir", str(tmp_path), "--minutes", "0.05"]) == 0
    out = capsys.readouterr().out
    # no process outlives the demo (its export runs mirrored compute logs through `tail -F`
    # children that inherited the signal gate's mask: each step waited 30 s for them to
    # stop, and they never did)
    left = [c for c in _command_lines() if str(tmp_path) in c]
    assert left == []
    from bridge_lake.definitions import LAKE_ASSETS

    per_drive = sum(len(a.keys) for a in LAKE_ASSETS)  # raw 1, normalized 13, calibrated 4, ...
    assert "Summary" in out and "\n2 drives: " in out and f". {2 * per_drive} assets: " in out
    assert ", 0 failed, " in out and "FAILED" not in out and "not run" not in out
    for asset in ("normalized_lidar_points", "calibrated_poses", "calibrated_frames"):
        assert asset in out
    # the whole-drive export is on demand; the demo asks for it after the default layers
    assert "On demand: the whole-drive export" in out and out.count("... ok in ") >= 2
    assert " dev -w " in out and "workspace.yaml -h 127.0.0.1 -p 3000" in out
    # the closing lines point at the reports, query, ingest and play
    assert f"open the report   {tmp_path}/lake/reports/drive=" in out
    assert "bridge-lake query 'select * from drive_summary' --lake" in out
    assert "bridge-lake ingest LANDING --lake LAKE" in out
    assert f"bridge-lake play {tmp_path}/lake/exports/drive=" in out and ".mcap" in out
    # the online bridge and crash recovery ran on the ADTF drive, and agreed
    assert "Online bridge: bridge-lake live on " in out
    assert "live-check against the export: ok" in out
    assert "Crash recovery: bridge-lake recover on " in out
    assert (tmp_path / "live").is_dir() and list((tmp_path / "recover").glob("recovered-*"))
    for table in ("raw/manifest", "normalized/imu", "normalized/streams", "calibrated/poses"):
        df = pl.read_parquet(str(tmp_path / "lake" / table) + "/", hive_schema={"drive": pl.String})
        assert set(df["drive"]) == {"nclt-2012-01-08-s0", "adtf-test-vehicle-s1"}, table
    assert len(list((tmp_path / "lake" / "reports").glob("drive=*/normalized.html"))) == 2
    assert len(list((tmp_path / "lake" / "reports").glob("drive=*/calibrated.html"))) == 2
    assert len(list((tmp_path / "lake" / "exports").glob("drive=*/*.mcap"))) == 2
    assert (tmp_path / "dagster_home" / "dagster.yaml").exists()


def test_bad_source_is_an_argparse_error():
    with pytest.raises(SystemExit):
        main(["synth", "--out", "x", "--source", "ros"])


def test_definitions_validate_through_workspace_yaml():
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    proc = subprocess.run(
        [dagster, "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


ADTF = ADTF_TESTDATA


def test_info_prints_streams_and_json(capsys):
    import json

    assert main(["info", str(ADTF / "test_type_seek.dat")]) == 0
    text = capsys.readouterr().out
    assert "0x0400" in text and "in1" in text and "in2" in text
    assert main(["info", "--json", str(ADTF / "test_type_seek.dat")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["chunk_count"] == 42


def test_info_on_bad_file_is_a_clean_error(tmp_path, capsys):
    bad = tmp_path / "bad.dat"
    bad.write_bytes(b"NOPE" + bytes(3000))
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "Traceback" not in err
    assert main(["info", str(tmp_path / "missing.dat")]) == 2


def test_query_formats(tmp_path, capsys):
    import json

    import pyarrow.parquet as pq

    from bridge_lake.lake import Lake
    from bridge_lake.lake.schemas import RAW_MANIFEST

    lake = Lake(str(tmp_path / "lake"))
    rows = {
        "path": ["a", "b"],
        "size_bytes": [1, 2],
        "sha256": ["x", "y"],
        "format": ["nclt", "adtf"],
        "format_version": [None, 1024],
        "kind": [None, None],
        "readable": [True, True],
        "problem": [None, None],
    }
    import pyarrow as pa

    lake.write_partition("raw", "manifest", "0042", pa.table(rows, schema=RAW_MANIFEST.schema))
    sql = "select drive, sum(size_bytes)::BIGINT as bytes from raw_manifest group by all"
    lake_arg = ["--lake", str(tmp_path / "lake")]
    assert main(["query", sql, *lake_arg, "--format", "csv"]) == 0
    assert capsys.readouterr().out == "drive,bytes\n0042,3\n"
    assert main(["query", sql, *lake_arg, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"drive": "0042", "bytes": 3}]
    out = tmp_path / "r.parquet"
    assert main(["query", sql, *lake_arg, "--format", "parquet", "--out", str(out)]) == 0
    assert pq.read_table(out).to_pylist() == [{"drive": "0042", "bytes": 3}]
    assert main(["query", sql, *lake_arg]) == 0
    assert "0042" in capsys.readouterr().out
    assert main(["query", "select nope from nowhere", *lake_arg]) == 2
    assert "query failed" in capsys.readouterr().err


def test_cli_tells_the_truth_about_lakes_files_and_output(synthetic_lake, tmp_path, capsys):
    """Issue 15: a missing lake is an error, binary columns print as hex, --out is honoured
    for tables, info exits non-zero on damage and names non-ADTF files, --version works."""

    def run(*args):
        rc = main([str(a) for a in args])
        out = capsys.readouterr()
        return rc, out.out, out.err

    rc, _, err = run("query", "select 1", "--lake", tmp_path / "nope")
    assert rc == 2 and "no lake at" in err and str(tmp_path / "nope") in err
    lake = synthetic_lake.lake.root
    sql = "select drive, can_id, data from normalized_can_frames order by time_ns limit 2"
    rc, out, err = run("query", sql, "--lake", lake, "--format", "csv")
    assert rc == 0 and out.splitlines()[0] == "drive,can_id,data_hex" and "Traceback" not in err
    assert all(len(line.split(",")[2]) == 16 for line in out.splitlines()[1:])  # 8 bytes hex
    rc, out, _ = run("query", "select sum(rows_written) as n from normalized_streams", "--lake",
                     lake, "--format", "json")  # fmt: skip
    assert rc == 0 and isinstance(json.loads(out)[0]["n"], int)  # not decimal(38,0)
    table = tmp_path / "t.txt"
    rc, out, _ = run("query", "select * from calibrated_frames", "--lake", lake, "--out", table)
    assert rc == 0 and out == "" and " rows" in table.read_text().splitlines()[-1]
    rc, _, err = run("query", "select nope", "--lake", lake)
    assert rc == 2 and err.startswith("bridge-lake: error: query failed")
    bad = tmp_path / "not.dat"
    bad.write_bytes(b"hello, not an ADTF file")
    rc, _, err = run("info", bad)
    assert rc == 2 and "not an ADTF recording" in err
    cut = tmp_path / "cut.dat"
    cut.write_bytes((ADTF_TESTDATA / "test_type_seek.dat").read_bytes()[:3000])
    rc, out, _ = run("info", cut, "--json")
    assert rc == 1 and json.loads(out)["issues"]
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("bridge-lake ")


def test_ingest_runs_lake_job_for_each_drive_folder(tmp_path, capsys, monkeypatch):
    """Issue 15: a user's folder of drives in, without dagster dev: partitions registered,
    lake_job runs tagged with drive and source, the lake queryable."""
    import dagster as dg

    from bridge_lake.synth import synthesize

    made = synthesize(tmp_path / "landing", drives=2, minutes=0.05, light=True)
    (tmp_path / "landing" / "bad name!").mkdir()
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    lake = tmp_path / "lake"
    assert main(["ingest", str(tmp_path / "landing"), "--lake", str(lake)]) == 0
    out = capsys.readouterr().out
    assert "skipped folder 'bad name!'" in out and "2 drives" in out and " 0 failed" in out
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert set(instance.get_dynamic_partitions("drives")) == {d.drive_id for d in made}
        runs = instance.get_runs()
        assert {r.job_name for r in runs} == {"lake_job"}
        assert {(r.tags["bridge_lake/drive"], r.tags["bridge_lake/source"]) for r in runs} == {
            (d.drive_id, d.source) for d in made
        }
    con_out = main(["query", "select count(distinct drive) n from calibrated_poses", "--lake",
                    str(lake), "--format", "json"])  # fmt: skip
    assert con_out == 0 and json.loads(capsys.readouterr().out) == [{"n": 2}]
    assert main(["ingest", str(tmp_path / "landing"), "--lake", str(lake), "--drive", "x"]) == 2
    assert "no drive folder x" in capsys.readouterr().err


def test_every_option_of_every_command_has_help():
    import argparse

    from bridge_lake.cli import build_parser

    def parsers(p, path=()):
        yield path, p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from parsers(sub, (*path, name))

    missing = [
        (" ".join(path), a.dest)
        for path, p in parsers(build_parser())
        for a in p._actions
        if not a.help and a.dest != "help"
    ]
    assert missing == []

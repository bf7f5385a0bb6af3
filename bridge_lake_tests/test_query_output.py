"""`bridge-lake query` output: tables that fit the terminal, machine formats for pipes."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys

import pyarrow as pa
import pytest

from bridge_lake.cli import main
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas import RAW_MANIFEST
from bridge_lake.query_output import choose_format
from bridge_lake_tests.conftest import REPO

WIDE = (
    "select drive, repeat('x', 80) as long_text, 1234567890123 as big_number, "
    "3.141592653589793::DOUBLE as pi, path, size_bytes, sha256, format "
    "from raw_manifest order by path"
)


def _lake(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    rows = {
        "path": ["a/very/long/path/to/a/recording/file_number_one.dat", "b.dat"],
        "size_bytes": [123456789012, 2],
        "sha256": ["f" * 64, "0" * 64],
        "format": ["adtf", "nclt"],
        "format_version": [None, 1024],
        "kind": [None, None],
        "readable": [True, True],
        "problem": [None, None],
    }
    lake.write_partition("raw", "manifest", "d1", pa.table(rows, schema=RAW_MANIFEST.schema))
    return str(tmp_path / "lake")


def _table(capsys, lake: str, sql: str, width: int) -> tuple[list[str], list[str]]:
    """The table's lines and the footer's lines (from DuckDB's row/column count on)."""
    assert main(["query", sql, "--lake", lake, "--format", "table", "--width", str(width)]) == 0
    lines = capsys.readouterr().out.splitlines()
    end = max(i for i, line in enumerate(lines) if line.startswith("└"))
    return lines[: end + 1], lines[end + 1 :]


def test_wide_table_fits_a_narrow_terminal(tmp_path, capsys):
    """Issue 32: DuckDB's box renderer lays the table out; nothing is wrapped or cut inside
    a value, the columns left out are named in a footer as narrow as the terminal."""
    lake = _lake(tmp_path)
    for width in (80, 100, 120):  # DuckDB draws no table narrower than 80
        table, footer = _table(capsys, lake, WIDE, width)
        assert all(len(line) <= width for line in table + footer), (width, table, footer)
        assert len(table) == 5 + 2  # rules, header, types, two rows: nothing wrapped
        header = [c.strip() for c in table[1].strip("│").split("│")]
        assert header[0] == "drive" and "…" in header  # the first column stays, others go
        assert all("d1" in row for row in table[4:6])
        if "big_number" in header:  # a number is whole or its column is not shown
            assert "1234567890123" in table[4]
        assert "8 columns (" in footer[0]  # DuckDB's own count
        left_out = " ".join(footer[1:])
        assert left_out.startswith("not shown: ")
        for name in ("long_text", "big_number", "pi", "path", "size_bytes", "sha256"):
            assert (name in header) != (name in left_out.split()[2:] or name + "," in left_out)
    table, footer = _table(capsys, lake, WIDE, 400)
    text = "\n".join(table)
    assert "1234567890123" in text and "123456789012" in text and len(footer) <= 1
    assert "3.141593" in text and "3.14159265" not in text  # rounded for people
    table, _ = _table(capsys, lake, WIDE, 80)
    assert "x" * 30 in table[4] and "x" * 80 not in table[4] and "…" in table[4]  # text cut


def test_machine_formats_keep_every_digit(tmp_path, capsys):
    lake = _lake(tmp_path)
    sql = "select 3.141592653589793 :: DOUBLE as pi, 1e-9 / 3 as tiny"
    for fmt in ("csv", "json"):
        assert main(["query", sql, "--lake", lake, "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "3.141592653589793" in out and "3.3333333333333337e-10" in out, out
    table, _ = _table(capsys, lake, sql, 80)
    assert "3.141593" in table[4] and "3.333333e-10" in table[4]


def test_readme_examples_read_whole_at_80_and_200_columns(synthetic_lake, capsys):
    """Issue 32: the README's sensor_rates example squeezed drive ids to `adtf-te…` and
    printed every digit of a rate; its time_utc example cut the time of day."""
    lake = synthetic_lake.lake.root
    drives = {d.drive_id for d in synthetic_lake.drives.values()}
    rates = 'select drive, "table", stream, mean_rate_hz, expected_rate_hz, gaps from sensor_rates'
    for width in (80, 200):
        table, footer = _table(capsys, lake, rates, width)
        assert all(len(line) <= width for line in table + footer)
        rows = [line for line in table[4:-1] if "·" not in line]
        assert rows and all(any(f"│ {d} " in r for d in drives) for r in rows), rows
        assert not any(re.search(r"\d\.\d{8,}", r) for r in rows)  # at most 7 digits
        if width == 200:
            assert "mean_rate_hz" in table[1] and "not shown" not in " ".join(footer)
        for sql in ("select time_utc, speed_mps from calibrated_poses limit 5",
                    "select * from normalized_gnss"):  # fmt: skip
            table, _ = _table(capsys, lake, sql, width)
            rows = [line for line in table[4:-1] if "·" not in line]
            times = [re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\+00", r) for r in rows]
            assert rows and all(times), (sql, width, table)
            if "normalized_gnss" in sql:
                assert all(any(f"│ {d} " in r for d in drives) for r in rows)


def test_bare_table_names_point_to_their_views(tmp_path):
    """Issue 32: `select * from imu` suggested drive_summary and `poses` pg_views; the error
    names the views, is typed and reaches the user as one line, no traceback."""
    from bridge_lake.lake.query import connect
    from bridge_lake.lake.sql import UnknownTableError, run

    lake = _lake(tmp_path)
    con = connect(lake)
    for name, want in (
        ("imu", ["normalized_imu"]),
        ("poses", ["calibrated_poses"]),
        ("manifest", ["raw_manifest"]),
        ("lidar_points", ["calibrated_lidar_points", "normalized_lidar_points"]),
        ("normalized_imus", ["normalized_imu"]),
        ("camera_frame", ["normalized_camera_frames"]),
    ):
        with pytest.raises(UnknownTableError) as err:
            run(con, f"select * from {name}")
        assert err.value.name == name and err.value.suggestions == want, name
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "bridge_lake.cli", "query", "select * from imu", "--lake", lake],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "bridge-lake: error: query failed: no table or view named imu; did you mean "
        "normalized_imu? (`show tables` lists every view; they are named <layer>_<table>)"
    ]


def test_pipe_gets_csv_and_format_overrides(tmp_path):
    lake = _lake(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    sql = "select path, size_bytes from raw_manifest order by path"
    run = subprocess.run(
        [sys.executable, "-m", "bridge_lake.cli", "query", sql, "--lake", lake],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    rows = list(csv.reader(io.StringIO(run.stdout)))
    assert rows[0] == ["path", "size_bytes"] and rows[1][1] == "123456789012"
    run = subprocess.run(
        [sys.executable, "-m", "bridge_lake.cli", "query", sql, "--lake", lake, "--format", "tsv"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert run.stdout.splitlines()[0] == "path\tsize_bytes"
    assert choose_format("auto", None, True) == "table"
    assert choose_format("auto", None, False) == "csv"
    assert choose_format("auto", "r.json", True) == "json"
    assert choose_format("auto", "r.txt", False) == "table"
    assert choose_format("json", None, True) == "json"

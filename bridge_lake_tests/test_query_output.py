"""`bridge-lake query` output: tables that fit the terminal, machine formats for pipes."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import pyarrow as pa

from bridge_lake.cli import main
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas import RAW_MANIFEST
from bridge_lake.query_output import choose_format, fit_widths
from bridge_lake_tests.conftest import REPO

WIDE = (
    "select drive, repeat('x', 80) as long_text, 1234567890123 as big_number, "
    "3.141592653589793 as pi, path, size_bytes, sha256, format from raw_manifest order by path"
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


def test_wide_table_fits_a_narrow_terminal(tmp_path, capsys):
    lake = _lake(tmp_path)
    for width in (40, 60, 100):
        assert (
            main(["query", WIDE, "--lake", lake, "--format", "table", "--width", str(width)]) == 0
        )
        out = capsys.readouterr().out
        lines = out.splitlines()
        table, footer = lines[:-1], lines[-1]
        assert all(len(line) <= width for line in table), (width, out)
        assert len(table) == 2 + 2  # header, rule, two rows: nothing wrapped
        header = table[0].split()
        if "big_number" in header:  # a number is whole or its column is not shown
            assert "1234567890123" in out and "123456789012" in out
        if "pi" in header:
            assert "3.141592653589793" in out
        assert "…" in out  # text cut with an ellipsis
        assert footer.startswith("2 rows, 8 columns")
        shown = len(header)
        if shown < 8:
            assert f"{8 - shown} column" in footer and "not shown" in footer
    assert main(["query", WIDE, "--lake", lake, "--format", "table", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "1234567890123" in out and "123456789012" in out and "size_bytes" in out


def test_fit_widths_keeps_numbers_and_shrinks_the_widest_text():
    assert fit_widths([10, 5, 30], [False, True, False], 100) == [10, 5, 30]
    widths = fit_widths([10, 5, 30], [False, True, False], 36)
    assert widths is not None and widths[1] == 5 and sum(widths) + 6 <= 36
    assert widths[0] == 10 and widths[2] < 30  # the widest gives up characters first
    assert fit_widths([10, 50], [False, True], 40) is None  # the number cannot fit


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

import json

import polars as pl
import pytest

from bridge_lake.errors import FormatError
from bridge_lake.formats.nclt.csv_tables import (
    COLUMNS,
    COV,
    MalformedRowError,
    load_table,
    read_table,
    schema,
)
from bridge_lake.synth.nclt import write_nclt_drive

GPS = (
    "1326030975726043,2,0,0.738167549,-1.46098,nan,180,1.25\n"
    "1326030975826043,3,0,0.738167549,-1.46098,265,nan,nan\n"
    "1326030975926043,3,0,0.7381675490123456,-1.46098,270.5,359.75,0\n"
)


def test_gps_exact_values_nan_as_null_whole_numbers_in_float_columns(tmp_path):
    path = tmp_path / "gps.csv"
    path.write_text(GPS)
    frame = read_table("gps", path)
    assert frame.schema == pl.Schema(schema("gps"))
    assert frame.columns == ["utime", *COLUMNS["gps"]]
    assert frame.row(0) == (1326030975726043, 2, 0, 0.738167549, -1.46098, None, 180.0, 1.25)
    assert frame.row(1) == (1326030975826043, 3, 0, 0.738167549, -1.46098, 265.0, None, None)
    assert frame.row(2)[3] == 0.7381675490123456 and frame.row(2)[7] == 0.0


def test_missing_trailing_newline_crlf_and_empty_field_are_tolerated(tmp_path):
    path = tmp_path / "kvh.csv"
    path.write_bytes(b"100,0.5\r\n101,\n102,-1e-05")
    frame = read_table("kvh", path)
    assert frame.to_dict(as_series=False) == {
        "utime": [100, 101, 102],
        "heading": [0.5, None, -1e-05],
    }


def test_malformed_rows_are_quarantined_with_line_numbers(tmp_path):
    path = tmp_path / "wheels.csv"
    path.write_text("1,0.5,0.6\n2,0.5\n3,abc,0.1\n4,0.1,0.2,0.3\n\n6,1,2\nx7,1,2\n3,7,8\n")
    table = load_table("wheels", path)
    assert table.frame.get_column("utime").to_list() == [1, 6, 3]
    assert table.quarantine.get_column("line").to_list() == [2, 3, 4, 5, 7]
    reasons = table.quarantine.get_column("reason").to_list()
    assert (
        reasons[0] == "expected 3 fields, found 2"
        and "v_left" in reasons[1]
        and "abc" in reasons[1]
    )
    assert "utime" in reasons[4]
    assert table.quarantine.get_column("text").to_list()[1] == "3,abc,0.1"
    assert table.order.backward == 1 and table.order.duplicates == 0


def test_strict_read_names_file_and_first_bad_line(tmp_path):
    path = tmp_path / "ms25_euler.csv"
    path.write_text("1,0,0,0\n2,0,0\n3,0,zero,0\n")
    with pytest.raises(MalformedRowError) as err:
        read_table("ms25_euler", path)
    assert err.value.line == 2 and err.value.path == str(path)
    assert (
        "ms25_euler.csv" in str(err.value)
        and "line 2" in str(err.value)
        and "1 more" in str(err.value)
    )


def test_integer_column_rejects_fractions_and_unknown_kind(tmp_path):
    path = tmp_path / "gps.csv"
    path.write_text("1,2.5,0,0,0,0,0,0\n2,3.0,0,0,0,0,0,0\n")
    table = load_table("gps", path)
    assert table.frame.get_column("mode").to_list() == [3]
    assert table.quarantine.get_column("line").to_list() == [1]
    with pytest.raises(ValueError, match="unknown NCLT CSV kind"):
        read_table("velodyne", path)


def test_covariance_columns_are_the_upper_triangle_row_by_row():
    assert len(COV) == 21
    assert COV[:6] == tuple(f"cov_x_{k}" for k in ("x", "y", "z", "roll", "pitch", "heading"))
    assert (
        COV[6] == "cov_y_y" and COV[17] == "cov_roll_heading" and COV[20] == "cov_heading_heading"
    )


def test_every_synthetic_csv_reads_clean_and_matches_the_truth(tmp_path):
    write_nclt_drive(tmp_path, minutes=0.2, seed=4, date="2012-03-31", hits_per_rev=500)
    session = tmp_path / "2012-03-31"
    truth = json.loads((session / "_synth_truth.json").read_text())["files"]
    kinds = {f"{k}.csv": k for k in COLUMNS} | {
        "groundtruth_2012-03-31.csv": "groundtruth",
        "cov_2012-03-31.csv": "cov",
    }
    seen = 0
    for name, kind in kinds.items():
        if name not in truth:
            continue
        seen += 1
        table = load_table(kind, session / name)
        assert table.quarantine.height == 0, name
        assert table.frame.height == truth[name]["rows"], name
        assert table.frame.get_column("utime")[0] == truth[name]["first_utime"], name
        assert table.frame.get_column("utime")[-1] == truth[name]["last_utime"], name
    assert seen == 13
    gt = read_table("groundtruth", session / "groundtruth_2012-03-31.csv")
    nan_rows = truth["groundtruth_2012-03-31.csv"]["nan_rows"]
    assert gt.select(pl.col("x").is_null().arg_true()).to_series().to_list() == nan_rows


def test_synthetic_csv_faults_are_caught(tmp_path):
    faults = frozenset({"csv_short_row", "csv_text_field", "duplicate_utime", "backward_utime"})
    write_nclt_drive(
        tmp_path, minutes=0.2, seed=4, date="2012-03-31", faults=faults, hits_per_rev=500
    )
    session = tmp_path / "2012-03-31"
    truth = json.loads((session / "_synth_truth.json").read_text())["faults"]
    short = load_table("gps_rtk", session / "gps_rtk.csv")
    assert short.quarantine.get_column("line").to_list() == [truth["csv_short_row"]["line"]]
    text = load_table("wheels", session / "wheels.csv")
    assert text.quarantine.get_column("line").to_list() == [truth["csv_text_field"]["line"]]
    assert "0.4x1" in text.quarantine.get_column("reason")[0]
    assert load_table("gps", session / "gps.csv").order.duplicates == 1
    euler = load_table("ms25_euler", session / "ms25_euler.csv")
    assert euler.order.backward == 1 and euler.quarantine.height == 0
    assert (
        euler.frame.get_column("utime")[truth["backward_utime"]["line"] - 1]
        == truth["backward_utime"]["utime"]
    )


# one file with every line ending and fault at once: CRLF and LF mixed, a blank line, a short
# line right after the first (block_bytes=11 ends a block exactly before it), a multi-byte
# UTF-8 character (a read can cut it in two), no trailing newline
BLOCKY = (
    b"1,0.5,0.6\r\n2,0.5\r\n3,abc,0.1\n4,nan,0.2\r\n\n6,1,2,3\n7,1,2\r\nx\xc3\xa98,1,2\n9,-1e-05,"
)


def test_block_size_does_not_change_the_table(tmp_path):
    path = tmp_path / "wheels.csv"
    path.write_bytes(BLOCKY)
    whole = load_table("wheels", path)
    assert whole.frame.get_column("utime").to_list() == [1, 4, 7, 9]
    assert whole.quarantine.get_column("line").to_list() == [2, 3, 5, 6, 8]
    assert whole.quarantine.get_column("text").to_list()[-1] == "xé8,1,2"
    assert whole.order.backward == 0
    for block_bytes in range(1, len(BLOCKY) + 1):
        table = load_table("wheels", path, block_bytes=block_bytes)
        assert table.frame.equals(whole.frame), block_bytes
        assert table.frame.schema == whole.frame.schema, block_bytes
        assert table.quarantine.equals(whole.quarantine), block_bytes
        assert table.quarantine.schema == whole.quarantine.schema, block_bytes
        assert table.order == whole.order, block_bytes


def test_empty_file_has_the_full_schema(tmp_path):
    path = tmp_path / "gps.csv"
    path.write_bytes(b"")
    table = load_table("gps", path, block_bytes=4)
    assert table.frame.height == 0 and table.frame.schema == pl.Schema(schema("gps"))
    assert table.quarantine.columns == ["line", "reason", "text"]
    assert table.quarantine.height == 0


def test_non_utf8_names_file_and_line_for_any_block_size(tmp_path):
    path = tmp_path / "kvh.csv"
    path.write_bytes(b"1,0.5\n2,0.5\r\n3,\xff\n4,0.1\n")
    messages = set()
    for block_bytes in (*range(1, 25), 1 << 20):
        with pytest.raises(FormatError) as err:
            load_table("kvh", path, block_bytes=block_bytes)
        assert not isinstance(err.value, MalformedRowError)
        assert (err.value.path, err.value.line) == (str(path), 3)
        messages.add(str(err.value))
    assert len(messages) == 1 and "not UTF-8" in messages.pop()

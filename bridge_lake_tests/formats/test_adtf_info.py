"""`info_dict` / `render_info` on the real recordings and on a damaged one."""

from __future__ import annotations

import json

import pytest

from bridge_lake.adtf_info import render_info
from bridge_lake.formats.adtf.info import info_dict
from bridge_lake.formats.adtf.writer import DatWriter
from bridge_lake_tests.formats.adtf_support import TESTDATA, expected_files, load_expected


@pytest.mark.parametrize("oracle", expected_files(), ids=lambda p: p.stem)
def test_info_matches_the_independent_walk(oracle):
    exp = load_expected(oracle)
    d = info_dict(oracle.parent.parent / exp["file"])
    assert json.loads(json.dumps(d)) == d
    walk = exp["ifhd_walk"]
    assert d["version"] == walk["header"]["version"]
    assert d["chunks_read"] == walk["chunks_walked"]
    assert [s["name"] for s in d["streams"]] == [s["name"] for s in walk["streams"]]
    unit = 1 if d["time_unit"] == "ns" else 1000
    for s, w in zip(d["streams"], walk["streams"], strict=True):
        counts = w.get("walk", {"samples": 0, "triggers": 0, "types": 0})
        assert (s["samples"], s["triggers"], s["stream_types"]) == (
            counts["samples"],
            counts["triggers"],
            counts["types"],
        )
        if "walk" in w:
            assert s["first_time_ns"] == w["index_first_time"] * unit
            assert s["last_time_ns"] == w["index_last_time"] * unit
    text = render_info(d)
    for s in d["streams"]:
        assert s["name"] in text
    assert d["version_hex"] in text
    assert d["issues"] == []


def test_info_rates_and_ddl_names():
    d = info_dict(TESTDATA / "test_file_rec_newfile.dat")
    (s,) = d["streams"]
    assert s["ddl_struct"] == "mytype"
    assert s["rate_hz"] == pytest.approx(1_000_000.0)
    assert d["duration_s"] == pytest.approx(0.000999)
    assert "mytype" in render_info(d)


def test_info_reports_damage(tmp_path):
    p = tmp_path / "cut.dat"
    with DatWriter(p, version=0x0400) as w:
        sid = w.add_stream("s")
        for i in range(10):
            w.write_sample(sid, i * 1000, b"x" * 50)
    p.write_bytes(p.read_bytes()[: 2048 + 5 * 112 + 40])  # chunk = 32 + 20 + 50 -> stride 112
    d = info_dict(p)
    assert d["chunks_read"] == 5
    assert len(d["issues"]) == 2 and "bytes lost" in d["issues"][1]
    assert "issues:" in render_info(d)

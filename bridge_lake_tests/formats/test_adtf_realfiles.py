"""Every real recording (bridge_lake_tests/data/adtf, plus external ones) read by our reader
and compared with the vendor's view (expected/*.json) and the independent container walk
(`ifhd_walk`)."""

from __future__ import annotations

import pytest

from bridge_lake.formats.adtf import open_dat, sniff
from bridge_lake_tests.formats.adtf_support import (
    TESTDATA,
    expected_files,
    load_expected,
    summarise,
)
from bridge_lake_tests.testdata import adtf_path, adtf_recordings

CASES = expected_files()
IDS = [p.name.removesuffix(".json") for p in CASES]


def test_every_recording_has_an_oracle():
    recordings = {p.name for p in adtf_recordings()}
    assert recordings == set(IDS)
    assert len(recordings) >= 6  # the repository's own; 7 with the external GPL file


@pytest.fixture(params=CASES, ids=IDS)
def case(request):
    exp = load_expected(request.param)
    with open_dat(request.param.parent.parent / exp["file"]) as f:
        yield exp, f, summarise(f.items())


def test_header_and_streams(case):
    exp, f, _ = case
    walk = exp["ifhd_walk"]
    assert f.version == walk["header"]["version"]
    assert f.header.chunk_count == walk["header"]["chunk_count"]
    assert f.header.description == walk["header"]["description"]
    assert [e.identifier for e in f.extensions] == [e["identifier"] for e in walk["extensions"]]
    assert [(e.data_pos, e.data_size) for e in f.extensions] == [
        (e["data_pos"], e["data_size"]) for e in walk["extensions"]
    ]
    unit = f.time_unit_ns
    assert [
        (s.stream_id, s.name, s.item_count, s.first_time_ns // unit, s.last_time_ns // unit)
        for s in f.streams
    ] == [
        (
            s["stream_id"],
            s["name"],
            s["index_item_count"],
            s["index_first_time"],
            s["index_last_time"],
        )
        for s in walk["streams"]
    ]
    assert f.report.chunks == walk["chunks_walked"]
    assert f.issues.items == []


def test_vendor_view(case):
    exp, f, got = case
    if "vendor_error" in exp:
        assert [s.stream_id for s in f.streams] == [
            s["stream_id"] for s in exp["vendor_lenient"]["streams"]
        ]
        return
    assert f.version == exp["file_version"]
    for s in exp["streams"]:
        stream = f.stream(s["stream_id"])
        assert stream.name == s["name"]
        assert stream.first_time_ns // 1000 == s["index_first_item_us"]
        assert stream.last_time_ns // 1000 == s["index_last_item_us"]
        assert stream.stream_type.meta_type == s["initial_type"]["meta_type"]
        for name, prop in s["initial_type"]["properties"].items():
            if name == "md_definitions":
                continue  # the vendor re-renders the DDL; the struct it names is checked below
            assert stream.stream_type.properties[name].type == prop["type"]
            assert stream.stream_type.properties[name].value == prop["value"]
        subs = stream.stream_type.substreams()
        assert {n: (i, t.meta_type) for n, (i, t) in subs.items()} == {
            n: (v["id"], v["meta_type"]) for n, v in s["initial_type"].get("substreams", {}).items()
        }
        d = got.get(s["stream_id"])
        if d is None:
            assert s["samples"] == s["triggers"] == s["stream_types"] == 0
            continue
        assert (d["samples"], d["triggers"], d["stream_types"]) == (
            s["samples"],
            s["triggers"],
            s["stream_types"],
        )
        assert d["data"].hexdigest() == s["sha256_of_sample_buffers"]
        assert d["sample_chunk_times"][0] // 1000 == s["first_item_us"]
        assert d["sample_chunk_times"][-1] // 1000 == s["last_item_us"]
        assert d["sample_times"][0] // 1000 == s["first_sample_us"]
        assert d["sample_times"][-1] // 1000 == s["last_sample_us"]
        assert d["substream_ids"] == s["substream_ids"]
        assert d["flags"] == s["sample_flags"]
        assert d["first_data"][:64].hex() == s["first_sample_hex64"]
        assert d["type_meta_types"] == s["type_meta_types"]


def test_first_items_in_vendor_order(case):
    exp, f, _ = case
    if "vendor_error" in exp:
        assert exp["vendor_lenient"]["first_items"] == []
        return
    kinds = {"sample": "Sample", "trigger": "Trigger", "stream_type": "StreamType"}
    ours = [[kinds[i.kind], i.stream_id, i.time_ns // 1000] for i in f.items()]
    assert ours[: len(exp["first_items"])] == exp["first_items"]


def test_independent_walk(case):
    exp, f, got = case
    unit = f.time_unit_ns
    for s in exp["ifhd_walk"]["streams"]:
        if "walk" not in s:
            assert s["stream_id"] not in got
            continue
        w, d = s["walk"], got[s["stream_id"]]
        assert d["raw"].hexdigest() == w["raw_sha256"]
        assert (d["samples"], d["triggers"], d["stream_types"]) == (
            w["samples"],
            w["triggers"],
            w["types"],
        )
        assert d["sample_chunk_times"][0] // unit == w["first_time"] or d["triggers"]
        if w["first_sample_time"] is not None:
            assert d["sample_times"][0] // (1000 if unit == 1000 else 1) == w["first_sample_time"]
            assert d["sample_times"][-1] // (1000 if unit == 1000 else 1) == w["last_sample_time"]
        assert d["substream_ids"] == (w["substream_ids"] or {"0": w["samples"]})


def test_history_ring_order():
    with open_dat(TESTDATA / "test_history.dat") as f:
        items = list(f.items())
        assert len(items) == 520
        times = [i.time_ns for i in items]
        assert times == sorted(times)
        assert times[0] == 41000410_000 and times[-1] == 79900799_000
        offsets = [i.offset for i in items]
        assert offsets[:2] == [5072, 5120] and offsets[58] == 2048 and offsets[121] == 7856
        for sid, count in ((1, 390), (2, 130)):
            idx = [i.stream_index for i in items if i.stream_id == sid]
            assert idx == list(range(count))
        assert bytes(items[0].sample.data) == b"@1|410"


def test_ddl_stream_decodes_from_serialized_layout():
    with open_dat(TESTDATA / "test_file_rec_newfile.dat") as f:
        table = f.decode("test_serialize")
        assert table.num_rows == 1000
        assert table.column("testval1").to_pylist() == list(range(1000))
        assert table.column("testval2").to_pylist() == list(range(1000))
        assert table.column("time_ns").to_pylist() == [i * 1000 for i in range(1000)]
        sample = next(f.samples())
        assert len(sample.raw) == 10 and len(sample.data) == 6


def test_substream_decode():
    with open_dat(adtf_path("adtfdat.hexpat.adtfdat")) as f:
        values = {
            sub: f.decode("substreams1", substream=sub).column("value").to_pylist()
            for sub in (0, 1, 2)
        }
        by_sub = {0: [], 1: [], 2: []}
        for s in f.samples():
            if s.stream_id == 1:
                by_sub[s.substream_id].append(int.from_bytes(s.data, "little"))
        assert values == by_sub
        assert values[0][0] == 102 and len(values[0]) == 45


def test_sample_infos():
    with open_dat(TESTDATA / "test_sample_info.dat") as f:
        samples = list(f.samples())
        for n, s in enumerate(samples):
            info = s.sample_info()
            assert info == {0: s.sample_time_ns // 1000, 1: n, 201: n}


def test_sniff():
    assert sniff(TESTDATA / "test_type_seek.dat") == (True, 0x0400)
    assert sniff(TESTDATA / "SOURCES.md") == (False, None)


def test_sniff_ns_file():
    assert sniff(adtf_path("adtfdat.hexpat.adtfdat").read_bytes()[:80]) == (True, 0x0500)


def _plain(s):
    return (*s[:3], bytes(s.data), bytes(s.raw), *s[5:9])


def test_samples_fast_path_equals_items(case):
    _, f, got = case
    from_items = [_plain(i.sample) for i in f.items() if i.sample is not None]
    fast = [_plain(s) for s in f.samples()]
    assert fast == from_items
    assert len(fast) == sum(d["samples"] for d in got.values())


def test_history_0x0301_uses_ring_buffer_end(tmp_path):
    """0x0301 names the ring's end explicitly; rewrite test_history.dat as 0x0301."""
    raw = bytearray((TESTDATA / "test_history.dat").read_bytes())
    raw[4:8] = (0x0301).to_bytes(4, "little")
    raw[98:106] = (5072).to_bytes(8, "little")
    same = tmp_path / "h301.dat"
    same.write_bytes(bytes(raw))
    with open_dat(TESTDATA / "test_history.dat") as a, open_dat(same) as b:
        assert [i.offset for i in b.items()] == [i.offset for i in a.items()]
    raw[98:106] = (4064).to_bytes(8, "little")  # ring data ends 21 chunks earlier
    short = tmp_path / "h301_short.dat"
    short.write_bytes(bytes(raw))
    with open_dat(short, strict=False) as f:
        offsets = [i.offset for i in f.items()]
        assert len(offsets) == 58 + 42 + 399
        assert offsets[58 + 41] == 4016 and offsets[58 + 42] == 7856
        assert any("chunks" in str(e) for e in f.issues.items)

"""The vectorized chunk locator (`ChunkWalker.chunk_batches`, issue 13) against the Python
chunk walk: the same chunks, the same stop, the same reported problems, on the real files and
on hypothesis-generated recordings built to fool a scan (payloads full of fake chunk headers
that link up with each other and with real chunks, chunks of streams missing from the index,
odd flags, a lying max_chunk_size or chunk_count, truncation, random damage), with tiny scan
windows and batches so every boundary case is hit. `DatFile.decode` is then checked against
the per-sample Python path (`samples()`)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge_lake.formats.adtf import Property, StreamType, ifhd, open_dat
from bridge_lake.formats.adtf import reader as reader_mod
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.formats.adtf.writer import DatWriter
from bridge_lake_tests.formats.adtf_support import TESTDATA

HEAD = struct.Struct("<QIIIHHQ")


def python_walk(path, *, description=None):
    """Chunks, chunks_read and issues of the plain Python sequential walk."""
    with open_dat(path, strict=False, description=description) as f:
        walker = f._walker()
        chunks = [(pos, size, sid | flags << 16) for pos, _, _, size, sid, flags, _ in walker]
        issues = [(type(e).__name__, e.offset, str(e)) for e in f.issues.items]
        return chunks, walker.chunks_read, issues


def numpy_walk(path, *, description=None, select=None):
    with open_dat(path, strict=False, description=description) as f:
        walker = f._walker()
        known = [s.stream_id for s in f.streams]
        chunks = []
        for pos, size, sid_flags in walker.chunk_batches(known, release=True, select=select):
            assert pos.dtype == np.int64 and len(pos) == len(size) == len(sid_flags)
            chunks += zip(pos.tolist(), np.asarray(size).tolist(), sid_flags.tolist(), strict=True)
        issues = [(type(e).__name__, e.offset, str(e)) for e in f.issues.items]
        return chunks, walker.chunks_read, issues


@pytest.fixture(params=["default", "tiny"])
def windows(request, monkeypatch):
    """The shipped sizes, and tiny ones: windows of a few chunks, small 'big' chunks,
    batches of a handful of chunks and samples."""
    if request.param == "tiny":
        monkeypatch.setattr(ifhd, "SCAN_WINDOW", 160)
        monkeypatch.setattr(ifhd, "BIG_CHUNK", 120)
        monkeypatch.setattr(ifhd, "POSITION_BATCH", 5)
        monkeypatch.setattr(reader_mod, "DECODE_BATCH", 3)
    return request.param


def _real_files():
    return sorted(p for p in TESTDATA.iterdir() if p.suffix in (".dat", ".adtfdat") and p.is_file())


@pytest.mark.parametrize("path", _real_files(), ids=lambda p: p.name)
def test_real_files_locate_the_same_chunks(path, windows):
    assert numpy_walk(path) == python_walk(path)


# -- generated recordings ------------------------------------------------------------------------


def _ddl_type(n: int) -> StreamType:
    defs = (
        f"<struct name='R{n}' alignment='1'><element name='k' type='tUInt32' arraysize='1' "
        f"bytepos='0'/><element name='d' type='tUInt8' arraysize='{n}' bytepos='4'/></struct>"
    )
    return StreamType(
        "adtf/default",
        {
            "md_struct": Property("cString", f"R{n}"),
            "md_definitions": Property("cString", defs),
            "md_data_serialized": Property("tBool", "false"),
        },
    )


@st.composite
def fragments(draw, n: int, sids: list[int]):
    """`n` payload bytes that look like chunk headers at 16-byte slots, linking to each other
    or to where the next real chunk will be."""
    out = bytearray(draw(st.binary(min_size=n, max_size=n)))
    for at in range(0, max(n - 31, 0), 16):
        if draw(st.integers(0, 2)):
            continue
        size = draw(st.sampled_from([32, 48, 64, n - at, n - at + 52, 0, 7, 1 << 31]))
        sid = draw(st.sampled_from([*sids, 99, 0]))
        flags = draw(st.sampled_from([0, 1, 8, 9, 0x10, 0x40]))
        HEAD.pack_into(out, at, 5, 0, 16, size & 0xFFFF_FFFF, sid, flags, 3)
    return bytes(out)


@st.composite
def recordings(draw):
    """(plan, patches): items to write and byte patches to apply to the written file."""
    sizes = draw(st.lists(st.integers(1, 90), min_size=1, max_size=3, unique=True))
    items = []
    for i in range(draw(st.integers(0, 40))):
        s = draw(st.integers(0, len(sizes)))  # len(sizes) = the raw stream
        kind = draw(st.sampled_from(["sample"] * 6 + ["trigger", "type"]))
        if s == len(sizes):
            payload = draw(fragments(draw(st.integers(0, 300)), list(range(1, len(sizes) + 2))))
        else:
            payload = struct.pack("<I", i) + draw(
                fragments(sizes[s], list(range(1, len(sizes) + 2)))
            )
        items.append((s, kind, payload, draw(st.integers(0, 3))))
    return sizes, items


def _write(path, sizes, items):
    with DatWriter(path, version=0x0500) as w:
        ids = [w.add_stream(f"s{n}", stream_type=_ddl_type(n)) for n in sizes]
        ids.append(w.add_stream("raw"))
        t = 0
        for s, kind, payload, substream in items:
            t += 1000
            if kind == "trigger":
                w.write_trigger(ids[s], t)
            elif kind == "type" and s == len(sizes):
                w.write_stream_type(ids[s], t, StreamType("adtf/anonymous"))
            else:
                w.write_sample(ids[s], t, payload, substream_id=substream if s < len(sizes) else 0)
    return ids


def _chunk_positions(raw: bytes) -> list[int]:
    data_offset, _, count = struct.unpack_from("<QQQ", raw, 24)
    pos, out = data_offset, []
    while len(out) < count:
        out.append(pos)
        pos += (struct.unpack_from("<I", raw, pos + 16)[0] + 15) & ~15
    return out


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(recording=recordings(), data=st.data())
def test_generated_recordings_locate_the_same_chunks(tmp_path, windows, recording, data):
    sizes, items = recording
    path = tmp_path / "r.dat"
    _write(path, sizes, items)
    raw = bytearray(path.read_bytes())
    chunks = _chunk_positions(bytes(raw))
    for _ in range(data.draw(st.integers(0, 3))):
        what = data.draw(st.sampled_from(["sid", "flags", "max", "count", "size", "byte"]))
        if what in ("sid", "flags", "size") and chunks:
            at = data.draw(st.sampled_from(chunks))
            if what == "sid":  # a stream the index does not list
                struct.pack_into("<H", raw, at + 20, data.draw(st.sampled_from([77, 600, 0])))
            elif what == "flags":
                struct.pack_into("<H", raw, at + 22, data.draw(st.sampled_from([0x20, 0x101])))
            else:
                struct.pack_into("<I", raw, at + 16, data.draw(st.integers(0, 400)))
        elif what == "max":  # a lying max_chunk_size: no real chunk is guessed
            struct.pack_into("<Q", raw, 48, data.draw(st.sampled_from([0, 33, 60, 1 << 40])))
        elif what == "count":
            struct.pack_into("<Q", raw, 40, data.draw(st.integers(0, len(chunks) + 3)))
        elif what == "byte" and len(raw) > 2048:
            raw[data.draw(st.integers(2048, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.none() | st.integers(2048, len(raw)))
    path.write_bytes(bytes(raw[:cut]))
    try:
        want = python_walk(path)
    except Exception as exc:  # a header/index too damaged to open: both must fail alike
        with pytest.raises(type(exc)):
            numpy_walk(path)
        return
    assert numpy_walk(path) == want
    chunks, read, issues = want
    for sid in (1, 2, len(sizes) + 1, 77):  # one stream's sample chunks only
        samples = [c for c in chunks if c[2] & 0xFFFF == sid and not c[2] >> 16 & 0x18]
        assert numpy_walk(path, select=sid) == (samples, read, issues)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(recording=recordings())
def test_decode_matches_the_per_sample_path(tmp_path, windows, recording):
    """`DatFile.decode` (numpy locate, batched) == decoding the buffers `samples()` hands out."""
    sizes, items = recording
    path = tmp_path / "r.dat"
    _write(path, sizes, items)
    with open_dat(path) as f:
        for n in sizes:
            stream = f.stream(f"s{n}")
            samples = [x for x in f.samples() if x.stream_id == stream.stream_id]
            blob = b"".join(bytes(x.raw) for x in samples)
            lengths = np.array([len(x.raw) for x in samples], dtype=np.int64)
            offsets = np.cumsum(lengths) - lengths
            want = decode(stream.ddl, stream.ddl_struct, blob, offsets, lengths)
            got = f.decode(stream.stream_id)
            assert got.column("time_ns").to_pylist() == [x.time_ns for x in samples]
            assert got.column("sample_time_ns").to_pylist() == [x.sample_time_ns for x in samples]
            assert got.drop_columns(["time_ns", "sample_time_ns"]).equals(want)
            assert f.sample_table(stream.stream_id)["substream_id"].tolist() == [
                x.substream_id for x in samples
            ]


def test_decode_of_an_empty_stream_has_the_struct_columns(tmp_path):
    path = tmp_path / "e.dat"
    with DatWriter(path, version=0x0500) as w:
        w.add_stream("s4", stream_type=_ddl_type(4))
    with open_dat(path) as f:
        table = f.decode("s4")
    assert table.num_rows == 0
    assert table.column_names == ["time_ns", "sample_time_ns", "k", "d"]


def test_decode_batches_keep_memory_bounded(tmp_path, monkeypatch):
    """A stream decoded in batches of 1000 samples gives the same table as one batch."""
    path = tmp_path / "b.dat"
    ddl_type = _ddl_type(8)
    with DatWriter(path, version=0x0500) as w:
        a, b = w.add_stream("a", stream_type=ddl_type), w.add_stream("b", stream_type=ddl_type)
        for i in range(5000):
            w.write_sample(a if i % 3 else b, i * 1000, struct.pack("<I8s", i, bytes(8)))
    with open_dat(path) as f:
        whole = f.decode("a")
        monkeypatch.setattr(reader_mod, "DECODE_BATCH", 1000)
        batched = f.decode("a")
    assert batched.num_rows == whole.num_rows == 3333
    assert batched.equals(whole)
    assert len(batched.column("k").chunks) > 1

"""Broken recordings: every failure is a typed error naming the file and the byte offset,
damage after the header still yields every complete chunk, and nothing allocates by trust."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from bridge_lake.errors import BridgeLakeError, FormatError, TruncatedFileError
from bridge_lake.formats.adtf import open_dat
from bridge_lake.formats.adtf.errors import (
    ChunkError,
    CountMismatchError,
    DDLError,
    ExtensionError,
    HeaderError,
    SampleError,
    StreamIndexError,
    TruncatedChunkError,
    TruncatedHeaderError,
)
from bridge_lake.formats.adtf.writer import DatWriter
from bridge_lake_tests.formats.adtf_support import TESTDATA

N = 40


def _good(path, version=0x0400):
    """A small valid recording: N samples of 100 bytes on stream 1; returns chunk offsets."""
    with DatWriter(path, version=version) as w:
        sid = w.add_stream("s")
        for i in range(N):
            w.write_sample(sid, (i + 1) * 1_000_000, bytes([i]) * 100)
    with open_dat(path) as f:
        return [i.offset for i in f.items()]


def _patch(path, offset, fmt, value):
    raw = bytearray(path.read_bytes())
    struct.pack_into(fmt, raw, offset, value)
    path.write_bytes(bytes(raw))


def _ext(path, name):
    with open_dat(path) as f:
        return next(e for e in f.extensions if e.identifier == name)


def _where(exc, path, offset):
    assert isinstance(exc, FormatError) and isinstance(exc, BridgeLakeError)
    assert exc.path == str(path) and exc.offset == offset
    assert str(path) in str(exc) and f"offset {offset}" in str(exc)


def test_bad_magic(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    raw = bytearray(p.read_bytes())
    raw[0:4] = b"IFHX"
    p.write_bytes(bytes(raw))
    with pytest.raises(HeaderError) as err:
        open_dat(p)
    _where(err.value, p, 0)


def test_unknown_version(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    _patch(p, 4, "<I", 0x0999)
    with pytest.raises(HeaderError, match="0x0999") as err:
        open_dat(p)
    _where(err.value, p, 4)


def test_bad_byte_order(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    _patch(p, 72, "<B", 7)
    with pytest.raises(HeaderError) as err:
        open_dat(p)
    _where(err.value, p, 72)


@pytest.mark.parametrize("size", [0, 3, 100, 2047])
def test_truncated_header(tmp_path, size):
    p = tmp_path / "x.dat"
    p.write_bytes((TESTDATA / "test_type_seek.dat").read_bytes()[:size])
    with pytest.raises(TruncatedHeaderError) as err:
        open_dat(p)
    assert isinstance(err.value, TruncatedFileError)
    _where(err.value, p, size)


@pytest.mark.parametrize("cut_into", [1, 31, 32, 60, 131])
def test_truncated_final_chunk_yields_every_complete_chunk(tmp_path, cut_into):
    p = tmp_path / "x.dat"
    offsets = _good(p)
    last = offsets[25]
    p.write_bytes(p.read_bytes()[: last + cut_into])
    with pytest.raises(ExtensionError):
        open_dat(p)
    with open_dat(p, strict=False) as f:
        samples = list(f.samples())
        assert [bytes(s.data) for s in samples] == [bytes([i]) * 100 for i in range(25)]
        kinds = [type(e) for e in f.issues.items]
        assert kinds == [ExtensionError, TruncatedChunkError]
        lost = f.issues.items[1]
        assert lost.offset in (last, last + 16)
        assert f"{cut_into} bytes lost" in str(lost) and "25 of" in str(lost)


def test_truncated_between_chunks_reports_missing_index(tmp_path):
    p = tmp_path / "x.dat"
    offsets = _good(p)
    p.write_bytes(p.read_bytes()[: offsets[10]])
    with open_dat(p, strict=False) as f:
        assert len(list(f.samples())) == 10
        assert [type(e) for e in f.issues.items] == [ExtensionError]
        _where(f.issues.items[0], p, f.header.extension_offset)


def test_chunk_size_past_the_end(tmp_path):
    p = tmp_path / "x.dat"
    offsets = _good(p)
    _patch(p, offsets[7] + 16, "<I", 0xFFFFFFF0)
    with open_dat(p) as f:
        seen = []
        with pytest.raises(ChunkError) as err:
            for s in f.samples():
                seen.append(s)
        assert len(seen) == 7
        _where(err.value, p, offsets[7] + 16)
    with open_dat(p, strict=False) as f:
        assert len(list(f.samples())) == 7
        assert {type(e) for e in f.issues.items} == {ChunkError, CountMismatchError}


def test_chunk_size_below_header(tmp_path):
    p = tmp_path / "x.dat"
    offsets = _good(p)
    _patch(p, offsets[3] + 16, "<I", 8)
    with open_dat(p) as f, pytest.raises(ChunkError, match="below") as err:
        list(f.items())
    _where(err.value, p, offsets[3])


def test_extension_table_out_of_range(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    _patch(p, 16, "<Q", p.stat().st_size - 100)
    with pytest.raises(ExtensionError) as err:
        open_dat(p)
    _where(err.value, p, p.stat().st_size - 100)


def test_huge_extension_count(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    _patch(p, 12, "<I", 0xFFFFFFFF)
    with pytest.raises(ExtensionError):
        open_dat(p)


def test_extension_payload_out_of_range(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    ext = _ext(p, "index1")
    _patch(p, ext.table_offset + 408, "<Q", 1 << 62)
    with pytest.raises(ExtensionError) as err:
        open_dat(p)
    _where(err.value, p, ext.table_offset + 400)


def test_lying_item_count(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    ext = _ext(p, "index1")
    _patch(p, ext.data_pos, "<Q", N + 5)
    with open_dat(p) as f:
        assert f.streams[0].item_count == N + 5
        with pytest.raises(CountMismatchError, match=f"index says {N + 5} items") as err:
            list(f.samples())
        _where(err.value, p, ext.data_pos)


def test_lying_chunk_count(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    _patch(p, 40, "<Q", N + 5)
    with open_dat(p, strict=False) as f:
        assert len(list(f.samples())) == N
        assert [str(e) for e in f.issues.items] == [
            f"{p}, offset 40: header says {N + 5} chunks, the walk found {N}"
        ]


def test_huge_info_data_size(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    ext = _ext(p, "index1")
    _patch(p, ext.data_pos + 24, "<I", 0xFFFFFFFF)
    with pytest.raises(StreamIndexError) as err:
        open_dat(p)
    _where(err.value, p, ext.data_pos + 24)


def test_huge_sample_buffer_size(tmp_path):
    p = tmp_path / "x.dat"
    offsets = _good(p)
    _patch(p, offsets[5] + 32 + 12, "<Q", 1 << 62)
    tracemalloc.start()
    try:
        with open_dat(p) as f, pytest.raises(SampleError, match="exceeds") as err:
            list(f.samples())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _where(err.value, p, offsets[5] + 32 + 12)
    assert peak < 16_000_000  # fixed-size lookup tables only; the declared size is 4 EiB


def test_huge_string_length_in_type_chunk(tmp_path):
    p = tmp_path / "x.dat"
    with DatWriter(p, version=0x0400) as w:
        from bridge_lake.formats.adtf import StreamType

        sid = w.add_stream("s")
        w.write_stream_type(sid, 0, StreamType("adtf/anonymous"))
    _patch(p, 2048 + 32, "<I", 0x7FFFFFFF)
    with open_dat(p) as f, pytest.raises(StreamIndexError, match="declared length") as err:
        list(f.items())
    _where(err.value, p, 2048 + 32)


def test_malformed_sidecar_ddl(tmp_path):
    p = tmp_path / "x.dat"
    p.write_bytes((TESTDATA / "test_file_rec_newfile.dat").read_bytes())
    side = tmp_path / "x.dat.description"
    side.write_text("<adtf:ddl xmlns:adtf='adtf'><structs><struct name='mytype'>")
    with pytest.raises(DDLError) as err:
        open_dat(p)
    _where(err.value, side, 0)
    with open_dat(p, strict=False) as f:
        assert f.streams[0].ddl is None
        assert len(list(f.samples())) == 1000


def test_entity_expansion_is_refused(tmp_path):
    p = tmp_path / "x.dat"
    p.write_bytes((TESTDATA / "test_file_rec_newfile.dat").read_bytes())
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><ddl>&b;</ddl>'
    )
    (tmp_path / "x.dat.description").write_text(bomb)
    with pytest.raises(DDLError, match="forbidden"):
        open_dat(p)


def test_damaged_type_xml_in_index(tmp_path):
    p = tmp_path / "x.dat"
    _good(p)
    ext = _ext(p, "index1")
    raw = bytearray(p.read_bytes())
    at = raw.index(b"<stream", ext.data_pos)
    raw[at : at + 7] = b"<strea>"
    p.write_bytes(bytes(raw))
    with pytest.raises(StreamIndexError, match="malformed") as err:
        open_dat(p)
    _where(err.value, p, ext.data_pos + 256)

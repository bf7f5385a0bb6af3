"""Issue 25: an ADTF recording cut short is rebuilt (header, index, extensions) from its
chunks, with stream names and types from a catalog, its own type chunks or given names; the
vendor reader (`adtf_file`) reads the copy. Truth comes from the intact file: the vendor's
items, and a chunk walk written here from the spec (not the project's reader)."""

from __future__ import annotations

import struct
from pathlib import Path

import adtf_file
import pytest

from bridge_lake.formats.adtf.recover import CATALOG, INDEX, NONE, TYPE_CHUNK, recover_dat
from bridge_lake.synth.adtf import write_adtf_drive
from bridge_lake_tests.testdata import ADTF_TESTDATA

VENDOR_READABLE = [
    "test_type_seek.dat",
    "test_modify_extension.adtfdat",
    "one_empty_stream.dat",
    "test_file_rec_newfile.dat",
    "test_sample_info.dat",
]


def vendor(path: Path) -> tuple[dict[int, str], list[tuple]]:
    """Stream names and every item (stream, kind, chunk time, sample bytes) as the vendor
    reader sees them."""
    reader = adtf_file.create_reader(str(path), "adtfdat", {})
    names = {s.stream_id: s.name for s in reader.streams}
    items = []
    while (item := reader.get_next_item()) is not None:
        kind = str(item.type).rsplit(".", 1)[-1]
        data = bytes(item.sample.buffer) if kind == "Sample" else None
        meta = item.stream_type.meta_type if kind == "StreamType" else None
        items.append((item.stream_id, kind, item.time_stamp, data, meta))
    return names, items


def chunk_ends(path: Path) -> list[int]:
    """End offset of each chunk of an intact sequential file (spec §5, §6.1)."""
    data = path.read_bytes()
    data_offset, data_size, count = struct.unpack_from("<QQQ", data, 24)
    pos, ends = data_offset, []
    while len(ends) < count and pos + 32 <= data_offset + data_size:
        (size,) = struct.unpack_from("<I", data, pos + 16)
        ends.append(pos + size)
        pos += (size + 15) & ~15
    return ends


def _cut(src: Path, at: int, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes()[:at])
    side = Path(str(src) + ".description")
    if side.is_file():
        Path(str(dst) + ".description").write_bytes(side.read_bytes())
    return dst


@pytest.mark.parametrize("name", VENDOR_READABLE)
def test_real_file_cut_in_half_is_read_by_the_vendor_with_its_stream_names(name, tmp_path):
    src = ADTF_TESTDATA / name
    names, items = vendor(src)
    ends = chunk_ends(src)
    half = src.stat().st_size // 2
    cut = _cut(src, half, tmp_path / ("cut" + src.suffix))
    out = tmp_path / ("out" + src.suffix)
    report = recover_dat(cut, out, catalog=src)
    complete = sum(1 for e in ends if e <= half)
    assert report.chunks == complete
    got_names, got = vendor(out)
    assert got == items[:complete]
    seen = {sid for sid, *_ in got}
    assert got_names == {sid: n for sid, n in names.items() if sid in seen}
    assert all(s.source == CATALOG for s in report.streams.values())
    assert not report.indexed and report.problems[0].startswith("no index")


@pytest.mark.parametrize("name", VENDOR_READABLE)
def test_real_file_recovered_intact_is_the_same_recording(name, tmp_path):
    src = ADTF_TESTDATA / name
    out = tmp_path / ("out" + src.suffix)
    report = recover_dat(src, out)
    assert report.indexed and not report.problems
    assert all(s.source == INDEX for s in report.streams.values())
    assert vendor(out) == vendor(src)
    again = tmp_path / ("again" + src.suffix)
    recover_dat(out, again)
    assert again.read_bytes() == out.read_bytes()


def test_adtf3_without_catalog_takes_types_from_its_type_chunks(tmp_path):
    src = ADTF_TESTDATA / "test_type_seek.dat"
    _, items = vendor(src)
    cut = _cut(src, chunk_ends(src)[30] + 5, tmp_path / "cut.dat")
    report = recover_dat(cut, tmp_path / "out.dat")
    assert {s.source for s in report.streams.values()} == {TYPE_CHUNK}
    names, got = vendor(tmp_path / "out.dat")
    assert names == {1: "stream1", 2: "stream2"}
    assert got == items[:31]


def test_given_names_when_nothing_else_says(tmp_path):
    src = ADTF_TESTDATA / "test_sample_info.dat"
    cut = _cut(src, chunk_ends(src)[20] + 3, tmp_path / "cut.dat")
    report = recover_dat(cut, tmp_path / "out.dat", names={1: "from_the_lake"})
    assert report.streams[1].name == "from_the_lake" and report.chunks == 21
    # no type: the vendor cannot decode it, our reader reads the chunks raw
    assert report.lost_bytes == cut.stat().st_size - report.valid_end > 0


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    (path,) = write_adtf_drive(
        tmp_path_factory.mktemp("synth"), minutes=0.05, seed=3, lidar_points=200
    )
    return path


def test_synthetic_recording_cut_at_many_offsets(synthetic, tmp_path):
    names, items = vendor(synthetic)
    ends = chunk_ends(synthetic)
    starts = [2048] + [(e + 15) & ~15 for e in ends[:-1]]
    size = synthetic.stat().st_size
    k = len(ends) // 3
    cuts = {
        "inside a chunk header": starts[k] + 10,
        "inside a chunk body": (starts[k + 5] + ends[k + 5]) // 2,
        "at a chunk boundary": starts[2 * k],
        "in the padding": ends[2 * k] + 1 if ends[2 * k] % 16 else ends[2 * k],
        "in the extensions": size - 600,
        "one byte short": size - 1,
    }
    for where, at in cuts.items():
        cut = _cut(synthetic, at, tmp_path / "cut.dat")
        out = tmp_path / f"out-{at}.dat"
        report = recover_dat(cut, out, catalog=synthetic)
        complete = sum(1 for e in ends if e <= at)
        assert report.chunks == complete, where
        got_names, got = vendor(out)
        assert got == items[:complete], where
        assert got_names == names, where
        assert report.valid_end == ends[complete - 1], where


def test_a_header_never_written_is_rebuilt_from_the_catalog(synthetic, tmp_path):
    """A writer that reserves the header and writes it on close (ours does) leaves zeros."""
    names, items = vendor(synthetic)
    ends = chunk_ends(synthetic)
    data = bytearray(synthetic.read_bytes()[: ends[40] + 7])
    data[:2048] = bytes(2048)
    crashed = tmp_path / "crashed.dat"
    crashed.write_bytes(bytes(data))
    report = recover_dat(crashed, tmp_path / "out.dat", catalog=synthetic)
    assert report.chunks == 41
    got_names, got = vendor(tmp_path / "out.dat")
    assert got_names == names and got == items[:41]


def test_no_catalog_and_no_header_is_a_typed_error(synthetic, tmp_path):
    from bridge_lake.formats.adtf.errors import HeaderError

    data = bytearray(synthetic.read_bytes()[:5000])
    data[:2048] = bytes(2048)
    crashed = tmp_path / "crashed.dat"
    crashed.write_bytes(bytes(data))
    with pytest.raises(HeaderError):
        recover_dat(crashed, tmp_path / "out.dat")
    assert not (tmp_path / "out.dat").exists()


def test_source_none_is_reported(tmp_path):
    src = ADTF_TESTDATA / "test_file_rec_newfile.dat"
    cut = tmp_path / "cut.dat"  # no sidecar, no catalog, ADTF 2: nothing names it
    cut.write_bytes(src.read_bytes()[:10000])
    report = recover_dat(cut, tmp_path / "out.dat")
    assert report.streams[1].source == NONE and report.streams[1].name == "stream1"

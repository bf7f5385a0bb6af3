"""write_dat -> vendor reader and write_dat -> our reader, for IFHD 0x0201, 0x0400, 0x0500."""

from __future__ import annotations

import datetime
import struct

import pytest

from bridge_lake.formats.adtf import Property, StreamType, open_dat, parse_ddl
from bridge_lake.formats.adtf.ddl_convert import convert
from bridge_lake.formats.adtf.writer import DatWriter, StreamSpec, WriteItem, write_dat

adtf_file = pytest.importorskip("adtf_file")

US = datetime.timedelta(microseconds=1)
DDL_TEXT = """<ddl><structs>
<struct name="tPair" alignment="4" version="1">
  <element name="a" type="tUInt32" arraysize="1" bytepos="2" byteorder="BE" alignment="4"/>
  <element name="b" type="tInt16" arraysize="3" bytepos="6" byteorder="LE" alignment="2"/>
  <element name="c" type="tFloat64" arraysize="1" bytepos="12" byteorder="BE" alignment="8"/>
</struct></structs></ddl>"""
KINDS = {"sample": "Sample", "trigger": "Trigger", "stream_type": "StreamType"}


def _write(path, version):
    """Two streams with every item kind the version supports; returns what went in."""
    ddl = parse_ddl(DDL_TEXT)
    expected = []
    with DatWriter(path, version=version, description="round\ntrip") as w:
        if version < 0x0400:
            a = w.add_stream("plain", major=0x0300, sub=3)
            b = w.add_stream("pairs", ddl=ddl, ddl_struct="tPair", stream_id=7)
        else:
            a = w.add_stream(
                "plain",
                stream_type=StreamType("adtf/plaintype", {"c-type": Property("cString", "UINT32")}),
            )
            b = w.add_stream("pairs", stream_id=7)
            stype = StreamType("adtf/anonymous", {"counter": Property("tUInt32", "1")})
            w.write_stream_type(b, 500_000_000, stype)
            expected.append(("StreamType", b, 500_000, None))
        for i in range(300):
            t = 1_000_000_000 + i * 3_333_000 + (777 if version >= 0x0500 else 0)
            data = (i * 1_000_003).to_bytes(4, "little")
            w.write_sample(a, t, data, sample_time_ns=t - 50_000_000)
            expected.append(("Sample", a, t // 1000, (data, (t - 50_000_000) // 1000, 0)))
            pair = (i).to_bytes(4, "little") + bytes(range(i % 5, i % 5 + 6)) + bytes(6)
            pair += (float(i) / 3).hex().encode()[:8].ljust(8, b"\0")
            if version < 0x0400:
                stored = convert(ddl, "tPair", pair, "deserialized", "serialized")
                w.write_sample(b, t + 1000, stored, sample_time_ns=t)
                expected.append(("Sample", b, (t + 1000) // 1000, (pair, t // 1000, 0)))
            else:
                sub = i % 3
                w.write_sample(b, t + 1000, pair, sample_time_ns=t, substream_id=sub)
                expected.append(("Sample", b, (t + 1000) // 1000, (pair, t // 1000, sub)))
                if i % 25 == 0:
                    w.write_trigger(b, t + 2000)
                    expected.append(("Trigger", b, (t + 2000) // 1000, None))
    return expected


def _vendor_items(path):
    reader = adtf_file.create_reader(str(path))
    out = []
    while (item := reader.get_next_item()) is not None:
        sample = None
        if item.type.name == "Sample":
            s = item.sample
            sample = (bytes(s.buffer), s.time_stamp // US, s.substream_id)
        out.append((item.type.name, item.stream_id, item.time_stamp // US, sample))
    return reader, out


@pytest.mark.parametrize("version", [0x0201, 0x0400, 0x0500])
def test_vendor_reads_what_we_write(tmp_path, version):
    path = tmp_path / "rt.dat"
    expected = _write(path, version)
    reader, items = _vendor_items(path)
    assert reader.file_version == version
    assert items == expected
    streams = {s.stream_id: s for s in reader.streams}
    assert sorted(streams) == [1, 7]
    assert streams[7].name == "pairs"
    assert streams[1].item_count == 300
    assert streams[7].item_count == sum(1 for e in expected if e[1] == 7)
    if version < 0x0400:
        assert streams[7].initial_type.properties["md_struct"].value == "tPair"
    assert streams[1].initial_type.meta_type == "adtf/plaintype"


@pytest.mark.parametrize("version", [0x0201, 0x0400, 0x0500])
def test_we_read_what_we_write(tmp_path, version):
    path = tmp_path / "rt.dat"
    expected = _write(path, version)
    with open_dat(path) as f:
        assert f.version == version
        assert f.header.description == "round\ntrip"
        got = []
        for i in f.items():
            sample = None
            if i.sample is not None:
                s = i.sample
                sample = (bytes(s.data), s.sample_time_ns // 1000, s.substream_id)
            got.append((KINDS[i.kind], i.stream_id, i.time_ns // 1000, sample))
        assert got == expected
        assert f.issues.items == []
        index = f.index0()
        assert len(index) >= 2
        by_offset = {i.offset: i for i in f.items()}
        for entry in index:
            item = by_offset[int(entry["chunk_offset"])]
            assert (int(entry["stream_id"]), int(entry["stream_index"])) == (
                item.stream_id,
                item.stream_index,
            )
            assert int(entry["time_stamp"]) * f.time_unit_ns == item.time_ns
        if version >= 0x0500:
            first = next(f.samples())
            assert first.time_ns % 1000 == 777


def test_ns_precision_survives_0x0500(tmp_path):
    path = tmp_path / "ns.dat"
    write_dat(
        path,
        [StreamSpec("s")],
        [WriteItem(1, 1_685_541_246_900_900_501, b"x", sample_time_ns=1_685_541_246_900_814_003)],
        version=0x0500,
    )
    with open_dat(path) as f:
        s = next(f.samples())
        assert (s.time_ns, s.sample_time_ns) == (
            1_685_541_246_900_900_501,
            1_685_541_246_900_814_003,
        )


def test_writer_refuses_time_going_back(tmp_path):
    with DatWriter(tmp_path / "x.dat", version=0x0400) as w:
        sid = w.add_stream("s")
        w.write_sample(sid, 2_000_000, b"")
        with pytest.raises(ValueError, match="back in time"):
            w.write_sample(sid, 1_000_000, b"")


def test_writer_output_is_deterministic(tmp_path):
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    _write(a, 0x0500)
    _write(b, 0x0500)
    assert a.read_bytes() == b.read_bytes()


def test_split_recording_parts_in_time_order(tmp_path):
    from bridge_lake.formats.adtf import recording_parts

    names = ["drive_000.dat", "drive_001.dat", "drive_002.dat"]
    for k, name in enumerate(names):
        refs = tuple(f"./{n}" for n in names[max(k - 1, 0) : k + 2])
        with DatWriter(tmp_path / name, version=0x0400, referenced_files=refs) as w:
            sid = w.add_stream("s")
            for i in range(5):
                w.write_sample(sid, (k * 10 + i) * 1_000_000, bytes([k, i]))
    with open_dat(tmp_path / names[1]) as f:
        assert f.referenced_files == [(tmp_path / n).resolve() for n in names]
    expected = [(tmp_path / n).resolve() for n in names]
    assert recording_parts(tmp_path / names[2]) == expected
    (tmp_path / names[0]).unlink()
    assert recording_parts(tmp_path / names[2]) == expected[1:]
    stamps = []
    for part in recording_parts(tmp_path / names[1]):
        with open_dat(part) as f:
            stamps += [s.time_ns for s in f.samples()]
    assert stamps == sorted(stamps) and len(stamps) == 10


def test_adtf2_can_raw_stream_the_vendor_refuses(tmp_path):
    """ADTF 2 CAN (`adtf.sample.can_message_raw`, tCanMessage buffers): vendor has no
    deserializer for it; we read every frame."""
    path = tmp_path / "can.dat"
    frames = [
        struct.pack("<HBB8s", 0x100 + i % 7, i % 2, 8, bytes((i + k) % 256 for k in range(8)))
        for i in range(50)
    ]
    with DatWriter(path, version=0x0201) as w:
        sid = w.add_stream(
            "can", major=0x0200, sub=0x0002, sample_class="adtf.sample.can_message_raw"
        )
        for i, frame in enumerate(frames):
            w.write_sample(sid, 1_000_000 + i * 1_000_000, frame)
    with pytest.raises(RuntimeError):
        adtf_file.create_reader(str(path))
    with open_dat(path) as f:
        assert f.stream("can").adtf2.sample_class == "adtf.sample.can_message_raw"
        assert f.stream("can").stream_type.meta_type == "adtf2/legacy"
        assert [bytes(s.data) for s in f.samples()] == frames
        ids = [struct.unpack_from("<H", s.data)[0] for s in f.samples()]
        assert ids[:8] == [0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x100]


def _to_big_endian(raw: bytes) -> bytes:
    """Re-encode a plain-IFHD file (no ADTF envelopes, e.g. test_history.dat) big endian:
    header, extension table, index payloads and chunk headers."""
    out = bytearray(raw)

    def swap(fmt, offset):
        values = struct.unpack_from("<" + fmt, raw, offset)
        struct.pack_into(">" + fmt, out, offset, *values)
        return values

    head = swap("4sIIIQQQQQQQBQBQQQ", 0)
    count, table = head[3], head[4]
    for i in range(count):
        at = table + 512 * i
        ident = raw[at : at + 384].split(b"\0", 1)[0].decode()
        *_, pos, size = swap("384sHHIIIQQ", at)
        if ident == "index0":
            for e in range(size // 44):
                swap("QIHHQQQI", pos + 44 * e)
        elif ident.startswith("index_add"):
            swap("QI", pos)
        elif ident.startswith("index"):
            *_, info_size, _ = swap("QQQI228s", pos)
            refs = pos + 256 + info_size
            swap(f"{(size - 256 - info_size) // 4}I", refs)
    # chunk headers: a sequential walk of each region (ring tail, ring head, continuous part)
    for start, stop in ((head[14], head[15]), (head[5], head[14]), (head[15], head[5] + head[6])):
        pos = start
        while pos + 32 <= stop:
            size = struct.unpack_from("<I", raw, pos + 16)[0]
            if size < 32:
                break
            swap("QIIIHHQ", pos)
            pos += (size + 15) & ~15
    out[72] = 2
    return bytes(out)


def test_big_endian_container(tmp_path):
    from bridge_lake_tests.formats.adtf_support import TESTDATA

    le = TESTDATA / "test_history.dat"
    be = tmp_path / "history_be.dat"
    be.write_bytes(_to_big_endian(le.read_bytes()))
    with open_dat(le) as a, open_dat(be) as b:
        assert b.header.byte_order == 2 and b.header.endian == ">"
        assert [(s.stream_id, s.name, s.item_count) for s in b.streams] == [
            (s.stream_id, s.name, s.item_count) for s in a.streams
        ]
        assert [
            (i.stream_id, i.time_ns, i.stream_index, bytes(i.sample.data)) for i in b.items()
        ] == [(i.stream_id, i.time_ns, i.stream_index, bytes(i.sample.data)) for i in a.items()]
        assert b.index0().tolist() == a.index0().tolist()
        assert b.issues.items == []


@pytest.mark.parametrize("version", [0x0400, 0x0500])
def test_media_description_serializer_hands_out_deserialized(tmp_path, version):
    """ADTF 3 `media_description` streams store DDL-serialized buffers; the vendor returns
    the deserialized layout (checked here by experiment), and so does `Sample.data`."""
    from bridge_lake.formats.adtf.samples import SERIALIZER_MD, SERIALIZER_MD_NS

    defs = (
        "<structs><struct name='T' alignment='1' version='1'>"
        "<element name='a' type='tUInt32' arraysize='1' bytepos='2' byteorder='BE' alignment='4'/>"
        "<element name='b' type='tUInt8' arraysize='1' bytepos='0' byteorder='LE' alignment='1'/>"
        "</struct></structs>"
    )
    stype = StreamType(
        "adtf/default",
        {
            "md_struct": Property("cString", "T"),
            "md_definitions": Property("cString", defs),
            "md_data_serialized": Property("tBool", "true"),
        },
    )
    serializer = SERIALIZER_MD_NS if version >= 0x0500 else SERIALIZER_MD
    path = tmp_path / "md.dat"
    stored = [bytes([7 + i, 0]) + struct.pack(">I", 0x01020304 + i) for i in range(20)]
    with DatWriter(path, version=version) as w:
        sid = w.add_stream("s", stream_type=stype, serializer=serializer)
        for i, raw in enumerate(stored):
            w.write_sample(sid, 1_000_000 * (i + 1), raw, sample_time_ns=1_000_000 * i + 7_000)
    _, vendor = _vendor_items(path)
    with open_dat(path) as f:
        ours = list(f.samples())
        assert [bytes(s.raw) for s in ours] == stored
        assert [(bytes(s.data), s.sample_time_ns // 1000) for s in ours] == [
            (v[3][0], v[3][1]) for v in vendor
        ]
        assert bytes(ours[0].data) == struct.pack("<I", 0x01020304) + b"\x07"
        table = f.decode("s")
        assert table.column("a").to_pylist() == [0x01020304 + i for i in range(20)]
        assert table.column("b").to_pylist() == [7 + i for i in range(20)]
        if version >= 0x0500:
            assert ours[0].sample_time_ns == 7_000


@pytest.mark.parametrize(("pixel_format", "bpp"), [(45, 24), (11, 8), (54, 32), (60, 12), (777, 8)])
def test_adtf2_video_type_maps_like_the_vendor(tmp_path, pixel_format, bpp):
    from bridge_lake.formats.adtf.samples import VIDEO_FORMAT

    width, height = 64, 48
    line = width * bpp // 8
    fmt = VIDEO_FORMAT.pack(bpp, line, height, 0, pixel_format, line * height, width)
    path = tmp_path / "video.dat"
    frame = bytes(range(256)) * (line * height // 256) + bytes(line * height % 256)
    with DatWriter(path, version=0x0201) as w:
        sid = w.add_stream("cam", major=0x0100, sub=0, type_class="adtf.type.video", type_data=fmt)
        w.write_sample(sid, 1_000_000, frame)
    reader, items = _vendor_items(path)
    vendor_type = reader.streams[0].initial_type
    with open_dat(path) as f:
        ours = f.stream("cam").stream_type
        assert ours.meta_type == vendor_type.meta_type == "adtf/image"
        assert {k: (p.type, p.value) for k, p in ours.properties.items()} == {
            k: (p.type, p.value) for k, p in vendor_type.properties.items()
        }
        assert [bytes(s.data) for s in f.samples()] == [items[0][3][0]] == [frame]

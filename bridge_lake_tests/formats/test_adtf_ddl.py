"""DDL parsing and the vectorized decoder, checked against an independent struct-module
encoder on hypothesis-generated descriptions (byte orders, gaps, alignment, arrays, nested
structs, dynamic arrays, bit fields)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge_lake.formats.adtf import parse_ddl
from bridge_lake.formats.adtf.ddl import render_ddl, static_size
from bridge_lake.formats.adtf.ddl_convert import convert
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.formats.adtf.errors import DDLError
from bridge_lake_tests.formats.adtf_support import STRUCT_CODES, TESTDATA


def _value(code: str):
    if code == "?":
        return st.booleans()
    if code in "fd":
        floats = st.floats(allow_nan=False, width=32 if code == "f" else 64)
        return floats
    bits = struct.calcsize(code) * 8
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if code.islower() else (0, (1 << bits) - 1)
    return st.integers(lo, hi)


@st.composite
def layouts(draw):
    """(element specs, struct alignment); each spec is (type, count, gap, order, alignment)."""
    n = draw(st.integers(1, 6))
    specs = []
    for _ in range(n):
        specs.append(
            (
                draw(st.sampled_from(sorted(STRUCT_CODES))),
                draw(st.integers(1, 3)),
                draw(st.integers(0, 3)),
                draw(st.sampled_from(["LE", "BE"])),
                draw(st.sampled_from([1, 2, 4, 8])),
            )
        )
    return specs, draw(st.sampled_from([1, 2, 4, 8]))


def _ddl_and_offsets(specs, alignment):
    """DDL text plus the serialized and deserialized offsets, computed independently."""
    pos, lines, ser, des, cursor = 0, [], [], [], 0
    for i, (typ, count, gap, order, align) in enumerate(specs):
        size = struct.calcsize(STRUCT_CODES[typ]) * count
        pos += gap
        ser.append(pos)
        cursor = (cursor + align - 1) // align * align
        des.append(cursor)
        lines.append(
            f'<element name="e{i}" type="{typ}" arraysize="{count}" bytepos="{pos}" '
            f'byteorder="{order}" alignment="{align}"/>'
        )
        pos += size
        cursor += size
    des_size = (cursor + alignment - 1) // alignment * alignment
    text = f'<struct name="S" alignment="{alignment}" version="1">{"".join(lines)}</struct>'
    return text, ser, pos, des, des_size


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), layout=layouts(), rows=st.integers(0, 12))
def test_decode_matches_independent_encoder(data, layout, rows):
    specs, alignment = layout
    text, ser, ser_size, des, des_size = _ddl_and_offsets(specs, alignment)
    ddl = parse_ddl(text)
    assert static_size(ddl, "S", "serialized") == ser_size
    assert static_size(ddl, "S", "deserialized") == des_size
    values = [
        [data.draw(st.lists(_value(STRUCT_CODES[t]), min_size=c, max_size=c)) for t, c, *_ in specs]
        for _ in range(rows)
    ]
    gaps = data.draw(st.lists(st.integers(0, 5), min_size=rows, max_size=rows))
    blob, offsets, des_rows = bytearray(), [], []
    for row, gap in zip(values, gaps, strict=True):
        blob += bytes(gap)
        offsets.append(len(blob))
        ser_row, des_row = bytearray(ser_size), bytearray(des_size)
        for (typ, count, _, order, _), s_at, d_at, v in zip(specs, ser, des, row, strict=True):
            fmt = f"{count}{STRUCT_CODES[typ]}"
            struct.pack_into(("<" if order == "LE" else ">") + fmt, ser_row, s_at, *v)
            struct.pack_into("<" + fmt, des_row, d_at, *v)
        blob += ser_row
        des_rows.append(bytes(des_row))
        assert convert(ddl, "S", bytes(ser_row), "serialized", "deserialized") == des_row
        assert convert(ddl, "S", bytes(des_row), "deserialized", "serialized") == ser_row
    lengths = np.full(rows, ser_size)
    table = decode(ddl, "S", bytes(blob), np.array(offsets, dtype=np.int64), lengths)
    assert table.num_rows == rows
    for i, (typ, count, *_) in enumerate(specs):
        got = table.column(f"e{i}").to_pylist()
        want = [row[i] if count > 1 else row[i][0] for row in values]
        if typ == "tFloat32":
            want = [
                [struct.unpack("<f", struct.pack("<f", x))[0] for x in w]
                if count > 1
                else struct.unpack("<f", struct.pack("<f", w))[0]
                for w in want
            ]
        assert got == want
    des_blob = b"".join(des_rows)
    des_table = decode(
        ddl,
        "S",
        des_blob,
        np.arange(rows, dtype=np.int64) * des_size,
        np.full(rows, des_size),
        layout="deserialized",
    )
    assert des_table.equals(table)
    assert parse_ddl(render_ddl(ddl)) == ddl


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(0, 6), max_size=10),
    order=st.sampled_from(["LE", "BE"]),
    data=st.data(),
)
def test_dynamic_array_and_nested_points(counts, order, data):
    """A lidar-like struct: header, u16 count, point[count] of a nested struct, u32 trailer."""
    ddl = parse_ddl(
        f"""<ddl><structs>
        <struct name="P" alignment="1"><element name="x" type="tFloat32" arraysize="1"
          bytepos="0" byteorder="{order}" alignment="1"/><element name="i" type="tUInt8"
          arraysize="1" bytepos="4" byteorder="{order}" alignment="1"/></struct>
        <struct name="C" alignment="1">
          <element name="stamp" type="tInt64" arraysize="1" bytepos="0" byteorder="{order}"
            alignment="1"/>
          <element name="n" type="tUInt16" arraysize="1" bytepos="8" byteorder="{order}"
            alignment="1"/>
          <element name="pts" type="P" arraysize="n" bytepos="10" byteorder="{order}"
            alignment="1"/>
          <element name="raw" type="tInt16" arraysize="n" bytepos="0" byteorder="{order}"
            alignment="1"/>
          <element name="tail" type="tUInt32" arraysize="1" bytepos="0" byteorder="{order}"
            alignment="1"/>
        </struct></structs></ddl>"""
    )
    assert static_size(ddl, "C", "serialized") is None
    e = "<" if order == "LE" else ">"
    blob, offsets, lengths, want = bytearray(), [], [], []
    for k, n in enumerate(counts):
        pts = [
            (float(np.float32(data.draw(st.floats(-1e6, 1e6)))), data.draw(st.integers(0, 255)))
            for _ in range(n)
        ]
        raw = data.draw(st.lists(st.integers(-32768, 32767), min_size=n, max_size=n))
        row = struct.pack(e + "qH", k * 7 - 3, n)
        row += b"".join(struct.pack(e + "fB", x, i) for x, i in pts)
        row += struct.pack(f"{e}{n}h", *raw) + struct.pack(e + "I", 0xDEAD0000 + k)
        offsets.append(len(blob))
        lengths.append(len(row))
        blob += row + bytes(k % 3)
        want.append((k * 7 - 3, n, [{"x": x, "i": i} for x, i in pts], raw, 0xDEAD0000 + k))
    table = decode(ddl, "C", bytes(blob), np.array(offsets, dtype=np.int64), np.array(lengths))
    got = list(
        zip(
            *(table.column(c).to_pylist() for c in ("stamp", "n", "pts", "raw", "tail")),
            strict=True,
        )
    )
    assert got == want
    for off, length in zip(offsets, lengths, strict=True):
        row = bytes(blob[off : off + length])
        des = convert(ddl, "C", row, "serialized", "deserialized")
        assert convert(ddl, "C", des, "deserialized", "serialized") == row


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=st.lists(st.tuples(st.integers(1, 12), st.booleans()), min_size=1, max_size=4),
    data=st.data(),
)
def test_bit_fields(fields, data):
    """LE bit fields packed back to back from bit 0 of byte 2, signed and unsigned."""
    bit, lines, spec = 16, [], []
    for i, (numbits, signed) in enumerate(fields):
        typ = "tInt16" if signed else "tUInt16"
        lines.append(
            f'<element name="b{i}" type="{typ}" arraysize="1" bytepos="{bit // 8}" '
            f'bitpos="{bit % 8}" numbits="{numbits}" byteorder="LE" alignment="1"/>'
        )
        spec.append((bit, numbits, signed))
        bit += numbits
    ddl = parse_ddl(f'<struct name="B" alignment="1">{"".join(lines)}</struct>')
    rows = data.draw(st.integers(1, 8))
    size = (bit + 7) // 8
    blob, want = bytearray(), []
    for _ in range(rows):
        word, row_values = 0, []
        for start, numbits, signed in spec:
            lo, hi = (
                (-(1 << (numbits - 1)), (1 << (numbits - 1)) - 1)
                if signed
                else (0, (1 << numbits) - 1)
            )
            v = data.draw(st.integers(lo, hi))
            row_values.append(v)
            word |= (v & ((1 << numbits) - 1)) << (start - 16)
        blob += bytes(2) + word.to_bytes(size - 2, "little")
        want.append(row_values)
    table = decode(ddl, "B", bytes(blob), np.arange(rows) * size, np.full(rows, size))
    assert [list(r.values()) for r in table.to_pylist()] == want
    for k in range(rows):
        row = bytes(blob[k * size : (k + 1) * size])
        des = convert(ddl, "B", row, "serialized", "deserialized")
        assert list(struct.unpack(f"<{len(spec)}h", des)) == [
            v if signed or v < 32768 else v - 65536
            for v, (_, _, signed) in zip(want[k], spec, strict=True)
        ]
        assert convert(ddl, "B", des, "deserialized", "serialized")[2:] == row[2:]


def test_big_endian_bit_field_reads_a_big_endian_word():
    ddl = parse_ddl(
        '<struct name="B"><element name="v" type="tUInt16" bytepos="0" bitpos="4" numbits="8" '
        'byteorder="BE" arraysize="1"/></struct>'
    )
    table = decode(ddl, "B", b"\xab\xcd", np.array([0]), np.array([2]))
    assert table.column("v").to_pylist() == [0xBC]


@pytest.mark.parametrize(("raw", "count"), [("01", 1), ("010", 10), ("0x10", 16), ("0", 1)])
def test_arraysize_digits_are_decimal(raw, count):
    """A fuzzer found "01" raising a bare ValueError (int(x, 0) refuses leading zeros)."""
    ddl = parse_ddl(
        f'<struct name="A"><element name="v" type="tUInt8" bytepos="0" arraysize="{raw}"/></struct>'
    )
    assert static_size(ddl, "A", "serialized") == count


def test_real_sidecars_parse():
    ddl = parse_ddl((TESTDATA / "example_file_adtf2.dat.description").read_bytes())
    assert ddl.streams == {"NESTED_STRUCT": "tNestedStruct", "video": "adtf.type.video"}
    assert static_size(ddl, "tNestedStruct", "serialized") == 43
    assert static_size(ddl, "tSimpleStruct", "serialized") == 31
    assert ddl.enums["tPixelFormat"].type == "tInt16"
    assert ddl.enums["tPixelFormat"].values["PF_RGB_888"] == 45


def test_ddl4_fragment_and_enum_metadata():
    ddl = parse_ddl(
        '<enums><enum name="E" type="tUInt8"><element name="A" value="1"/></enum></enums>'
        '<struct name="S" alignment="1" version="1"><element name="tag" type="E" arraysize="1">'
        '<serialized bytepos="0" byteorder="LE"/><deserialized alignment="1"/></element>'
        '<element name="v" type="tUInt32" arraysize="1"><serialized bytepos="1" byteorder="BE"/>'
        '<deserialized alignment="4"/></element></struct>'
    )
    table = decode(ddl, "S", b"\x01\x00\x00\x01\x00", np.array([0]), np.array([5]))
    assert table.to_pylist() == [{"tag": 1, "v": 256}]
    assert table.schema.field("tag").metadata == {b"ddl_enum": b"E"}
    assert static_size(ddl, "S", "deserialized") == 8


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "<struct name='S'><element name='a' type='tNope' arraysize='1'/></struct>",
            "unknown type",
        ),
        ("<struct name='S'><element name='a' type='tUInt8' arraysize='n'/></struct>", "no earlier"),
        ("<struct name='S'><element name='a' type='S' arraysize='1'/></struct>", "contains itself"),
        ("<struct name='S'><element name='a' type='tUInt8' byteorder='XX'/></struct>", "byteorder"),
        (
            "<struct name='S'><element name='a' type='tUInt8' alignment='3'/></struct>",
            "power of two",
        ),
        ("<struct name='S'><element name='a' type='tFloat32' numbits='3'/></struct>", "bit field"),
        ("<struct name='S'><element name='a' type='tUInt8' bytepos='x'/></struct>", "integer"),
        ("<struct name='S'><element", "well-formed"),
    ],
)
def test_malformed_ddl(text, match):
    with pytest.raises(DDLError, match=match):
        parse_ddl(text)


def test_decode_bounds_are_checked_per_sample():
    ddl = parse_ddl(
        "<struct name='S'><element name='n' type='tUInt32' arraysize='1' bytepos='0'/>"
        "<element name='v' type='tUInt8' arraysize='n' bytepos='4'/></struct>"
    )
    blob = struct.pack("<I", 3) + b"abc" + struct.pack("<I", 0xFFFFFFFF) + b"x"
    with pytest.raises(DDLError, match="past the end") as err:
        decode(ddl, "S", blob, np.array([0, 7]), np.array([7, 5]))
    assert err.value.offset == 11


def test_constants_feed_enums_and_element_metadata():
    ddl = parse_ddl(
        "<ddl><constants><constant name='K_MAX' type='tInt32' value='7'/></constants>"
        "<enums><enum name='E' type='tInt16'><element name='MAX' value='K_MAX'/>"
        "<element name='MIN' value='-2'/></enum></enums>"
        "<structs><struct name='S' alignment='1'>"
        "<element name='e' type='E' arraysize='1' bytepos='0' byteorder='BE' alignment='1'/>"
        "<element name='c' type='tUInt8' arraysize='1' bytepos='2' value='42' alignment='1'/>"
        "</struct></structs></ddl>"
    )
    assert ddl.constants == {"K_MAX": "7"}
    assert ddl.enums["E"].values == {"MAX": 7, "MIN": -2}
    table = decode(ddl, "S", b"\xff\xfe\x2a", np.array([0]), np.array([3]))
    assert table.to_pylist() == [{"e": -2, "c": 42}]
    assert table.schema.field("c").metadata == {b"ddl_value": b"42"}
    assert parse_ddl(render_ddl(ddl)) == ddl

"""Dynamic DDL layouts (issue 13): arrays of variable-size structs, dynamic arrays whose count
is an earlier element (also one inside an earlier nested struct: `hdr.n`), structs holding
dynamic arrays inside arrays of structs, in both layouts.

Checked on hypothesis-generated descriptions against an independent encoder written here:
plain `struct.pack_into`, element by element, positions computed from the spec's rules
(§10.2: serialized elements at their `bytepos` until the first variable-size element, then
strictly in order; deserialized in declaration order, aligned, structs padded to their
alignment). The library's writer, `convert` and layout code are not used to build the bytes.
Malformed payloads must give a `DDLError` naming an offset inside the sample, allocate nothing
from the lying size, and never crash.
"""

from __future__ import annotations

import struct
import tracemalloc
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge_lake.formats.adtf import ddl_decode, parse_ddl
from bridge_lake.formats.adtf.ddl import static_size
from bridge_lake.formats.adtf.ddl_convert import convert
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.formats.adtf.errors import DDLError
from bridge_lake_tests.formats.adtf_support import STRUCT_CODES

COUNT_TYPES = ["tUInt8", "tInt8", "tUInt16", "tInt16", "tUInt32", "tInt32", "tUInt64", "tInt64"]


# -- the model the test generates (independent of bridge_lake's DDL classes) ---------------------


@dataclass
class El:
    name: str
    type: str
    count: int | str
    """1 for a scalar, n for a fixed array, a (dotted) element path for a dynamic array."""
    order: str = "<"
    align: int = 1
    bytepos: int | None = None
    counter: bool = False
    """An integer scalar that some dynamic array uses as its count (kept small)."""


@dataclass
class Struct:
    name: str
    align: int
    elements: list[El] = field(default_factory=list)
    counters: list[str] = field(default_factory=list)
    """Paths (relative to this struct) of the counters a parent may name: `n`, `hdr.n`."""


def _variable(el: El, structs: dict[str, Struct]) -> bool:
    """Does the element's size depend on the data?"""
    if isinstance(el.count, str):
        return True
    sub = structs.get(el.type)
    return sub is not None and any(_variable(x, structs) for x in sub.elements)


def _fixed_ser_size(s: Struct, structs: dict[str, Struct]) -> int:
    """Serialized size of a struct without variable parts: the end of its last byte."""
    end = 0
    for el in s.elements:
        end = max(end, el.bytepos + _fixed_width(el, structs))
    return end


def _fixed_width(el: El, structs: dict[str, Struct]) -> int:
    if el.type in structs:
        return _fixed_ser_size(structs[el.type], structs) * el.count
    return struct.calcsize(STRUCT_CODES[el.type]) * el.count


@st.composite
def descriptions(draw):
    """1-4 structs, each using only earlier ones; the last one is decoded."""
    structs: dict[str, Struct] = {}
    for k in range(draw(st.integers(1, 4))):
        s = Struct(f"S{k}", draw(st.sampled_from([1, 2, 4, 8])))
        cursor, variable_seen = 0, False
        for j in range(draw(st.integers(1, 5))):
            kinds = ["counter", "base", "base_array"]
            if s.counters:
                kinds.append("dynamic_base")
            if structs:
                kinds += ["struct", "struct_array"]
                if s.counters:
                    kinds += ["dynamic_struct", "dynamic_struct"]
            kind = draw(st.sampled_from(kinds))
            name = f"e{j}"
            if kind == "counter":
                el = El(name, draw(st.sampled_from(COUNT_TYPES)), 1, counter=True)
            elif kind == "base":
                el = El(name, draw(st.sampled_from(sorted(STRUCT_CODES))), 1)
            elif kind == "base_array":
                el = El(name, draw(st.sampled_from(sorted(STRUCT_CODES))), draw(st.integers(2, 3)))
            elif kind == "dynamic_base":
                el = El(
                    name,
                    draw(st.sampled_from(sorted(STRUCT_CODES))),
                    draw(st.sampled_from(s.counters)),
                )
            else:
                sub = draw(st.sampled_from(sorted(structs)))
                if kind == "struct":
                    count: int | str = 1
                elif kind == "struct_array":
                    count = draw(st.integers(2, 3))
                else:
                    count = draw(st.sampled_from(s.counters))
                el = El(name, sub, count)
            el.order = draw(st.sampled_from(["<", ">"]))
            el.align = draw(st.sampled_from([1, 2, 4, 8]))
            if not variable_seen:
                el.bytepos = cursor + draw(st.integers(0, 3))
                cursor = el.bytepos + _fixed_width(el, structs) if not _variable(el, structs) else 0
            else:  # ignored after a variable-size element: make it a lie now and then
                el.bytepos = draw(st.none() | st.integers(0, 40))
            variable_seen = variable_seen or _variable(el, structs)
            s.elements.append(el)
            if el.counter:
                s.counters.append(name)
            elif el.type in structs and el.count == 1:
                s.counters += [f"{name}.{p}" for p in structs[el.type].counters]
        structs[s.name] = s
    return structs, draw(st.booleans())


def render(structs: dict[str, Struct], ddl4: bool) -> str:
    order = {"<": "LE", ">": "BE"}
    out = ["<ddl><structs>"]
    for s in structs.values():
        out.append(f'<struct name="{s.name}" alignment="{s.align}" version="1">')
        for el in s.elements:
            pos = f' bytepos="{el.bytepos}"' if el.bytepos is not None else ""
            if ddl4:
                out.append(
                    f'<element name="{el.name}" type="{el.type}" arraysize="{el.count}">'
                    f'<serialized byteorder="{order[el.order]}"{pos}/>'
                    f'<deserialized alignment="{el.align}"/></element>'
                )
            else:
                out.append(
                    f'<element name="{el.name}" type="{el.type}" arraysize="{el.count}"'
                    f'{pos} byteorder="{order[el.order]}" alignment="{el.align}"/>'
                )
        out.append("</struct>")
    out.append("</structs></ddl>")
    return "".join(out)


# -- values and the independent encoder -----------------------------------------------------------


def _lookup(values: dict, path: str) -> int:
    for part in path.split("."):
        values = values[part]
    return values


def _scalar(draw, type_name: str, counter: bool):
    code = STRUCT_CODES[type_name]
    if counter:
        return draw(st.integers(0, 3))
    if code == "?":
        return draw(st.booleans())
    if code in "fd":
        return draw(st.floats(allow_nan=False, width=32 if code == "f" else 64))
    bits = struct.calcsize(code) * 8
    if code.islower():
        return draw(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1))
    return draw(st.integers(0, (1 << bits) - 1))


def draw_values(draw, s: Struct, structs: dict[str, Struct]) -> dict:
    """One instance's values, as the decoder's `to_pylist` shows them."""
    values: dict = {}
    for el in s.elements:
        n = _lookup(values, el.count) if isinstance(el.count, str) else el.count
        if el.type in structs:
            items = [draw_values(draw, structs[el.type], structs) for _ in range(n)]
        else:
            items = [_scalar(draw, el.type, el.counter) for _ in range(n)]
        values[el.name] = items[0] if el.count == 1 else items
    return values


def encode(s: Struct, values: dict, structs, layout: str, out: bytearray, base: int) -> int:
    """Write one instance at `base` (growing `out`); returns its size in the layout."""
    cursor = end = 0
    after_variable = False
    for el in s.elements:
        if layout == "serialized":
            rel = el.bytepos if not after_variable else cursor
        else:
            rel = -(-cursor // el.align) * el.align
        value = values[el.name]
        items = [value] if el.count == 1 else value
        at = base + rel
        if el.type in structs:
            for item in items:
                at += encode(structs[el.type], item, structs, layout, out, at)
        else:
            code = STRUCT_CODES[el.type]
            size = struct.calcsize(code)
            order = el.order if layout == "serialized" else "<"
            for item in items:
                if len(out) < at + size:
                    out.extend(bytes(at + size - len(out)))
                struct.pack_into(order + code, out, at, item)
                at += size
        cursor = at - base
        end = max(end, cursor) if layout == "serialized" else cursor
        after_variable = after_variable or _variable(el, structs)
    if layout == "deserialized":
        end = -(-end // s.align) * s.align
    if len(out) < base + end:
        out.extend(bytes(base + end - len(out)))
    return end


def _expected(values, s: Struct, structs) -> dict:
    """Values as Arrow hands them back: float32 rounded."""
    out = {}
    for el in s.elements:
        v = values[el.name]
        if el.type in structs:
            sub = structs[el.type]
            v = (
                _expected(v, sub, structs)
                if el.count == 1
                else [_expected(x, sub, structs) for x in v]
            )
        elif el.type == "tFloat32":
            f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]  # noqa: E731
            v = f32(v) if el.count == 1 else [f32(x) for x in v]
        out[el.name] = v
    return out


@pytest.mark.parametrize("run_items", [ddl_decode.RUN_ITEMS, 0], ids=["gather", "runs"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(description=descriptions(), rows=st.integers(0, 8), data=st.data())
def test_dynamic_layouts_match_independent_encoder(run_items, description, rows, data):
    """Both paths of a dynamic array of fixed-size structs (instance gather; row runs,
    RUN_ITEMS 0) decode what the independent encoder wrote."""
    with mock.patch.object(ddl_decode, "RUN_ITEMS", run_items):
        _check_layouts(description, rows, data)


def _check_layouts(description, rows, data):
    structs, ddl4 = description
    top = list(structs.values())[-1]
    ddl = parse_ddl(render(structs, ddl4))
    values = [draw_values(data.draw, top, structs) for _ in range(rows)]
    want = [_expected(v, top, structs) for v in values]
    for layout in ("serialized", "deserialized"):
        blob, offsets, lengths, samples = bytearray(), [], [], []
        for v in values:
            blob += bytes(data.draw(st.integers(0, 9)))  # unaligned starts, gaps between rows
            one = bytearray()
            size = encode(top, v, structs, layout, one, 0)
            assert size <= len(one)
            slack = data.draw(st.integers(0, 3))
            offsets.append(len(blob))
            lengths.append(len(one) + slack)
            samples.append(bytes(one))
            blob += one + b"\xa5" * slack
        blob += bytes(data.draw(st.integers(0, 3)))
        table = decode(
            ddl,
            top.name,
            bytes(blob),
            np.array(offsets, dtype=np.int64),
            np.array(lengths, dtype=np.int64),
            layout=layout,
        )
        assert table.num_rows == rows
        assert table.to_pylist() == want
        if layout == "serialized":
            ser = samples
        else:
            des = samples
    if static_size(ddl, top.name, "serialized") is None:
        assert any(_variable(el, structs) for el in top.elements)
    for s_row, d_row in zip(ser, des, strict=True):
        # the deserialized encoding pads the struct to its alignment, convert does the same
        assert convert(ddl, top.name, s_row, "serialized", "deserialized") == d_row
        assert convert(ddl, top.name, d_row, "deserialized", "serialized") == s_row


# -- hand-written layouts --------------------------------------------------------------------

OBJECTS = """<ddl><structs>
<struct name="tPoint" alignment="4">
 <element name="x" type="tFloat32" arraysize="1" bytepos="0" byteorder="LE" alignment="4"/>
 <element name="y" type="tFloat32" arraysize="1" bytepos="4" byteorder="LE" alignment="4"/>
</struct>
<struct name="tHeader" alignment="4">
 <element name="stamp" type="tInt64" arraysize="1" bytepos="0" byteorder="LE" alignment="8"/>
 <element name="count" type="tUInt16" arraysize="1" bytepos="8" byteorder="BE" alignment="2"/>
</struct>
<struct name="tObject" alignment="4">
 <element name="id" type="tUInt16" arraysize="1" bytepos="0" byteorder="LE" alignment="2"/>
 <element name="n" type="tUInt8" arraysize="1" bytepos="2" byteorder="LE" alignment="1"/>
 <element name="outline" type="tPoint" arraysize="n" bytepos="3" byteorder="LE" alignment="4"/>
 <element name="score" type="tFloat32" arraysize="1" bytepos="0" byteorder="LE" alignment="4"/>
</struct>
<struct name="tObjectList" alignment="8">
 <element name="hdr" type="tHeader" arraysize="1" bytepos="0" byteorder="LE" alignment="8"/>
 <element name="objects" type="tObject" arraysize="hdr.count" bytepos="10" byteorder="LE"
   alignment="4"/>
 <element name="crc" type="tUInt32" arraysize="1" bytepos="0" byteorder="LE" alignment="4"/>
</struct>
</structs></ddl>"""


def _object_list_serialized(stamp, objects, crc) -> bytes:
    out = struct.pack("<q", stamp) + struct.pack(">H", len(objects))
    for oid, points, score in objects:
        out += struct.pack("<HB", oid, len(points))
        out += b"".join(struct.pack("<ff", x, y) for x, y in points)
        out += struct.pack("<f", score)
    return out + struct.pack("<I", crc)


def test_object_list_count_inside_nested_header():
    """A perception-style list: the object count sits in a nested header (`hdr.count`), each
    object holds a dynamic outline, so objects have different sizes."""
    ddl = parse_ddl(OBJECTS)
    frames = [
        (1, [(7, [(1.0, 2.0)], 0.5), (8, [], 0.25), (9, [(3.0, 4.0), (5.0, 6.0)], 1.0)], 11),
        (2, [], 22),
        (3, [(4, [(0.5, -0.5)] * 3, -1.0)], 33),
    ]
    rows = [_object_list_serialized(*f) for f in frames]
    offsets = np.cumsum([0] + [len(r) for r in rows[:-1]])
    table = decode(ddl, "tObjectList", b"".join(rows), offsets, np.array([len(r) for r in rows]))
    got = table.to_pylist()
    assert [r["hdr"] for r in got] == [{"stamp": s, "count": len(o)} for s, o, _ in frames]
    assert [r["crc"] for r in got] == [11, 22, 33]
    assert [[(o["id"], len(o["outline"]), o["score"]) for o in r["objects"]] for r in got] == [
        [(oid, len(p), score) for oid, p, score in objs] for _, objs, _ in frames
    ]
    assert got[0]["objects"][2]["outline"] == [{"x": 3.0, "y": 4.0}, {"x": 5.0, "y": 6.0}]
    # the deserialized layout of the same data, via the element-by-element converter
    des = [convert(ddl, "tObjectList", r, "serialized", "deserialized") for r in rows]
    d_off = np.cumsum([0] + [len(r) for r in des[:-1]])
    d_table = decode(
        ddl,
        "tObjectList",
        b"".join(des),
        d_off,
        np.array([len(r) for r in des]),
        layout="deserialized",
    )
    assert d_table.to_pylist() == got
    # frame 0 deserialized, by hand: hdr = stamp @0, count @8, padded to its alignment 4 ->
    # 12 bytes; object 0 @12: id, n, a pad byte, outline @16 (alignment 4), score @24
    assert struct.unpack_from("<HB", des[0], 12) == (7, 1)
    assert struct.unpack_from("<fff", des[0], 16) == (1.0, 2.0, 0.5)


def test_count_path_must_name_an_integer_scalar():
    bad = [
        ("<struct name='S'><element name='a' type='tUInt8' arraysize='x.n'/></struct>", "earlier"),
        (
            "<ddl><structs><struct name='H'><element name='n' type='tUInt8'/></struct>"
            "<struct name='S'><element name='h' type='H' arraysize='2'/>"
            "<element name='a' type='tUInt8' arraysize='h.n'/></struct></structs></ddl>",
            "non-array",
        ),
        (
            "<ddl><structs><struct name='H'><element name='n' type='tUInt8'/></struct>"
            "<struct name='S'><element name='h' type='H'/>"
            "<element name='a' type='tUInt8' arraysize='h.m'/></struct></structs></ddl>",
            "no element",
        ),
        (
            "<ddl><structs><struct name='H'><element name='f' type='tFloat32'/></struct>"
            "<struct name='S'><element name='h' type='H'/>"
            "<element name='a' type='tUInt8' arraysize='h.f'/></struct></structs></ddl>",
            "integer scalar",
        ),
    ]
    for text, match in bad:
        with pytest.raises(DDLError, match=match):
            parse_ddl(text)


# -- malformed payloads ---------------------------------------------------------------------------

LISTS = """<ddl><structs>
<struct name="P" alignment="1">
 <element name="k" type="tUInt8" arraysize="1" bytepos="0" byteorder="LE" alignment="1"/>
 <element name="v" type="tInt16" arraysize="k" bytepos="1" byteorder="LE" alignment="1"/>
</struct>
<struct name="S" alignment="1">
 <element name="n" type="{count}" arraysize="1" bytepos="0" byteorder="{order}" alignment="1"/>
 <element name="items" type="{item}" arraysize="n" bytepos="{at}" byteorder="LE"
   alignment="1"/>
</struct></structs></ddl>"""


@pytest.mark.parametrize("item", ["tUInt32", "P"])
@pytest.mark.parametrize("layout", ["serialized", "deserialized"])
@pytest.mark.parametrize(
    ("count", "order", "raw"),
    [
        ("tUInt64", "LE", struct.pack("<Q", 0xFFFF_FFFF_FFFF_FFFF)),
        ("tUInt64", "LE", struct.pack("<Q", 1 << 40)),
        ("tInt64", "LE", struct.pack("<q", -1)),
        ("tInt32", "BE", struct.pack(">i", -(1 << 31))),
        ("tUInt32", "BE", struct.pack(">I", 0xFFFF_FFFF)),
        ("tUInt32", "LE", struct.pack("<I", 5)),  # one item more than the sample holds
    ],
)
def test_lying_counts_raise_at_their_offset_without_allocating(item, layout, count, order, raw):
    at = len(raw)
    ddl = parse_ddl(LISTS.format(count=count, order=order, item=item, at=at))
    if layout == "deserialized" and order == "BE":
        raw = raw[::-1]  # the deserialized layout is host (little endian) order
    # four u32 items, or one P of 5 bytes and a cut-off second one
    good = struct.pack("<IIII", 1, 2, 3, 4) if item == "tUInt32" else b"\x02\x01\x00\x02\x00\x03"
    prefix = b"\x07" * 13  # the bad row is the second sample, at an odd offset
    first = struct.pack("<Q" if "64" in count else "<I", 0)[: len(raw)]
    blob = prefix + first + raw + good
    offsets = np.array([len(prefix), len(prefix) + len(first)], dtype=np.int64)
    lengths = np.array([len(first), len(raw) + len(good)], dtype=np.int64)
    tracemalloc.start()
    try:
        with pytest.raises(DDLError, match=r"count|past the end") as err:
            decode(ddl, "S", blob, offsets, lengths, layout=layout)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if item == "P" and raw == struct.pack("<I", 5):  # the count fits, the 2nd item does not
        assert err.value.offset == offsets[1] + at + 6
    else:
        assert err.value.offset == offsets[1] + at  # the dynamic array of the bad row
    assert peak < 1 << 20
    with pytest.raises(DDLError) as err:
        convert(ddl, "S", blob[offsets[1] :], layout, layout)
    assert err.value.offset is not None


def test_fixed_count_of_variable_structs_is_bounded_by_the_sample():
    ddl = parse_ddl(
        "<ddl><structs><struct name='P'><element name='k' type='tUInt8' bytepos='0'/>"
        "<element name='v' type='tUInt8' arraysize='k' bytepos='1'/></struct>"
        "<struct name='S'><element name='items' type='P' arraysize='4000000000' bytepos='0'/>"
        "</struct></structs></ddl>"
    )
    with pytest.raises(DDLError, match="count 4000000000") as err:
        decode(ddl, "S", b"\x01\x02\x00", np.array([0]), np.array([3]))
    assert err.value.offset == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(description=descriptions(), data=st.data())
def test_damaged_dynamic_samples_give_typed_errors_only(description, data):
    """Random byte damage and truncation of valid samples: decoding either succeeds or raises
    DDLError with an offset inside the damaged sample; nothing else escapes."""
    structs, ddl4 = description
    top = list(structs.values())[-1]
    ddl = parse_ddl(render(structs, ddl4))
    layout = data.draw(st.sampled_from(["serialized", "deserialized"]))
    one = bytearray()
    encode(top, draw_values(data.draw, top, structs), structs, layout, one, 0)
    for _ in range(data.draw(st.integers(1, 4))):
        if one:
            at = data.draw(st.integers(0, len(one) - 1))
            one[at] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    cut = data.draw(st.integers(0, len(one)))
    blob = b"\x00" * 3 + bytes(one[:cut]) + b"\xff" * 64  # bytes beyond the sample are not its
    try:
        table = decode(ddl, top.name, blob, np.array([3]), np.array([cut]), layout=layout)
    except DDLError as exc:
        assert isinstance(exc.offset, int)
        assert exc.offset >= 3
    else:
        assert table.num_rows == 1


def test_fixed_arraysize_zero_is_one_element_as_in_the_vendor_codec():
    ddl = parse_ddl("<struct name='S'><element name='a' type='tUInt16' arraysize='0'/></struct>")
    assert ddl.structs["S"].elements[0].arraysize == 1
    table = decode(ddl, "S", b"\x01\x02", np.array([0]), np.array([2]))
    assert table.to_pylist() == [{"a": 0x0201}]

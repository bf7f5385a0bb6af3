"""Single-sample DDL layout conversion (serialized <-> deserialized).

The vendor reader hands out ADTF 2 DDL samples (and ADTF 3 media-description samples) in the
deserialized layout while files store the serialized one; `convert` produces those bytes, and
the writer uses it the other way round.
"""

from __future__ import annotations

import struct as pystruct

from bridge_lake.formats.adtf.ddl import (
    DDL,
    Element,
    Layout,
    Struct,
    align,
    array_count,
    element_offset,
    is_bitfield,
    is_variable,
)
from bridge_lake.formats.adtf.errors import DDLError


def convert(ddl: DDL, struct_name: str, data: bytes, src: Layout, dst: Layout) -> bytes:
    """Re-lay one sample from layout `src` into layout `dst` (e.g. serialized -> the vendor's
    deserialized bytes). Values are copied element by element, so byte order, alignment gaps,
    bit fields and dynamic arrays all follow the description."""
    out = bytearray()
    try:
        _convert_struct(ddl, ddl.struct(struct_name), memoryview(data), 0, src, out, 0, dst)
    except pystruct.error as exc:
        raise DDLError(f"{struct_name}: sample of {len(data)} bytes too short ({exc})") from None
    return bytes(out)


def _width(ddl: DDL, e: Element, code: str, count: int, layout: Layout) -> int:
    if layout == "serialized" and is_bitfield(ddl, e):
        return ((e.bitpos or 0) + e.numbits + 7) // 8
    return int(code[1]) * count


_STRUCT_CODES = {"u1": "B", "u2": "H", "u4": "I", "u8": "Q", "i1": "b", "i2": "h", "i4": "i"}
_STRUCT_CODES.update({"i8": "q", "f4": "f", "f8": "d"})


def _convert_struct(
    ddl: DDL,
    st: Struct,
    src: memoryview,
    sbase: int,
    sl: Layout,
    out: bytearray,
    dbase: int,
    dl: Layout,
) -> tuple[int, int, dict[str, int]]:
    """Copy one struct from `src` at `sbase` (layout sl) into `out` at `dbase` (layout dl);
    returns both end positions and the struct's integer scalars by (dotted) name."""
    ints: dict[str, int] = {}
    s_cur = d_cur = s_end = d_end = 0
    dynamic = False
    for e in st.elements:
        spos = sbase + element_offset(sl, e, s_cur, dynamic)
        dpos = dbase + element_offset(dl, e, d_cur, dynamic)
        code = ddl.numpy_code(e.type)
        if isinstance(e.arraysize, str):
            count = array_count(ints, st.name, e, "converted", offset=spos)
            unit = int(code[1]) if code is not None else 1
            if count < 0 or count * unit > max(len(src) - spos, 0):
                raise DDLError(
                    f"{st.name}.{e.name}: array count {count} runs past the end of the "
                    f"{len(src)}-byte sample",
                    offset=spos,
                )
        else:
            count = e.arraysize
        dynamic = dynamic or is_variable(ddl, e)
        if code is None:
            sub = ddl.struct(e.type)
            s, d = spos, dpos
            for _ in range(count):
                s, d, sub_ints = _convert_struct(ddl, sub, src, s, sl, out, d, dl)
                if e.arraysize == 1:
                    ints.update({f"{e.name}.{k}": v for k, v in sub_ints.items()})
            s_w, d_w = s - spos, d - dpos
        else:
            fmt = _STRUCT_CODES[code]
            if spos + _width(ddl, e, code, count, sl) > len(src):
                raise DDLError(
                    f"{st.name}.{e.name} runs past the end of the {len(src)}-byte sample",
                    offset=spos,
                )
            value = _read(ddl, e, code, fmt, count, src, spos, sl)
            _write(ddl, e, fmt, count, value, out, dpos, dl)
            if count == 1 and code[0] in "iu":
                ints[e.name] = value[0]
            s_w, d_w = _width(ddl, e, code, count, sl), _width(ddl, e, code, count, dl)
        s_cur, d_cur = spos - sbase + s_w, dpos - dbase + d_w
        s_end = max(s_end, s_cur) if sl == "serialized" else s_cur
        d_end = max(d_end, d_cur) if dl == "serialized" else d_cur
    if sl == "deserialized":
        s_end = align(s_end, st.alignment)
    if dl == "deserialized":
        d_end = align(d_end, st.alignment)
    _grow(out, dbase + d_end)
    return sbase + s_end, dbase + d_end, ints


def _grow(out: bytearray, size: int) -> None:
    if len(out) < size:
        out.extend(bytes(size - len(out)))


def _read(ddl, e, code, fmt, count, src, pos, layout) -> tuple:
    if layout == "serialized" and is_bitfield(ddl, e):
        nbytes = ((e.bitpos or 0) + e.numbits + 7) // 8
        word = int.from_bytes(src[pos : pos + nbytes], "little" if e.byteorder == "<" else "big")
        value = (word >> (e.bitpos or 0)) & ((1 << e.numbits) - 1)
        if code[0] == "i" and value >> (e.numbits - 1):
            value -= 1 << e.numbits
        return (value,)
    order = e.byteorder if layout == "serialized" else "<"
    return pystruct.unpack_from(f"{order}{count}{fmt}", src, pos)


def _write(ddl, e, fmt, count, values, out, pos, layout) -> None:
    if layout == "serialized" and is_bitfield(ddl, e):
        nbytes = ((e.bitpos or 0) + e.numbits + 7) // 8
        _grow(out, pos + nbytes)
        shift, mask = e.bitpos or 0, (1 << e.numbits) - 1
        endian = "little" if e.byteorder == "<" else "big"
        word = int.from_bytes(out[pos : pos + nbytes], endian) & ~(mask << shift)
        word |= (values[0] & mask) << shift
        out[pos : pos + nbytes] = word.to_bytes(nbytes, endian)
        return
    order = e.byteorder if layout == "serialized" else "<"
    _grow(out, pos + pystruct.calcsize(f"{count}{fmt}"))
    pystruct.pack_into(f"{order}{count}{fmt}", out, pos, *values)

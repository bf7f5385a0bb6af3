"""DDL (data definition language): parse descriptions, decode struct samples to Arrow.

A DDL struct has two byte layouts (spec §10.2): *serialized* (each element at its `bytepos` in
its `byteorder`; what ADTF 2 files store) and *deserialized* (declaration order, each element
aligned, host byte order; what ADTF 3 sample-copy buffers and the vendor reader hold).
`decode` turns many samples of one struct into an Arrow table in one vectorized pass per
element: the per-row start offsets are a numpy array, so neither rows nor points ever become
Python objects. `convert` re-lays a single sample (needed to hand out the vendor's bytes).
"""

from __future__ import annotations

import re
import struct as pystruct
from dataclasses import dataclass
from typing import Literal

import defusedxml.ElementTree as SafeET
import numpy as np
import pyarrow as pa
from defusedxml import DefusedXmlException

from bridge_lake.formats.adtf.errors import DDLError

Layout = Literal["serialized", "deserialized"]

BASE_TYPES: dict[str, str] = {
    "tBool": "u1",
    "tChar": "i1",
    "tInt8": "i1",
    "tUInt8": "u1",
    "tInt16": "i2",
    "tUInt16": "u2",
    "tInt32": "i4",
    "tUInt32": "u4",
    "tInt64": "i8",
    "tUInt64": "u8",
    "tFloat32": "f4",
    "tFloat64": "f8",
}
"""Predefined DDL datatypes as numpy codes; files may omit the <datatypes> section."""

_BYTEORDERS = {"LE": "<", "BE": ">", "little": "<", "big": ">", "Intel": "<", "Motorola": ">"}
_GATHER_BLOCK = 1 << 22
"""Bytes of gather index built at once: bounds the temporary memory of a decode."""


@dataclass(frozen=True)
class Enum:
    name: str
    type: str
    values: dict[str, int]


@dataclass(frozen=True)
class Element:
    name: str
    type: str
    arraysize: int | str
    """A count, or the name of an earlier element holding the count (a dynamic array)."""
    bytepos: int | None
    bitpos: int | None
    numbits: int | None
    byteorder: str
    """'<' or '>' for the serialized layout."""
    alignment: int
    value: str | None = None
    """A constant's value (DDL `value` attribute), informational."""


@dataclass(frozen=True)
class Struct:
    name: str
    alignment: int
    elements: tuple[Element, ...]
    version: str = "1"


@dataclass(frozen=True)
class DDL:
    datatypes: dict[str, str]
    """Datatype name -> numpy code (the predefined ones plus any declared)."""
    enums: dict[str, Enum]
    structs: dict[str, Struct]
    streams: dict[str, str]
    """ADTF 2 sidecar: stream name -> struct describing its samples."""
    constants: dict[str, str]

    def struct(self, name: str) -> Struct:
        try:
            return self.structs[name]
        except KeyError:
            raise DDLError(f"DDL has no struct {name!r}") from None

    def numpy_code(self, type_name: str) -> str | None:
        """The numpy code of a base type or an enum's base type; None for a struct."""
        enum = self.enums.get(type_name)
        if enum is not None:
            type_name = enum.type
        return self.datatypes.get(type_name)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _int(text: str | None, what: str, *, default: int | None = None) -> int | None:
    if text is None or text.strip() == "":
        return default
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise DDLError(f"{what}: {text!r} is not an integer") from None


_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>", re.S)


def _parse_root(text: str):
    body = _XML_DECL.sub("", text, count=1)
    try:
        root = SafeET.fromstring(body)
    except DefusedXmlException as exc:
        raise DDLError(f"DDL uses forbidden XML constructs: {exc}") from None
    except SafeET.ParseError:
        root = None
    if root is None or _local(root.tag) != "ddl":
        try:
            root = SafeET.fromstring(f"<ddl>{body}</ddl>")
        except DefusedXmlException as exc:
            raise DDLError(f"DDL uses forbidden XML constructs: {exc}") from None
        except SafeET.ParseError as exc:
            raise DDLError(f"DDL is not well-formed XML: {exc}") from None
    return root


def parse_ddl(text: str | bytes) -> DDL:
    """Parse a DDL 3 or DDL 4 description, a full `<ddl>` or a bare `<struct>` fragment.

    defusedxml refuses entity declarations, so a hostile description cannot expand itself.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    root = _parse_root(text)
    datatypes = dict(BASE_TYPES)
    enums: dict[str, Enum] = {}
    structs: dict[str, Struct] = {}
    streams: dict[str, str] = {}
    constants: dict[str, str] = {}
    for el in root.iter():
        tag = _local(el.tag)
        if tag == "datatype":
            name = el.get("name") or el.get("type")
            if name and name not in datatypes:
                bits = _int(el.get("size"), f"datatype {name} size")
                if bits not in (8, 16, 32, 64):
                    raise DDLError(f"datatype {name!r} has unsupported size {bits} bits")
                datatypes[name] = f"u{bits // 8}"
        elif tag == "constant" and el.get("name"):
            constants[el.get("name")] = el.get("value", "")
    for el in root.iter():
        tag = _local(el.tag)
        if tag == "enum":
            values = {}
            for item in el:
                if _local(item.tag) == "element":
                    raw = item.get("value", "")
                    raw = constants.get(raw, raw)
                    values[item.get("name", "")] = _int(raw, f"enum {el.get('name')} value")
            enums[el.get("name", "")] = Enum(el.get("name", ""), el.get("type", ""), values)
        elif tag == "struct" and el.get("name") and any(_local(c.tag) == "element" for c in el):
            st = _parse_struct(el)
            structs[st.name] = st
        elif tag == "stream" and el.get("name"):
            inner = [c for c in el if _local(c.tag) == "struct"]
            target = inner[0].get("type") if inner else el.get("type")
            if target:
                streams[el.get("name")] = target
        elif tag == "struct" and el.get("name") and not len(el):
            structs.setdefault(el.get("name"), Struct(el.get("name"), 1, ()))
    ddl = DDL(datatypes, enums, structs, streams, constants)
    _validate(ddl)
    return ddl


def _parse_struct(el) -> Struct:
    name = el.get("name", "")
    elements = []
    for child in el:
        if _local(child.tag) != "element":
            continue
        attrs = dict(child.attrib)
        for sub in child:
            sub_tag = _local(sub.tag)
            if sub_tag in ("serialized", "deserialized"):
                attrs.update(sub.attrib)
        ename = attrs.get("name", "")
        what = f"struct {name} element {ename}"
        arraysize_raw = attrs.get("arraysize", "1").strip()
        arraysize: int | str
        if re.fullmatch(r"[0-9]+|0x[0-9a-fA-F]+", arraysize_raw):
            arraysize = int(arraysize_raw, 0)
        elif arraysize_raw == "dynamic":
            raise DDLError(f"{what}: arraysize 'dynamic' (count unknown to DDL) is not decodable")
        else:
            arraysize = arraysize_raw
        order = attrs.get("byteorder", "LE")
        if order not in _BYTEORDERS:
            raise DDLError(f"{what}: unknown byteorder {order!r}")
        bytepos = _int(attrs.get("bytepos"), f"{what} bytepos")
        bitpos = _int(attrs.get("bitpos"), f"{what} bitpos")
        numbits = _int(attrs.get("numbits"), f"{what} numbits")
        alignment = _int(attrs.get("alignment"), f"{what} alignment", default=1)
        if bytepos is not None and bytepos < 0:
            bytepos = None
        if bitpos is not None and not 0 <= bitpos <= 7:
            raise DDLError(f"{what}: bitpos {bitpos} outside 0..7")
        if alignment is None or alignment < 1 or alignment & (alignment - 1):
            raise DDLError(f"{what}: alignment {alignment} is not a power of two")
        elements.append(
            Element(
                name=ename,
                type=attrs.get("type", ""),
                arraysize=arraysize,
                bytepos=bytepos,
                bitpos=bitpos,
                numbits=numbits,
                byteorder=_BYTEORDERS[order],
                alignment=alignment,
                value=attrs.get("value"),
            )
        )
    alignment = _int(el.get("alignment"), f"struct {name} alignment", default=1)
    if alignment is None or alignment < 1 or alignment & (alignment - 1):
        raise DDLError(f"struct {name}: alignment {alignment} is not a power of two")
    return Struct(name, alignment, tuple(elements), el.get("version", "1"))


def _validate(ddl: DDL) -> None:
    """Resolve every type, check dynamic array counts and bit fields, refuse cycles."""
    for st in ddl.structs.values():
        seen: dict[str, Element] = {}
        for e in st.elements:
            code = ddl.numpy_code(e.type)
            if code is None and e.type not in ddl.structs:
                raise DDLError(f"struct {st.name} element {e.name}: unknown type {e.type!r}")
            if isinstance(e.arraysize, str):
                ref = seen.get(e.arraysize)
                if ref is None:
                    raise DDLError(
                        f"struct {st.name} element {e.name}: arraysize {e.arraysize!r} names "
                        "no earlier element"
                    )
                ref_code = ddl.numpy_code(ref.type)
                if ref_code is None or ref_code[0] not in "iu" or ref.arraysize != 1:
                    raise DDLError(
                        f"struct {st.name} element {e.name}: arraysize element "
                        f"{e.arraysize!r} is not an integer scalar"
                    )
            if e.numbits is not None:
                if code is None or code[0] == "f":
                    raise DDLError(f"struct {st.name} element {e.name}: bit field of {e.type}")
                if not 1 <= e.numbits <= 8 * int(code[1]) or e.arraysize != 1:
                    raise DDLError(f"struct {st.name} element {e.name}: bad numbits {e.numbits}")
            seen[e.name] = e
    for name in ddl.structs:
        _check_cycle(ddl, name, ())


def _check_cycle(ddl: DDL, name: str, stack: tuple[str, ...]) -> None:
    if name in stack:
        raise DDLError(f"struct {name} contains itself ({' -> '.join((*stack, name))})")
    for e in ddl.structs[name].elements:
        if e.type in ddl.structs:
            _check_cycle(ddl, e.type, (*stack, name))


def _align(value, alignment: int):
    return (value + alignment - 1) // alignment * alignment


def _is_bitfield(ddl: DDL, e: Element) -> bool:
    code = ddl.numpy_code(e.type)
    return (
        e.numbits is not None
        and code is not None
        and (e.numbits != 8 * int(code[1]) or (e.bitpos or 0) != 0)
    )


def static_size(ddl: DDL, name: str, layout: Layout) -> int | None:
    """Byte size of a struct in a layout, or None if it holds a dynamic array."""
    st = ddl.struct(name)
    end = cursor = 0
    for e in st.elements:
        if isinstance(e.arraysize, str):
            return None
        code = ddl.numpy_code(e.type)
        if code is None:
            elem = static_size(ddl, e.type, layout)
            if elem is None:
                return None
        else:
            elem = int(code[1])
        if layout == "serialized":
            pos = e.bytepos if e.bytepos is not None else cursor
            if _is_bitfield(ddl, e):
                width = ((e.bitpos or 0) + e.numbits + 7) // 8
            else:
                width = elem * e.arraysize
            cursor = pos + width
            end = max(end, cursor)
        else:
            cursor = _align(cursor, e.alignment) + elem * e.arraysize
            end = cursor
    return end if layout == "serialized" else _align(end, st.alignment)


# ---------------------------------------------------------------------------------------------
# Vectorized decode


def _gather(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Rows of `width` bytes starting at each `pos`, as an (n, width) uint8 array."""
    n = len(pos)
    out = np.empty((n, width), dtype=np.uint8)
    if n == 0 or width == 0:
        return out
    step = max(1, _GATHER_BLOCK // (8 * width))
    cols = np.arange(width, dtype=np.int64)
    for a in range(0, n, step):
        idx = pos[a : a + step, None] + cols
        np.take(buf, idx, out=out[a : a + step])
    return out


def read_scalars(buf: np.ndarray, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """One value of `dtype` at each position, native byte order."""
    size = dtype.itemsize
    if size == 1:
        return buf[pos].view(dtype.newbyteorder("="))
    if len(pos) and not np.any(pos % size):
        usable = len(buf) - len(buf) % size
        values = buf[:usable].view(dtype)[pos // size]
    else:
        values = _gather(buf, pos, size).view(dtype).reshape(len(pos))
    return values.astype(dtype.newbyteorder("="), copy=False)


def _bitfield(buf: np.ndarray, pos: np.ndarray, e: Element, code: str) -> np.ndarray:
    bitpos = e.bitpos or 0
    nbytes = (bitpos + e.numbits + 7) // 8
    raw = _gather(buf, pos, nbytes).astype(np.uint64)
    weights = np.uint64(256) ** np.arange(nbytes, dtype=np.uint64)
    if e.byteorder == ">":
        weights = weights[::-1]
    word = (raw * weights).sum(axis=1, dtype=np.uint64) >> np.uint64(bitpos)
    word &= np.uint64((1 << e.numbits) - 1)
    out = word.astype(np.dtype(code))
    if code[0] == "i":
        sign = np.uint64(1 << (e.numbits - 1))
        out = np.where(word & sign, word.astype(np.int64) - (1 << e.numbits), out).astype(code)
    return out


class _Decoder:
    def __init__(self, ddl: DDL, buf: np.ndarray, layout: Layout, path: str | None) -> None:
        self.ddl = ddl
        self.buf = buf
        self.layout = layout
        self.path = path

    def fail(self, message: str, pos: np.ndarray, bad: np.ndarray) -> DDLError:
        first = int(np.flatnonzero(bad)[0])
        return DDLError(message, path=self.path, offset=int(pos[first]))

    def struct(
        self, name: str, base: np.ndarray, limit: np.ndarray
    ) -> tuple[list[tuple[pa.Field, pa.Array]], np.ndarray]:
        """Decode struct `name` at every row start `base`; returns columns and row ends."""
        st = self.ddl.struct(name)
        serialized = self.layout == "serialized"
        columns: list[tuple[pa.Field, pa.Array]] = []
        ints: dict[str, np.ndarray] = {}
        cursor: int | np.ndarray = 0
        end: int | np.ndarray = 0
        dynamic = False
        for e in st.elements:
            if serialized:
                rel = e.bytepos if e.bytepos is not None and not dynamic else cursor
            else:
                rel = _align(cursor, e.alignment)
            pos = base + rel
            code = self.ddl.numpy_code(e.type)
            count = ints[e.arraysize] if isinstance(e.arraysize, str) else e.arraysize
            if isinstance(count, np.ndarray):
                dynamic = True
                if np.any(count < 0):
                    raise self.fail(f"{name}.{e.name}: negative array count", pos, count < 0)
                count = count.astype(np.int64)
            if code is None:
                array, width = self._struct_element(e, pos, count, limit)
            else:
                array, width, values = self._base_element(e, code, pos, count, limit)
                if values is not None and code[0] in "iu":
                    ints[e.name] = values
            meta = {}
            if e.type in self.ddl.enums:
                meta[b"ddl_enum"] = e.type.encode()
            if e.value is not None:
                meta[b"ddl_value"] = e.value.encode()
            columns.append((pa.field(e.name, array.type, metadata=meta or None), array))
            cursor = rel + width
            end = np.maximum(end, cursor) if serialized else cursor
        if not serialized:
            end = _align(end, st.alignment)
        return columns, base + end

    def _check(self, what: str, pos: np.ndarray, width, limit: np.ndarray) -> None:
        bad = pos + width > limit
        if np.any(bad):
            raise self.fail(f"{what} runs past the end of its sample", pos, bad)

    def _base_element(self, e: Element, code: str, pos, count, limit):
        dtype = np.dtype(code).newbyteorder(e.byteorder if self.layout == "serialized" else "=")
        size = dtype.itemsize
        what = f"element {e.name}"
        if self.layout == "serialized" and _is_bitfield(self.ddl, e):
            width = ((e.bitpos or 0) + e.numbits + 7) // 8
            self._check(what, pos, width, limit)
            values = _bitfield(self.buf, pos, e, code)
            return self._arrow(e, values), width, values
        if isinstance(count, np.ndarray):
            width = count * size
            self._check(what, pos, width, limit)
            starts = np.cumsum(count) - count
            flat = np.repeat(pos - starts * size, count) + np.arange(int(count.sum())) * size
            values = read_scalars(self.buf, flat, dtype)
            offsets = np.concatenate([[0], np.cumsum(count)])
            return pa.LargeListArray.from_arrays(offsets, self._arrow(e, values)), width, None
        width = count * size
        self._check(what, pos, width, limit)
        if count == 1:
            values = read_scalars(self.buf, pos, dtype)
            return self._arrow(e, values), width, values
        flat = (pos[:, None] + np.arange(count, dtype=np.int64) * size).reshape(-1)
        values = read_scalars(self.buf, flat, dtype)
        return pa.FixedSizeListArray.from_arrays(self._arrow(e, values), count), width, None

    def _arrow(self, e: Element, values: np.ndarray) -> pa.Array:
        if e.type == "tBool" or self.ddl.enums.get(e.type, Enum("", "", {})).type == "tBool":
            return pa.array(values != 0)
        return pa.array(values)

    def _struct_element(self, e: Element, pos, count, limit):
        size = static_size(self.ddl, e.type, self.layout)
        if isinstance(count, int) and count == 1:
            cols, ends = self.struct(e.type, pos, limit)
            return _struct_array(cols), ends - pos
        if size is None:
            raise DDLError(
                f"element {e.name}: arrays of the variable-size struct {e.type} are not "
                "decodable in one pass",
                path=self.path,
            )
        step = (
            _align(size, self.ddl.struct(e.type).alignment) if self.layout != "serialized" else size
        )
        if isinstance(count, np.ndarray):
            width = count * step
            self._check(f"element {e.name}", pos, width, limit)
            starts = np.cumsum(count) - count
            flat = np.repeat(pos - starts * step, count) + np.arange(int(count.sum())) * step
            cols, _ = self.struct(e.type, flat, np.repeat(limit, count))
            offsets = np.concatenate([[0], np.cumsum(count)])
            return pa.LargeListArray.from_arrays(offsets, _struct_array(cols)), width
        width = count * step
        self._check(f"element {e.name}", pos, width, limit)
        flat = (pos[:, None] + np.arange(count, dtype=np.int64) * step).reshape(-1)
        cols, _ = self.struct(e.type, flat, np.repeat(limit, count))
        return pa.FixedSizeListArray.from_arrays(_struct_array(cols), count), width


def _struct_array(columns: list[tuple[pa.Field, pa.Array]]) -> pa.StructArray:
    if not columns:
        return pa.StructArray.from_arrays([], fields=[])
    return pa.StructArray.from_arrays([a for _, a in columns], fields=[f for f, _ in columns])


def decode(
    ddl: DDL,
    struct_name: str,
    buf: np.ndarray | bytes | memoryview,
    offsets: np.ndarray,
    lengths: np.ndarray,
    *,
    layout: Layout = "serialized",
    path: str | None = None,
) -> pa.Table:
    """Decode one struct per (offset, length) sample of `buf` into an Arrow table.

    `buf` is typically the whole memory-mapped file and `offsets` the samples' buffer
    positions in it, so nothing is copied before the per-element gathers. Every element is
    bounds-checked against its own sample; a violation is a `DDLError` at the byte offset.
    """
    data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    base = np.asarray(offsets, dtype=np.int64)
    limit = base + np.asarray(lengths, dtype=np.int64)
    if len(base) and (base.min() < 0 or limit.max() > len(data)):
        raise DDLError("sample offsets lie outside the buffer", path=path)
    columns, _ = _Decoder(ddl, data, layout, path).struct(struct_name, base, limit)
    return pa.Table.from_arrays([a for _, a in columns], schema=pa.schema([f for f, _ in columns]))


# ---------------------------------------------------------------------------------------------
# Single-sample layout conversion


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


def _elem_pos(layout: Layout, e: Element, base: int, cursor: int, dynamic: bool) -> int:
    if layout == "serialized":
        return base + (e.bytepos if e.bytepos is not None and not dynamic else cursor)
    return base + _align(cursor, e.alignment)


def _width(ddl: DDL, e: Element, code: str, count: int, layout: Layout) -> int:
    if layout == "serialized" and _is_bitfield(ddl, e):
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
) -> tuple[int, int]:
    """Copy one struct from `src` at `sbase` (layout sl) into `out` at `dbase` (layout dl);
    returns both end positions."""
    ints: dict[str, int] = {}
    s_cur = d_cur = s_end = d_end = 0
    dynamic = False
    for e in st.elements:
        spos = _elem_pos(sl, e, sbase, s_cur, dynamic)
        dpos = _elem_pos(dl, e, dbase, d_cur, dynamic)
        count = ints[e.arraysize] if isinstance(e.arraysize, str) else e.arraysize
        dynamic = dynamic or isinstance(e.arraysize, str)
        code = ddl.numpy_code(e.type)
        if code is None:
            sub = ddl.struct(e.type)
            s, d = spos, dpos
            for _ in range(count):
                s, d = _convert_struct(ddl, sub, src, s, sl, out, d, dl)
            s_w, d_w = s - spos, d - dpos
        else:
            fmt = _STRUCT_CODES[code]
            value = _read(ddl, e, code, fmt, count, src, spos, sl)
            _write(ddl, e, fmt, count, value, out, dpos, dl)
            if count == 1 and code[0] in "iu":
                ints[e.name] = value[0]
            s_w, d_w = _width(ddl, e, code, count, sl), _width(ddl, e, code, count, dl)
        s_cur, d_cur = spos - sbase + s_w, dpos - dbase + d_w
        s_end = max(s_end, s_cur) if sl == "serialized" else s_cur
        d_end = max(d_end, d_cur) if dl == "serialized" else d_cur
    if sl == "deserialized":
        s_end = _align(s_end, st.alignment)
    if dl == "deserialized":
        d_end = _align(d_end, st.alignment)
    _grow(out, dbase + d_end)
    return sbase + s_end, dbase + d_end


def _grow(out: bytearray, size: int) -> None:
    if len(out) < size:
        out.extend(bytes(size - len(out)))


def _read(ddl, e, code, fmt, count, src, pos, layout) -> tuple:
    if layout == "serialized" and _is_bitfield(ddl, e):
        nbytes = ((e.bitpos or 0) + e.numbits + 7) // 8
        word = int.from_bytes(src[pos : pos + nbytes], "little" if e.byteorder == "<" else "big")
        value = (word >> (e.bitpos or 0)) & ((1 << e.numbits) - 1)
        if code[0] == "i" and value >> (e.numbits - 1):
            value -= 1 << e.numbits
        return (value,)
    order = e.byteorder if layout == "serialized" else "<"
    return pystruct.unpack_from(f"{order}{count}{fmt}", src, pos)


def _write(ddl, e, fmt, count, values, out, pos, layout) -> None:
    if layout == "serialized" and _is_bitfield(ddl, e):
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


# ---------------------------------------------------------------------------------------------
# Rendering

_ORDER_NAMES = {"<": "LE", ">": "BE"}
_BITS = {"u1": 8, "i1": 8, "u2": 16, "i2": 16, "u4": 32, "i4": 32, "u8": 64, "i8": 64}
_BITS.update({"f4": 32, "f8": 64})


def render_ddl(ddl: DDL, *, root: str = "adtf:ddl", xmlns: str = 'xmlns:adtf="adtf"') -> str:
    """A DDL 3 document (the ADTF 2 `.description` dialect) for `ddl`, streams included."""
    from xml.sax.saxutils import quoteattr as q

    out = [
        '<?xml version="1.0" encoding="utf-8" standalone="no"?>',
        f"<{root} {xmlns}>",
        " <header>",
        "  <language_version>3.00</language_version>",
        "  <author>bridge_lake</author>",
        "  <date_creation></date_creation>",
        "  <date_change></date_change>",
        "  <description>bridge_lake generated</description>",
        " </header>",
        " <datatypes>",
    ]
    for name, code in ddl.datatypes.items():
        out.append(f'  <datatype name={q(name)} size="{_BITS[code]}" />')
    out.append(" </datatypes>")
    if ddl.constants:
        out.append(" <constants>")
        for name, value in ddl.constants.items():
            out.append(f'  <constant name={q(name)} type="tInt32" value={q(value)} />')
        out.append(" </constants>")
    out.append(" <enums>")
    for enum in ddl.enums.values():
        out.append(f"  <enum name={q(enum.name)} type={q(enum.type)}>")
        for key, value in enum.values.items():
            out.append(f'   <element name={q(key)} value="{value}" />')
        out.append("  </enum>")
    out.append(" </enums>")
    out.append(" <structs>")
    for st in ddl.structs.values():
        out.append(
            f'  <struct alignment="{st.alignment}" name={q(st.name)} version={q(st.version)}>'
        )
        for e in st.elements:
            attrs = [
                f'alignment="{e.alignment}"',
                f"arraysize={q(str(e.arraysize))}",
                f'byteorder="{_ORDER_NAMES[e.byteorder]}"',
            ]
            if e.bytepos is not None:
                attrs.append(f'bytepos="{e.bytepos}"')
            if e.bitpos is not None:
                attrs.append(f'bitpos="{e.bitpos}"')
            if e.numbits is not None:
                attrs.append(f'numbits="{e.numbits}"')
            attrs += [f"name={q(e.name)}", f"type={q(e.type)}"]
            if e.value is not None:
                attrs.append(f"value={q(e.value)}")
            out.append(f"   <element {' '.join(attrs)} />")
        out.append("  </struct>")
    out.append(" </structs>")
    out.append(" <streams>")
    for stream, struct_name in ddl.streams.items():
        out.append(f'  <stream name={q(stream)} type="adtf.core.media_type">')
        out.append(f'   <struct bytepos="0" name={q(struct_name)} type={q(struct_name)} />')
        out.append("  </stream>")
    out.append(" </streams>")
    out.append(f"</{root}>")
    return "\n".join(out) + "\n"

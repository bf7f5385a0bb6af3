"""DDL (data definition language): the description model, safe parsing, layouts, rendering.

A DDL struct has two byte layouts (spec §10.2): *serialized* (each element at its `bytepos` in
its `byteorder`; what ADTF 2 files store) and *deserialized* (declaration order, each element
aligned, host byte order; what ADTF 3 sample-copy buffers and the vendor reader hold).
Decoding many samples to Arrow is `ddl_decode`; re-laying one sample is `ddl_convert`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from bridge_lake.formats.adtf.errors import DDLError

Layout = Literal["serialized", "deserialized"]
T = TypeVar("T")

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
    """A count, or the name of an earlier element holding the count (a dynamic array); the
    name may be a dotted path into an earlier struct element (`header.ui32Count`)."""
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
            # the vendor's codec lays a fixed arraysize of 0 out as 1 element; so do we
            # digits are decimal ("010" is ten; int(x, 0) would refuse the leading zero)
            arraysize = int(arraysize_raw, 16 if arraysize_raw.startswith("0x") else 10) or 1
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
                _count_element(ddl, st, e, seen)
            if e.numbits is not None:
                if code is None or code[0] == "f":
                    raise DDLError(f"struct {st.name} element {e.name}: bit field of {e.type}")
                if not 1 <= e.numbits <= 8 * int(code[1]) or e.arraysize != 1:
                    raise DDLError(f"struct {st.name} element {e.name}: bad numbits {e.numbits}")
            seen[e.name] = e
    for name in ddl.structs:
        _check_cycle(ddl, name, ())


def _count_element(ddl: DDL, st: Struct, e: Element, seen: dict[str, Element]) -> Element:
    """The integer scalar that holds the count of dynamic array `e`: an earlier element of the
    same struct, or a dotted path into an earlier (non-array) struct element, e.g.
    `header.ui32Count` (the DDL codec resolves size names relative to the enclosing struct)."""
    where = f"struct {st.name} element {e.name}: arraysize {e.arraysize!r}"
    first, *rest = str(e.arraysize).split(".")
    ref = seen.get(first)
    if ref is None:
        raise DDLError(f"{where} names no earlier element")
    for part in rest:
        if ref.type not in ddl.structs or ref.arraysize != 1:
            raise DDLError(f"{where}: {ref.name!r} is not a (non-array) struct element")
        inner = {x.name: x for x in ddl.structs[ref.type].elements}
        if part not in inner:
            raise DDLError(f"{where}: struct {ref.type} has no element {part!r}")
        ref = inner[part]
    ref_code = ddl.numpy_code(ref.type)
    if ref_code is None or ref_code[0] not in "iu" or ref.arraysize != 1:
        raise DDLError(f"{where} is not an integer scalar")
    return ref


def _check_cycle(ddl: DDL, name: str, stack: tuple[str, ...]) -> None:
    for e in ddl.structs[name].elements:
        if e.type in (*stack, name):
            chain = " -> ".join((*stack, name, e.type))
            raise DDLError(f"struct {name} element {e.name}: contains itself ({chain})")
        if e.type in ddl.structs:
            _check_cycle(ddl, e.type, (*stack, name))


def align(value, alignment: int):
    return (value + alignment - 1) // alignment * alignment


def element_offset(layout: Layout, e: Element, cursor, after_variable: bool):
    """Where element `e` starts in its struct, `cursor` being where the element before it
    ended: serialized, at its `bytepos` until a variable-size element came before it (then
    at `cursor`, spec §10.2); deserialized, at `cursor` aligned for the element."""
    if layout == "serialized":
        return e.bytepos if e.bytepos is not None and not after_variable else cursor
    return align(cursor, e.alignment)


def array_count(ints: Mapping[str, T], owner: str, e: Element, done: str, **at: Any) -> T:
    """The value of the integer element that the dynamic array `e` (of struct `owner`) names
    as its size; it must have been read before the array (`done`: how, and `at`: the path
    or offset, for the error)."""
    value = ints.get(e.arraysize)  # type: ignore[arg-type]
    if value is None:
        raise DDLError(
            f"{owner}.{e.name}: arraysize {e.arraysize!r} is no integer element {done} before it",
            **at,
        )
    return value


def is_bitfield(ddl: DDL, e: Element) -> bool:
    code = ddl.numpy_code(e.type)
    return (
        e.numbits is not None
        and code is not None
        and (e.numbits != 8 * int(code[1]) or (e.bitpos or 0) != 0)
    )


def is_variable(ddl: DDL, e: Element) -> bool:
    """True if the element's size depends on the data: a dynamic array, or a struct type that
    holds one. Serialized positions after such an element are sequential (spec §10.2)."""
    if isinstance(e.arraysize, str):
        return True
    return e.type in ddl.structs and static_size(ddl, e.type, "serialized") is None


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
            if is_bitfield(ddl, e):
                width = ((e.bitpos or 0) + e.numbits + 7) // 8
            else:
                width = elem * e.arraysize
            cursor = pos + width
            end = max(end, cursor)
        else:
            cursor = align(cursor, e.alignment) + elem * e.arraysize
            end = cursor
    return end if layout == "serialized" else align(end, st.alignment)


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

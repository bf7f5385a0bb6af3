"""ROS message types generated from ADTF DDL structs (issue 21): one place that knows how a
DDL struct becomes a ROS message, for every format (ROS 1, ROS 2 CDR, protobuf).

Real recordings are mostly project-specific DDL structs; the lake keeps them as generic tables
(`normalized/ddl_<struct>`, one column per element) and the stream catalog keeps each
stream's DDL. This module turns such a struct into a tree of `RosStruct`s:

- package `adtf_msgs` by default (the mapping's `package` option); the message name is the
  struct name made a valid ROS name (`tVehicle.Status` -> `TVehicleStatus`); two different
  structs that meet in one name are told apart deterministically (`Name`, `Name2`, ...,
  ordered by DDL name and then by definition), identical ones share one type;
- one field per element through `ros_base` (tInt8..tUInt64 -> int8..uint64, tFloat32/64 ->
  float32/64, tBool -> bool, tChar -> uint8: the byte as recorded, `char` means different
  things in ROS 1 and ROS 2); a fixed arraysize N > 1 -> `T[N]`, a dynamic one -> `T[]`;
  nested structs -> nested messages, recursively; enums -> their base type plus one constant
  per value; field names lower snake_case (`ui32Count` -> `ui32_count`) with the DDL name in
  a comment on the field;
- the stream's message starts with `std_msgs/Header header` (stamp: master time, frame_id:
  the stream); nested messages have no header.

Each leaf knows its lake column (the generic table's flattened name, `pos.x`; inside an
array of structs the struct field's name), so the serializers (`ddl_wire`, protobuf
`ddl`) read the rows without asking the DDL again.

Bad input is a `DDLTypeError` naming the struct and the element: a struct that contains
itself, an element of an unknown type, a name with nothing a ROS name can be made of. The
exporter then sends that stream as `bridge_lake_msgs/AdtfSample` with a WARN.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf.ddl import DDL, Struct
from bridge_lake.normalize.adtf_generic import BASE_COLUMNS

DEFAULT_PACKAGE = "adtf_msgs"
HEADER_TYPE = "std_msgs/msg/Header"
DTYPES = {
    "bool": "u1",
    "uint8": "u1",
    "int8": "i1",
    "uint16": "<u2",
    "int16": "<i2",
    "uint32": "<u4",
    "int32": "<i4",
    "uint64": "<u8",
    "int64": "<i8",
    "float32": "<f4",
    "float64": "<f8",
}
"""ROS base type -> little-endian numpy dtype of its wire form (ROS 1 and CDR alike)."""

_FROM_CODE = {
    "u1": "uint8",
    "i1": "int8",
    "u2": "uint16",
    "i2": "int16",
    "u4": "uint32",
    "i4": "int32",
    "u8": "uint64",
    "i8": "int64",
    "f4": "float32",
    "f8": "float64",
}
PACKAGE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
FIELD_PATTERN = re.compile(r"^[a-z](?:[a-z0-9]|_(?!_))*(?<!_)$")
"""ROS 2 field names: lower case, start with a letter, no `__`, no trailing `_`."""
MESSAGE_PATTERN = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class DDLTypeError(BridgeLakeError):
    """A DDL struct that cannot become a ROS message; names the struct and the element."""

    def __init__(self, struct: str, element: str | None, reason: str) -> None:
        self.struct, self.element, self.reason = struct, element, reason
        where = f"struct {struct!r}" + (f" element {element!r}" if element is not None else "")
        super().__init__(f"DDL {where}: {reason}")


@dataclass(frozen=True)
class RosField:
    """One field of a generated message."""

    name: str
    """ROS field name (lower snake_case)."""
    ddl_name: str
    """The DDL element name (in the definition's comment; the lake's column name)."""
    column: str
    """Where the values are: the generic table's column (top level, dotted for nested
    structs) or the struct field's name inside an array of structs."""
    base: str | None
    """ROS base type (`uint8`, `float64`, ...); None for a nested struct."""
    struct: RosStruct | None
    """The nested message, for struct elements."""
    array: int | None
    """None: one value; N: a fixed array `T[N]`; -1: a variable-length array `T[]`."""
    ddl_type: str

    @property
    def dtype(self) -> str:
        return DTYPES[self.base or ""]


@dataclass
class RosStruct:
    """A generated message: its fields, its enum constants and (once resolved) its name."""

    ddl_name: str
    fields: tuple[RosField, ...]
    constants: tuple[tuple[str, str, str], ...]
    """(base type, NAME, value) per enum value of the struct's enum elements."""
    header: bool
    """the stream's message: `std_msgs/Header header` first."""
    signature: str = ""
    """the definition with child types by their signature: equal signatures, one type."""
    name: str = ""
    """`package/msg/Name`, set by `TypeSet.resolve`."""
    comments: dict[str, str] = field(default_factory=dict)

    @property
    def fixed_size(self) -> bool:
        """No variable-length array anywhere inside: every message has one layout."""
        return all(f.array != -1 and (f.struct is None or f.struct.fixed_size) for f in self.fields)

    def children(self) -> Iterable[RosStruct]:
        """Nested message types, depth first, each once."""
        seen: set[int] = set()
        for f in self.fields:
            if f.struct is not None:
                for s in (*f.struct.children(), f.struct):
                    if id(s) not in seen:
                        seen.add(id(s))
                        yield s


def ros_base(ddl: DDL, type_name: str) -> str | None:
    """The ROS base type of a DDL datatype or enum; None for an unknown type or a struct."""
    enum = ddl.enums.get(type_name)
    base = enum.type if enum is not None else type_name
    if base == "tBool":
        return "bool"
    if base == "tChar":
        return "uint8"
    code = ddl.datatypes.get(base)
    return _FROM_CODE.get(code.lstrip("<>=")) if code else None


def field_name(name: str) -> str | None:
    """A DDL name as a ROS field name: camelCase split (`ui32Count` -> `ui32_count`), other
    characters as `_`, a leading digit prefixed (`3d` -> `field_3d`); None if nothing of the
    name is a letter or digit."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", text)
    text = re.sub(r"[^A-Za-z0-9]+", "_", text).lower().strip("_")
    text = re.sub(r"_+", "_", text)
    if not text:
        return None
    return f"field_{text}" if text[0].isdigit() else text


def message_name(name: str) -> str | None:
    """A DDL struct name as a ROS message name: words capitalized and joined
    (`tVehicle.Status` -> `TVehicleStatus`, `mytype` -> `Mytype`); None if nothing is left."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", name) if p]
    if not parts:
        return None
    text = "".join(p[0].upper() + p[1:] for p in parts)
    return f"Msg{text}" if text[0].isdigit() else text


def constant_name(name: str) -> str | None:
    base = field_name(name)
    return base.upper() if base else None


def _unique(name: str, taken: set[str]) -> str:
    out, k = name, 2
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def build(
    ddl: DDL, struct: str, *, rename: Mapping[str, str] | None = None, header: bool = True
) -> RosStruct:
    """The message tree of `struct` (names not yet resolved: `TypeSet.resolve`). `rename`
    gives ROS field names for top-level elements by DDL name."""
    if struct not in ddl.structs:
        raise DDLTypeError(struct, None, "no such struct in the DDL")
    return _build(ddl, ddl.structs[struct], (), header, dict(rename or {}), {})


def _build(
    ddl: DDL,
    st: Struct,
    stack: tuple[str, ...],
    header: bool,
    rename: dict[str, str],
    memo: dict[str, RosStruct],
) -> RosStruct:
    if not header and st.name in memo:
        return memo[st.name]
    if not st.elements:
        raise DDLTypeError(st.name, None, "has no elements (a ROS message needs a field)")
    taken = {"header"} if header else set()
    fields: list[RosField] = []
    constants: list[tuple[str, str, str]] = []
    const_taken: set[str] = set()
    comments: dict[str, str] = {}
    for e in st.elements:
        given = rename.get(e.name)
        if given is not None:
            if not FIELD_PATTERN.fullmatch(given) or given in taken:
                raise DDLTypeError(
                    st.name, e.name, f"rename to {given!r}: not a free ROS field name"
                )
            name = given
            taken.add(name)
        else:
            clean = field_name(e.name)
            if clean is None:
                raise DDLTypeError(st.name, e.name, "name has no letter or digit for a ROS name")
            name = _unique(clean, taken)
        array = -1 if isinstance(e.arraysize, str) else (e.arraysize if e.arraysize > 1 else None)
        column = e.name
        if header and not stack and e.name in BASE_COLUMNS:
            column = f"{e.name}_"
        child = None
        base = ros_base(ddl, e.type)
        if base is None:
            if e.type not in ddl.structs:
                raise DDLTypeError(st.name, e.name, f"unknown DDL type {e.type!r}")
            if e.type in (*stack, st.name):
                chain = " -> ".join((*stack, st.name, e.type))
                raise DDLTypeError(st.name, e.name, f"struct contains itself ({chain})")
            child = _build(ddl, ddl.structs[e.type], (*stack, st.name), False, {}, memo)
        enum = ddl.enums.get(e.type)
        if enum is not None and base is not None:
            for key, value in enum.values.items():
                constants.append(
                    _constant(st.name, e.name, enum.name, key, value, base, const_taken)
                )
        fields.append(RosField(name, e.name, column, base, child, array, e.type))
        comments[name] = f"DDL {e.name}: {e.type}" + (f"[{e.arraysize}]" if array else "")
    out = RosStruct(st.name, tuple(fields), tuple(constants), header, comments=comments)
    out.signature = _signature(out)
    if not header:
        memo[st.name] = out
    return out


def _constant(
    struct: str, element: str, enum: str, key: str, value: int, base: str, taken: set[str]
) -> tuple[str, str, str]:
    name = constant_name(key)
    if name is None:
        raise DDLTypeError(struct, element, f"enum {enum} value {key!r} has no ROS name")
    if name in taken:
        name = f"{constant_name(enum) or 'ENUM'}_{name}"
    name = _unique(name, taken).upper()
    if base == "bool":
        return base, name, "True" if value else "False"
    if base.startswith("float"):
        return base, name, str(value)
    dt = DTYPES[base].lstrip("<")
    bits = int(dt[1]) * 8
    lo, hi = (0, 2**bits - 1) if dt[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not lo <= value <= hi:
        raise DDLTypeError(struct, element, f"enum {enum} value {key}={value} does not fit {base}")
    return base, name, str(value)


def _signature(st: RosStruct) -> str:
    lines = [f"{b} {n}={v}" for b, n, v in st.constants]
    if st.header:
        lines.append(f"{HEADER_TYPE} header")
    for f in st.fields:
        kind = f.base if f.struct is None else "{" + f.struct.signature + "}"
        suffix = "" if f.array is None else ("[]" if f.array == -1 else f"[{f.array}]")
        lines.append(f"{kind}{suffix} {f.name} #{f.ddl_name}:{f.ddl_type}")
    return f"struct {st.ddl_name}\n" + "\n".join(lines)


def definition(st: RosStruct, *, comments: bool = True) -> str:
    """The .msg text of one resolved message (dependencies by name, not included)."""
    lines = [f"# From ADTF DDL struct {st.ddl_name} (generated by bridge_lake)"] if comments else []
    lines += [f"{b} {n}={v}" for b, n, v in st.constants]
    if st.header:
        lines.append("std_msgs/Header header")
    for f in st.fields:
        kind = f.base if f.struct is None else f.struct.name.replace("/msg/", "/")
        suffix = "" if f.array is None else ("[]" if f.array == -1 else f"[{f.array}]")
        line = f"{kind}{suffix} {f.name}"
        lines.append(f"{line}  # {st.comments[f.name]}" if comments else line)
    return "\n".join(lines) + "\n"


class TypeSet:
    """The generated types of one export: every stream's tree added, then names resolved
    once for all, so a name never depends on the order streams were met."""

    def __init__(self, package: str = DEFAULT_PACKAGE) -> None:
        if not PACKAGE_PATTERN.fullmatch(package):
            raise ValueError(f"package {package!r} is not a ROS package name")
        self.package = package
        self.roots: list[RosStruct] = []
        self.resolved = False

    def add(self, root: RosStruct) -> RosStruct:
        if self.resolved:
            raise AssertionError("TypeSet.add after resolve")
        self.roots.append(root)
        return root

    def structs(self) -> list[RosStruct]:
        """Every struct of every root (children first), each object once."""
        out: dict[int, RosStruct] = {}
        for root in self.roots:
            for s in (*root.children(), root):
                out.setdefault(id(s), s)
        return list(out.values())

    def resolve(self) -> dict[str, str]:
        """Name every struct; returns {`package/msg/Name`: definition text} of every type."""
        by_signature: dict[str, list[RosStruct]] = {}
        for s in self.structs():
            by_signature.setdefault(s.signature, []).append(s)
        groups: dict[str, list[str]] = {}
        for signature, members in by_signature.items():
            base = message_name(members[0].ddl_name)
            if base is None:
                raise DDLTypeError(members[0].ddl_name, None, "name has nothing a ROS name can use")
            groups.setdefault(base, []).append(signature)
        names: dict[str, str] = {}
        taken: set[str] = set()
        for base in sorted(groups):
            order = sorted(
                groups[base],
                key=lambda sig: (
                    min(s.ddl_name for s in by_signature[sig]),
                    hashlib.sha256(sig.encode()).hexdigest(),
                ),
            )
            for sig in order:
                name, k = base, 2
                while name in taken:
                    name, k = f"{base}{k}", k + 1
                taken.add(name)
                names[sig] = f"{self.package}/msg/{name}"
        for s in self.structs():
            s.name = names[s.signature]
        self.resolved = True
        return {s.name: definition(s) for s in self.structs()}


__all__ = [
    "DEFAULT_PACKAGE",
    "DDLTypeError",
    "RosField",
    "RosStruct",
    "TypeSet",
    "build",
    "definition",
    "field_name",
    "message_name",
    "ros_base",
]

"""The shape of a table spec: columns with the words that document them.

Columns are written as a compact table (`columns`), one line a column, so that a schema reads
like the docs it generates (docs/tables.md) and a column is one line, not a five-line call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

F64, F32 = pa.float64(), pa.float32()
TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "binary": pa.binary(),
    "bool": pa.bool_(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": F32,
    "float64": F64,
    "date32": pa.date32(),
}
"""The type names of a column table; `list<T>` and `list<T>[n]` (fixed size) wrap them."""
_LIST = re.compile(r"list<(\w+)>(?:\[(\d+)\])?")


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True


@dataclass(frozen=True)
class TableSpec:
    layer: str
    name: str
    description: str
    columns: tuple[Column, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns],
            metadata={"bridge_lake.table": f"{self.layer}/{self.name}"},
        )


TIME_NS = Column("time_ns", pa.int64(), "master clock, ns since the Unix epoch", nullable=False)
"""A row's time on the master clock, the first column of every table that has one."""


def columns(
    *parts: str | tuple[Column, ...], structs: Mapping[str, pa.DataType] | None = None
) -> tuple[Column, ...]:
    """The columns of a table, in order: each text part a compact table, one line a column,
    `name  type  description`, where a type ending in `!` is never null and a type is a name
    of TYPES, of `structs`, or a list of one (`list<float64>[9]`); a line indented deeper
    than the first continues the description above it. Tuple parts are column groups that
    several tables share, spliced in as they are. A line that does not parse raises
    ValueError naming it."""
    known = {**TYPES, **(structs or {})}
    out: list[Column] = []
    for part in parts:
        out += _parse(part, known) if isinstance(part, str) else part
    return tuple(out)


def struct(fields: str) -> pa.StructType:
    """A struct type from `name type, name type, ...` in the words of `columns`: a type
    ending in `!` is never null."""
    out = []
    for item in fields.split(","):
        name, kind = item.split()
        out.append(pa.field(name, _type(kind.removesuffix("!"), TYPES), not kind.endswith("!")))
    return pa.struct(out)


def _parse(table: str, known: Mapping[str, pa.DataType]) -> list[Column]:
    lines = [line for line in table.splitlines() if line.strip()]
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    rows: list[list[str]] = []
    for line in lines:
        if len(line) - len(line.lstrip()) > indent and rows:
            rows[-1][2] += " " + line.strip()
            continue
        parts = line.split(None, 2)
        if len(parts) != 3:
            raise ValueError(f"column line {line.strip()!r}: expected `name  type  description`")
        rows.append(parts)
    return [
        Column(name, _type(kind.removesuffix("!"), known), text, nullable=not kind.endswith("!"))
        for name, kind, text in rows
    ]


def _type(name: str, known: Mapping[str, pa.DataType]) -> pa.DataType:
    wrapped = _LIST.fullmatch(name)
    item = wrapped.group(1) if wrapped else name
    if item not in known:
        raise ValueError(f"column type {name!r}: {item!r} is none of {sorted(known)}")
    if not wrapped:
        return known[item]
    size = wrapped.group(2)
    return pa.list_(known[item], int(size)) if size else pa.list_(known[item])


def lidar_point_columns(scans: str, frame: str) -> tuple[Column, ...]:
    """The columns of a lidar point row, normalized (sensor frame) and calibrated (base_link)
    alike: its scan (`scans`: the lidar_scans table as the layer names it), position in
    `frame` ("" for the sensor frame), intensity, ring and time within the scan."""
    where = f" in {frame}" if frame else ""
    return (
        Column("scan_id", pa.int64(), f"scan ({scans}.scan_id)", nullable=False),
        *(Column(axis, F32, f"{axis}{where} [m]", nullable=False) for axis in "xyz"),
        Column("intensity", F32, "return intensity (sensor units)"),
        Column("ring", pa.int16(), "laser ring, 0 = lowest elevation"),
        Column("time_offset_ns", pa.int32(), "point time minus scan start [ns]"),
    )

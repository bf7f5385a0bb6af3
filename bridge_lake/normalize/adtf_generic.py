"""Generic tables for ADTF streams no mapping rule takes: nothing decodable is quarantined.

Real recordings are full of project-specific DDL structs that no shipped mapping knows. Such
a stream still lands, fully decoded, in the normalized layer:

- a DDL-described stream goes to `ddl_<struct>` (one table per struct type, partitioned by
  drive like every table): `time_ns` (master time), `sample_time_ns` (the sample's own ADTF
  time stamp), `stream`, then one column per element. Nested structs are flattened with
  dotted names (`pos.x`), fixed arrays stay Arrow fixed-size lists, dynamic arrays lists,
  arrays of structs lists of structs; enums keep their integer values, and the stream catalog
  keeps the DDL (`streams.ddl`) that names them. An ADTF 2 `adtf/plaintype` stream (a scalar
  of a `c-type`) gets the one-element struct ADTF 3 writes for it (`value`).
- a stream without a DDL (raw media types, anonymous streams) goes to `adtf_payloads`, one
  row per sample with its bytes and meta type.

Quarantine stays for records that are broken: a payload that does not decode as its struct.

This module holds the pure parts (names, schemas, flattening); the jobs that use them are in
`bridge_lake.normalize.adtf`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace

import numpy as np
import pyarrow as pa

from bridge_lake.formats.adtf import Stream
from bridge_lake.formats.adtf.ddl import DDL, parse_ddl
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.formats.adtf.errors import DDLError
from bridge_lake.lake.paths import MAX_NAME_LENGTH as MAX_TABLE_NAME
from bridge_lake.lake.schemas import GENERIC_PREFIX

BASE_COLUMNS = ("time_ns", "sample_time_ns", "stream")
"""Columns every generic struct table starts with; an element of the same name is renamed
with a trailing underscore."""

PLAIN_TYPES: dict[str, str] = {
    "BOOL": "tBool",
    "CHAR": "tChar",
    "INT8": "tInt8",
    "UINT8": "tUInt8",
    "INT16": "tInt16",
    "UINT16": "tUInt16",
    "INT32": "tInt32",
    "UINT32": "tUInt32",
    "INT64": "tInt64",
    "UINT64": "tUInt64",
    "FLOAT32": "tFloat32",
    "FLOAT64": "tFloat64",
}
"""`adtf/plaintype` c-types → DDL base types (ADTF 3 describes them the same way)."""


def table_name(struct: str) -> str:
    """`ddl_<struct>` in the lake's name alphabet: lower case, runs of other characters as
    `_` (`tVehicle.Status` → `ddl_tvehicle_status`). Two structs that meet in one name keep
    one table if their schemas agree, else the sink gives the second a hashed name; a name
    over the length limit is cut and hashed."""
    clean = re.sub(r"[^a-z0-9]+", "_", struct.lower()).strip("_") or "struct"
    name = f"{GENERIC_PREFIX}{clean}"
    if len(name) > MAX_TABLE_NAME:
        digest = hashlib.sha256(struct.encode("utf-8")).hexdigest()[:6]
        name = f"{name[: MAX_TABLE_NAME - 7]}_{digest}"
    return name


def flatten(table: pa.Table) -> pa.Table:
    """Nested struct columns as dotted top-level columns (`pos.x`), at every depth."""
    while any(pa.types.is_struct(t) for t in table.schema.types):
        table = table.flatten()
    return table


def element_columns(table: pa.Table) -> pa.Table:
    """A decoded struct table flattened, with element names that clash with the base
    columns renamed (`stream` → `stream_`)."""
    flat = flatten(table)
    names = [f"{n}_" if n in BASE_COLUMNS else n for n in flat.column_names]
    return flat.rename_columns(names)


def struct_schema(ddl: DDL, struct: str, layout: str) -> pa.Schema:
    """The generic table schema of a struct: base columns, then the flattened elements (the
    decoder's own types, taken from decoding no sample at all)."""
    empty = decode(
        ddl,
        struct,
        np.zeros(0, np.uint8),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        layout=layout,  # type: ignore[arg-type]
    )
    fields = [
        pa.field("time_ns", pa.int64(), nullable=False),
        pa.field("sample_time_ns", pa.int64()),
        pa.field("stream", pa.string(), nullable=False),
    ]
    return pa.schema(fields + list(element_columns(empty).schema))


def with_plain_type(stream: Stream) -> Stream:
    """An `adtf/plaintype` stream without a DDL, described as ADTF 3 does it (a struct named
    after the c-type with one element `value`); any other stream unchanged."""
    if stream.ddl is not None or stream.stream_type is None:
        return stream
    if stream.stream_type.meta_type != "adtf/plaintype":
        return stream
    prop = stream.stream_type.properties.get("c-type")
    base = PLAIN_TYPES.get(prop.value) if prop else None
    if base is None:
        return stream
    name = prop.value  # type: ignore[union-attr]
    ddl = parse_ddl(
        f'<adtf:ddl xmlns:adtf="adtf"><structs><struct name="{name}" alignment="1" '
        f'version="1"><element name="value" arraysize="1" type="{base}">'
        '<deserialized alignment="1"/><serialized bytepos="0" byteorder="LE"/>'
        "</element></struct></structs></adtf:ddl>"
    )
    return replace(stream, ddl=ddl, ddl_struct=name, stored_layout=None)


def substream_streams(stream: Stream) -> dict[int, Stream]:
    """An `adtf/substreams` stream's substreams as streams of their own (named
    `stream/substream`, each with its own type and DDL), by substream id."""
    if stream.stream_type is None:
        return {}
    out: dict[int, Stream] = {}
    for name, (sub_id, stype) in stream.stream_type.substreams().items():
        sub = replace(
            stream,
            name=f"{stream.name}/{name}",
            stream_type=stype,
            ddl=None,
            ddl_struct=None,
            stored_layout=None,
        )
        props = stype.properties
        if "md_struct" in props and "md_definitions" in props:
            try:
                ddl = parse_ddl(props["md_definitions"].value)
            except DDLError:  # an undescribed substream lands as payload rows
                ddl = None
            if ddl is not None and props["md_struct"].value in ddl.structs:
                sub = replace(sub, ddl=ddl, ddl_struct=props["md_struct"].value)
        out[sub_id] = with_plain_type(sub)
    return out


__all__ = [
    "BASE_COLUMNS",
    "PLAIN_TYPES",
    "element_columns",
    "flatten",
    "struct_schema",
    "substream_streams",
    "table_name",
    "with_plain_type",
]

"""Generic table rows as JSON messages (MCAP only, kept for mappings that ask for it).

Each message is one row of a generic ADTF table (`ddl_<struct>`, `adtf_payloads`): every
column but the master time (which is the log time), binary values as base64
(`{"base64": "..."}`), NaN and infinities as null (JSON has none), under a JSON Schema
derived from the table's Arrow schema (`jsonschema` / `json`, as the MCAP spec registers
them). A bag cannot carry them: such an export fails unless told to skip them.
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pyarrow as pa

from bridge_lake.export.kinds.kind import Codec, Encode, Kind
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.source import Builder, Lane, dataset
from bridge_lake.lake.schemas import GENERIC_PREFIX

JSON_TYPE = "json"
"""The mapping's type name of JSON rows."""

SKIPPED_COLUMNS = ("time_ns", "drive")
"""Not in the message: the master time is the log time; the drive is the file's."""


def json_schema(schema: pa.Schema, title: str) -> bytes:
    """A JSON Schema (draft 2020-12) of a table's rows as the messages carry them."""
    props = {f.name: _json_type(f.type) for f in schema if f.name not in SKIPPED_COLUMNS}
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "type": "object",
        "properties": props,
    }
    return json.dumps(doc, sort_keys=True).encode()


def _json_type(t: pa.DataType) -> dict:
    if pa.types.is_boolean(t):
        return {"type": ["boolean", "null"]}
    if pa.types.is_integer(t):
        return {"type": ["integer", "null"]}
    if pa.types.is_floating(t):
        return {"type": ["number", "null"]}
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return {"type": ["string", "null"]}
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return {
            "type": ["object", "null"],
            "properties": {"base64": {"type": "string", "contentEncoding": "base64"}},
        }
    if pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t):
        return {"type": ["array", "null"], "items": _json_type(t.value_type)}
    if pa.types.is_struct(t):
        return {
            "type": ["object", "null"],
            "properties": {
                t.field(i).name: _json_type(t.field(i).type) for i in range(t.num_fields)
            },
        }
    return {}


def _clean(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def json_messages(rows: pa.Table) -> Serialized:
    """One compact JSON object per row (row order), concatenated."""
    names = [n for n in rows.column_names if n not in SKIPPED_COLUMNS]
    pieces = [
        json.dumps(_clean(r), separators=(",", ":"), allow_nan=False).encode()
        for r in rows.select(names).to_pylist()
    ]
    offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8).copy()
    return Serialized(data, offsets)


class JsonBuilder(Builder):
    """Rows of a generic table as JSON messages, every column of the table."""

    def __init__(self, lake, drive: str, lane: Lane, encode: Encode, shift_ns: int = 0):
        super().__init__(lake, drive, lane, encode, shift_ns)
        self.schema = dataset(lake, *lane.rule.table.split("/"), drive).schema
        self.columns = [n for n in self.schema.names if n != "drive"]

    def columns_of(self, rows: pa.Table) -> pa.Table:
        return rows


CODEC = Codec(
    lambda rows: rows, lambda rows, ros, seq_start: json_messages(rows), json_messages, None
)
TABLES = (f"normalized/{GENERIC_PREFIX}*", "normalized/adtf_payloads")
KIND = Kind(JSON_TYPE, TABLES, CODEC, JsonBuilder, in_bags=False)

"""Generic ADTF streams in exports: the rows of `ddl_<struct>` and `adtf_payloads`.

Streams no ADTF mapping rule takes land in generic tables (`bridge_lake.normalize.
adtf_generic`). They reach every format:

- `ddl` topics (`DdlBuilder`): each stream's DDL struct as a generated message type
  (`messages.ddl_types`), serialized in bulk from the rows (`messages.ddl_wire`,
  `protobuf.ddl`); a struct that cannot become a ROS type goes out as `AdtfSample` whose
  data is the row as JSON (`RowSampleBuilder`, meta_type `application/json`), with a WARN;
- `bridge_lake_msgs/msg/AdtfSample` topics (`AdtfSampleBuilder`): the payload bytes of
  streams without a DDL;
- `json` topics (MCAP only, kept for mappings that ask for it): each message one row, every
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

from bridge_lake.export import messages as msg
from bridge_lake.export.mapping import JSON_TYPE
from bridge_lake.export.messages.ddl_columns import lake_columns
from bridge_lake.export.source import Builder, Lane, dataset

JSON_META_TYPE = "application/json"
"""AdtfSample.meta_type of a generic row sent as JSON (its struct has no ROS type)."""

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


def json_messages(rows: pa.Table) -> msg.Serialized:
    """One compact JSON object per row (row order), concatenated."""
    names = [n for n in rows.column_names if n not in SKIPPED_COLUMNS]
    pieces = [
        json.dumps(_clean(r), separators=(",", ":"), allow_nan=False).encode()
        for r in rows.select(names).to_pylist()
    ]
    offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8).copy()
    return msg.Serialized(data, offsets)


class JsonBuilder(Builder):
    """Rows of a generic table as JSON messages, every column of the table."""

    def __init__(self, lake, drive: str, lane: Lane, ros: int, shift_ns: int = 0, codec=msg):
        super().__init__(lake, drive, lane, ros, shift_ns, codec)
        self.schema = dataset(lake, *lane.rule.table.split("/"), drive).schema
        self.columns = [n for n in self.schema.names if n != "drive"]

    def build(self, rows: pa.Table) -> msg.Serialized:
        return json_messages(rows)


class DdlBuilder(Builder):
    """Rows of a generic table as the stream's generated message type (lane.extra["struct"],
    resolved by the exporter), header frame the lane's."""

    def __init__(self, lake, drive: str, lane: Lane, ros: int, shift_ns: int = 0, codec=msg):
        super().__init__(lake, drive, lane, ros, shift_ns, codec)
        self.struct = lane.extra["struct"]
        self.columns = ["time_ns", *lake_columns(self.struct)]

    def build(self, rows: pa.Table) -> msg.Serialized:
        return self.codec.ddl_message(
            self.t(rows), self.lane.frame_id, struct=self.struct, rows=rows, ros=self.ros
        )


class AdtfSampleBuilder(Builder):
    """adtf_payloads rows as bridge_lake_msgs/AdtfSample (bytes and meta type as recorded)."""

    columns = ["time_ns", "meta_type", "data"]

    def build(self, rows: pa.Table) -> msg.Serialized:
        data = rows.column("data").combine_chunks().fill_null(b"")
        return self.codec.adtf_sample(
            self.t(rows),
            self.lane.frame_id,
            stream=str(self.lane.selection.get("stream", "")),
            meta_type=rows.column("meta_type").combine_chunks(),
            data=data,
            ros=self.ros,
        )


class RowSampleBuilder(JsonBuilder):
    """Rows of a generic table whose struct has no ROS type, as AdtfSample holding the row
    as JSON (every column, as `json_messages` writes it): nothing of the stream is lost."""

    def build(self, rows: pa.Table) -> msg.Serialized:
        rows_json = json_messages(rows)
        return self.codec.adtf_sample(
            self.t(rows),
            self.lane.frame_id,
            stream=str(self.lane.selection.get("stream", "")),
            meta_type=JSON_META_TYPE,
            data=(rows_json.data, rows_json.offsets),
            ros=self.ros,
        )


__all__ = [
    "JSON_META_TYPE",
    "JSON_TYPE",
    "AdtfSampleBuilder",
    "DdlBuilder",
    "JsonBuilder",
    "RowSampleBuilder",
    "json_messages",
    "json_schema",
]

"""Generated DDL types: the rows of a `ddl_<struct>` table as the message type generated
from each stream's DDL struct (`messages.ddl_types`; the mapping's type `ddl`, options
`package` and `rename`), serialized in bulk (`messages.ddl_wire` for ROS 1 / CDR,
`protobuf.ddl` for protobuf, whose descriptor is built from the struct). A struct that
cannot become a ROS type goes out as `bridge_lake_msgs/msg/AdtfSample` whose data is the row
as JSON (`RowSampleBuilder`, meta_type `application/json`), with a WARN
(`export.generic_types` decides which, per lane, before the export writes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.export.kinds import adtf_sample
from bridge_lake.export.kinds.json_rows import JsonBuilder, json_messages
from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.ddl_columns import Values, lake_columns, table_getter, values_of
from bridge_lake.export.messages.ddl_types import RosStruct
from bridge_lake.export.messages.ddl_wire import serialize_values
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.protobuf.ddl import encode_values
from bridge_lake.export.source import Builder, Lane
from bridge_lake.lake.schemas import GENERIC_PREFIX

DDL_TYPE = "ddl"
"""The mapping's type name of generated DDL types."""
FALLBACK = "fallback"
"""lane.extra key: why the lane's struct has no ROS type (its rows go out as JSON samples)."""
JSON_META_TYPE = "application/json"
"""AdtfSample.meta_type of a generic row sent as JSON (its struct has no ROS type)."""


@dataclass(frozen=True)
class DdlColumns:
    stamp: np.ndarray
    frame_id: str
    struct: RosStruct
    values: Values


def columns(stamp_ns: ArrayLike, frame_id: str, *, struct: RosStruct, rows: pa.Table) -> DdlColumns:
    """n messages of the generated type `struct` (with its header) from n generic-table
    rows."""
    stamp = arg.stamps(stamp_ns)
    frame_id = arg.text("frame_id", frame_id)
    n = rows.num_rows
    if stamp.size != n:
        raise ValueError(f"{stamp.size} stamps for {n} rows")
    return DdlColumns(stamp, frame_id, struct, values_of(struct, table_getter(rows), n))


def ros(c: DdlColumns, ros: int, seq_start: int) -> Serialized:
    return serialize_values(c.struct, c.values, c.stamp, c.frame_id, ros=ros, seq_start=seq_start)


def protobuf(c: DdlColumns) -> Serialized:
    return encode_values(c.struct, c.values, c.stamp, c.frame_id)


class DdlBuilder(Builder):
    """Rows of a generic table as the stream's generated message type (lane.extra["struct"],
    resolved by the exporter), header frame the lane's."""

    def __init__(self, lake, drive, lane, encode, shift_ns=0) -> None:
        super().__init__(lake, drive, lane, encode, shift_ns)
        self.struct = lane.extra["struct"]
        self.columns = ["time_ns", *lake_columns(self.struct)]

    def columns_of(self, rows: pa.Table) -> DdlColumns:
        return columns(self.t(rows), self.lane.frame_id, struct=self.struct, rows=rows)


class RowSampleBuilder(JsonBuilder):
    """Rows of a generic table whose struct has no ROS type, as AdtfSample holding the row
    as JSON (every column, as `json_messages` writes it): nothing of the stream is lost."""

    def columns_of(self, rows: pa.Table) -> adtf_sample.SampleColumns:
        rows_json = json_messages(rows)
        return adtf_sample.columns(
            self.t(rows),
            self.lane.frame_id,
            stream=str(self.lane.selection.get("stream", "")),
            meta_type=JSON_META_TYPE,
            data=(rows_json.data, rows_json.offsets),
        )


def _pick(lane: Lane) -> tuple[type[Builder], Kind]:
    if FALLBACK in lane.extra:
        return RowSampleBuilder, adtf_sample.KIND
    return DdlBuilder, KIND


CODEC = Codec(columns, ros, protobuf, None, "ddl_message")
OPTIONS = {"package": str, "rename": dict}  # rename: {DDL element: ROS field name}
KIND = Kind(DDL_TYPE, (f"normalized/{GENERIC_PREFIX}*",), CODEC, options=OPTIONS, pick=_pick)

__all__ = ["DDL_TYPE", "FALLBACK", "JSON_META_TYPE", "KIND"]

"""bridge_lake_msgs/AdtfSample from normalized/adtf_payloads: an ADTF sample kept as bytes
(a stream without a DDL, or one whose DDL has no ROS type), in every format, so no stream
is JSON-only or left out; protobuf: bridge_lake.AdtfSample (bridge_lake.proto).

Definition (messages.typestore.ADTF_SAMPLE): std_msgs/Header header, string stream, string
meta_type, uint8[] data. The stream is one per call; the meta type may differ per message
(a type chunk can change it), so it is taken from the few distinct values by a vectorized
take, each with its CDR padding before the data's uint32 length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join
from bridge_lake.export.messages.typestore import ADTF_SAMPLE_TYPE
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder
from bridge_lake.formats.ros.wire import Layout, header_values


@dataclass(frozen=True)
class SampleColumns:
    stamp: np.ndarray
    frame_id: str
    stream: str
    meta_types: list[str]
    """the distinct meta types"""
    meta_index: pa.Array
    """each message's index into meta_types"""
    data: pa.LargeBinaryArray


def columns(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    stream: str,
    meta_type: str | Sequence[str] | pa.Array,
    data: arg.BinaryData,
) -> SampleColumns:
    """One sample per payload; `meta_type` one for all or one per message (null is "")."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    payload = arg.binary("data", data, n)
    if isinstance(meta_type, str):
        names, index = [arg.text("meta_type", meta_type)], pa.array(np.zeros(n, np.int32))
    else:
        values = (
            pa.array(meta_type, pa.string()) if not isinstance(meta_type, pa.Array) else meta_type
        )
        values = values.cast(pa.string()).fill_null("")
        if len(values) != n:
            raise ValueError(f"meta_type has {len(values)} entries, expected {n}")
        distinct = pc.unique(values)
        names = [arg.text("meta_type", v) for v in distinct.to_pylist()]
        index = pc.index_in(values, distinct)
    return SampleColumns(
        stamp, arg.text("frame_id", frame_id), arg.text("stream", stream), names, index, payload
    )


def ros(c: SampleColumns, ros: int, seq_start: int) -> Serialized:
    n = c.stamp.size
    length = arg.binary_lengths(c.data)
    prefix = Layout.message(ros)
    prefix.header(c.frame_id)
    prefix.string(c.stream)
    head = prefix.fill(n, header_values(c.stamp, ros, seq_start))
    tails = []
    for name in c.meta_types:  # string meta_type, padding, uint32 data length (filled below)
        layout = Layout(ros, position=prefix.size - (4 if ros == 2 else 0), known_alignment=4)
        layout.string(name)
        layout.align(4)
        tails.append(layout.fill(1, {}).tobytes())
    middle = pa.array(tails, pa.large_binary()).take(c.meta_index)
    count = arg.convert("data lengths", length, np.dtype("<u4")).view(np.uint8).reshape(n, 4)
    return join([fixed_part(head), middle, fixed_part(np.ascontiguousarray(count)), c.data])


def protobuf(c: SampleColumns) -> Serialized:
    fields = Fields(c.stamp.size)
    fields.timestamp(1, c.stamp)
    fields.string(2, c.frame_id)
    fields.string(3, c.stream)
    meta = pa.array([s.encode() for s in c.meta_types], pa.large_binary()).take(c.meta_index)
    fields.binary(4, meta)
    fields.binary(5, c.data)
    return fields.encode()


class AdtfSampleBuilder(Builder):
    """adtf_payloads rows as AdtfSample (bytes and meta type as recorded)."""

    columns = ["time_ns", "meta_type", "data"]

    def columns_of(self, rows: pa.Table) -> SampleColumns:
        data = rows.column("data").combine_chunks().fill_null(b"")
        return columns(
            self.t(rows),
            self.lane.frame_id,
            stream=str(self.lane.selection.get("stream", "")),
            meta_type=rows.column("meta_type").combine_chunks(),
            data=data,
        )


CODEC = Codec(columns, ros, protobuf, "bridge_lake.AdtfSample", "adtf_sample")
KIND = Kind(ADTF_SAMPLE_TYPE, ("normalized/adtf_payloads",), CODEC, AdtfSampleBuilder)

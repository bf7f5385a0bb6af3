"""bridge_lake_msgs/AdtfSample -> bridge_lake.AdtfSample (see bridge_lake.proto), from the
same arguments as messages.adtf_sample."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.adtf_sample import meta_types
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.protobuf.wire import Fields


def adtf_sample(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    stream: str,
    meta_type: str | Sequence[str] | pa.Array,
    data: arg.BinaryData,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """bridge_lake.AdtfSample, one per payload (`ros` and `seq_start` ignored)."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    payload = arg.binary("data", data, n)
    names, index = meta_types(meta_type, n)
    fields = Fields(n)
    fields.timestamp(1, stamp)
    fields.string(2, arg.text("frame_id", frame_id))
    fields.string(3, arg.text("stream", stream))
    fields.binary(4, pa.array([s.encode() for s in names], pa.large_binary()).take(index))
    fields.binary(5, payload)
    return fields.encode()

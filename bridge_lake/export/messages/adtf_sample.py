"""bridge_lake_msgs/AdtfSample: an ADTF sample kept as bytes (a stream without a DDL, or one
whose DDL has no ROS type), in every format, so no stream is JSON-only or left out.

Definition (typestore.ADTF_SAMPLE): std_msgs/Header header, string stream, string
meta_type, uint8[] data. The stream is one per call; the meta type may differ per message
(a type chunk can change it), so it is taken from the few distinct values by a vectorized
take, each with its CDR padding before the data's uint32 length.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join
from bridge_lake.export.messages.wire import Layout, header_values


def meta_types(meta_type: str | Sequence[str] | pa.Array, n: int) -> tuple[list[str], pa.Array]:
    """(distinct meta types, index of each message's) of one for all or one per message;
    null is ""."""
    if isinstance(meta_type, str):
        return [arg.text("meta_type", meta_type)], pa.array(np.zeros(n, np.int32))
    values = pa.array(meta_type, pa.string()) if not isinstance(meta_type, pa.Array) else meta_type
    values = values.cast(pa.string()).fill_null("")
    if len(values) != n:
        raise ValueError(f"meta_type has {len(values)} entries, expected {n}")
    distinct = pc.unique(values)
    names = [arg.text("meta_type", v) for v in distinct.to_pylist()]
    return names, pc.index_in(values, distinct)


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
    """bridge_lake_msgs/AdtfSample, one per payload."""
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    payload = arg.binary("data", data, n)
    length = arg.binary_lengths(payload)
    prefix = Layout.message(ros)
    prefix.header(arg.text("frame_id", frame_id))
    prefix.string(arg.text("stream", stream))
    head = prefix.fill(n, header_values(stamp, ros, seq_start))
    names, index = meta_types(meta_type, n)
    tails = []
    for name in names:  # string meta_type, padding, uint32 data length (filled below)
        layout = Layout(ros, position=prefix.size - (4 if ros == 2 else 0), known_alignment=4)
        layout.string(name)
        layout.align(4)
        tails.append(layout.fill(1, {}).tobytes())
    middle = pa.array(tails, pa.large_binary()).take(index)
    count = arg.convert("data lengths", length, np.dtype("<u4")).view(np.uint8).reshape(n, 4)
    return join([fixed_part(head), middle, fixed_part(np.ascontiguousarray(count)), payload])

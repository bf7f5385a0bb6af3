"""foxglove_msgs/CompressedVideo (foxglove/schemas ros_foxglove_msgs) from an Arrow binary column.

Definition (ROS 2; ROS 1 has `time timestamp`): builtin_interfaces/Time timestamp,
string frame_id, uint8[] data, string format. No std_msgs/Header, so no seq in ROS 1.

The `format` string follows the variable-length data: in CDR its uint32 length is aligned to 4,
so 0-3 zero bytes of padding depend on len(data) % 4. The tail (padding + format) therefore
takes one of four byte strings per message, picked by a vectorized take.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join
from bridge_lake.export.messages.wire import U4, Layout, stamp_values


def compressed_video(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    format: str,
    data: arg.BinaryData,
    ros: int = 2,
) -> Serialized:
    """foxglove_msgs/CompressedVideo: one access unit per message; `format` "h264" (Annex B,
    keyframes carrying SPS/PPS), "h265", "vp9" or "av1" as Foxglove documents."""
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    frames = arg.binary("data", data, n)
    length = arg.binary_lengths(frames)

    prefix = Layout.message(ros)
    prefix.stamp()
    prefix.string(arg.text("frame_id", frame_id))
    prefix.field("data_length", U4)
    head = prefix.fill(
        n, {**stamp_values(stamp, ros), "data_length": arg.convert("data lengths", length, U4)}
    )

    format_layout = Layout(ros, known_alignment=4)
    format_layout.string(arg.text("format", format))
    format_bytes = format_layout.fill(1, {}).tobytes()
    padding = -length % 4 if ros == 2 else np.zeros(n, np.int64)
    tails = pa.array([b"\0" * pad + format_bytes for pad in range(4)], pa.large_binary())
    return join([fixed_part(head), frames, tails.take(pa.array(padding))])

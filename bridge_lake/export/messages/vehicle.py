"""can_msgs/Frame (ros_canopen, ROS 1 and ROS 2 alike) from numpy columns.

Definition (ros-industrial/ros_canopen can_msgs/msg/Frame.msg): std_msgs/Header header,
uint32 id, bool is_rtr, bool is_extended, bool is_error, uint8 dlc, uint8[8] data. Fixed size
within a call, so one (n, size) array filled field by field.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed
from bridge_lake.export.messages.wire import U1, U4, Layout, header_values

STANDARD_ID_LIMIT = 1 << 11
EXTENDED_ID_LIMIT = 1 << 29


def check_ids(ids: np.ndarray, wide: np.ndarray) -> None:
    """Every can_id fits 11 bits, or 29 where `wide` (is_extended or is_error) is set;
    protobuf.can_frame checks the same."""
    too_big = np.flatnonzero(ids >= np.where(wide, EXTENDED_ID_LIMIT, STANDARD_ID_LIMIT))
    if too_big.size:
        i = int(too_big[0])
        bits = 29 if wide[i] else 11
        raise ValueError(f"can_id[{i}] = {ids[i]:#x} does not fit {bits} bits (is_extended)")


def can_frame(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    can_id: ArrayLike,
    is_rtr: ArrayLike,
    is_extended: ArrayLike,
    is_error: ArrayLike,
    dlc: ArrayLike,
    data: ArrayLike,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """can_msgs/Frame. can_id is the bare arbitration id without SocketCAN flag bits: 11 bits,
    29 with is_extended (or an error frame's error class); data (n, 8) uint8 zero-padded past
    dlc. Flags and dlc may be one value for all frames."""
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    ids = arg.rows("can_id", can_id, n, U4)
    extended = arg.per_message("is_extended", is_extended, n, np.bool_)
    error = arg.per_message("is_error", is_error, n, np.bool_)
    wide = np.broadcast_to(extended | error, (n,))
    check_ids(ids, wide)

    layout = Layout.message(ros)
    layout.header(arg.text("frame_id", frame_id))
    layout.field("id", U4)
    layout.field("is_rtr", U1)
    layout.field("is_extended", U1)
    layout.field("is_error", U1)
    layout.field("dlc", U1)
    layout.field("data", U1, 8)
    return fixed(
        layout.fill(
            n,
            {
                **header_values(stamp, ros, seq_start),
                "id": ids,
                "is_rtr": arg.per_message("is_rtr", is_rtr, n, np.bool_),
                "is_extended": extended,
                "is_error": error,
                "dlc": arg.per_message("dlc", dlc, n, U1),
                "data": arg.rows("data", data, n, U1, (8,)),
            },
        )
    )

"""ROS 1 / CDR encoding of the kinds whose messages all have one size: a std_msgs/Header
followed by primitives and fixed arrays (Imu, NavSatFix, can_msgs/Frame, Odometry)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from bridge_lake.export.messages.serialized import Serialized, fixed
from bridge_lake.formats.ros.wire import Layout, header_values

Field = tuple[str, DTypeLike, int, ArrayLike]
"""(ROS field name, primitive, count: 0 for one value, else a fixed array of that many, the
values: one for all messages or one per message)."""


def header_message(
    ros: int,
    stamp: np.ndarray,
    frame_id: str,
    seq_start: int,
    fields: Iterable[Field],
    *,
    child_frame_id: str | None = None,
) -> Serialized:
    """One message per stamp: the header (frame_id; ROS 1 seq from seq_start), the constant
    child_frame_id where the type has one (nav_msgs/Odometry), then `fields` in wire order,
    each named once for its layout and its values."""
    layout = Layout.message(ros)
    layout.header(frame_id)
    if child_frame_id is not None:
        layout.string(child_frame_id)
    values = header_values(stamp, ros, seq_start)
    for name, dtype, count, value in fields:
        layout.field(name, dtype, count)
        values[name] = value
    return fixed(layout.fill(stamp.size, values))

"""ROS 1 and ROS 2 (CDR) wire machinery of the exports: n messages in one buffer.

`wire.Layout` builds the fixed-size stretch of a message in ROS 1 or CDR rules, `serialized`
holds n messages as one uint8 buffer + n + 1 offsets, `arguments` checks and converts the
columns a kind validates, `pointcloud` the point layouts, `ddl_types` / `ddl_columns` /
`ddl_wire` the types generated from DDL structs, and `typestore` / `message_definition` the
definitions a bag or MCAP file must carry. Output is byte for byte what rosbags'
serialize_ros1 / serialize_cdr produce for the same messages (tested).

The encoders of the message kinds (`export.kinds`) are reachable here by their short names
with plain arguments, `messages.imu(stamp_ns, frame_id, ..., ros=1, seq_start=0)`, and
`TYPENAMES` maps each short name to its message type: both are read from the kinds'
registry when first asked for (the kinds import this package).
"""

from __future__ import annotations

from typing import Any

from bridge_lake.export.messages.pointcloud import VELODYNE_XYZIRT, XYZI, PointField, PointLayout
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.messages.typestore import (
    ExportTypes,
    MessageDefinition,
    message_definition,
    typestore,
)
from bridge_lake.formats.ros.wire import split_stamps


def __getattr__(name: str) -> Any:
    from bridge_lake.export import kinds

    if name == "TYPENAMES":
        return kinds.TYPENAMES
    if name == "UNKNOWN_COVARIANCE":
        return kinds.odometry.UNKNOWN_COVARIANCE
    if name in kinds.BY_SHORT:
        return kinds.encoder(name, protobuf=False)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "VELODYNE_XYZIRT",
    "XYZI",
    "ExportTypes",
    "MessageDefinition",
    "PointField",
    "PointLayout",
    "Serialized",
    "message_definition",
    "split_stamps",
    "typestore",
]

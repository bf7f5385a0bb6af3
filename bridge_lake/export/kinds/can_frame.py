"""can_msgs/Frame (ros_canopen, ROS 1 and ROS 2 alike) from normalized/can_frames;
protobuf: bridge_lake.CanFrame (bridge_lake.proto).

Definition (ros-industrial/ros_canopen can_msgs/msg/Frame.msg): std_msgs/Header header,
uint32 id, bool is_rtr, bool is_extended, bool is_error, uint8 dlc, uint8[8] data. Fixed size
within a call, so one (n, size) array filled field by field. The protobuf message carries the
payload a bus reader would hand out: its first min(dlc, 8) bytes, none for a remote frame
(which only requests dlc bytes); dlc is kept as given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.fixed import Field, header_message
from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.protobuf.wire import LEN, Fields, tag
from bridge_lake.export.source import Builder, ExportError, np_column
from bridge_lake.formats.ros.wire import U1, U4

STANDARD_ID_LIMIT = 1 << 11
EXTENDED_ID_LIMIT = 1 << 29
CLASSIC_PAYLOAD = 8


@dataclass(frozen=True)
class CanColumns:
    stamp: np.ndarray
    frame_id: str
    can_id: np.ndarray
    is_rtr: np.ndarray
    is_extended: np.ndarray
    is_error: np.ndarray
    dlc: np.ndarray
    data: np.ndarray
    """(n, 8) uint8, zero-padded past dlc"""


def columns(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    can_id: ArrayLike,
    is_rtr: ArrayLike,
    is_extended: ArrayLike,
    is_error: ArrayLike,
    dlc: ArrayLike,
    data: ArrayLike,
) -> CanColumns:
    """can_id is the bare arbitration id without SocketCAN flag bits: 11 bits, 29 with
    is_extended (or an error frame's error class); data (n, 8) uint8 zero-padded past dlc.
    Flags and dlc may be one value for all frames."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    ids = arg.rows("can_id", can_id, n, U4)
    extended = np.broadcast_to(arg.per_message("is_extended", is_extended, n, np.bool_), (n,))
    error = np.broadcast_to(arg.per_message("is_error", is_error, n, np.bool_), (n,))
    wide = extended | error
    too_big = np.flatnonzero(ids >= np.where(wide, EXTENDED_ID_LIMIT, STANDARD_ID_LIMIT))
    if too_big.size:
        i = int(too_big[0])
        bits = 29 if wide[i] else 11
        raise ValueError(f"can_id[{i}] = {ids[i]:#x} does not fit {bits} bits (is_extended)")
    return CanColumns(
        stamp,
        arg.text("frame_id", frame_id),
        ids,
        np.broadcast_to(arg.per_message("is_rtr", is_rtr, n, np.bool_), (n,)),
        extended,
        error,
        np.broadcast_to(arg.per_message("dlc", dlc, n, U1), (n,)),
        arg.rows("data", data, n, U1, (CLASSIC_PAYLOAD,)),
    )


def ros(c: CanColumns, ros: int, seq_start: int) -> Serialized:
    fields: list[Field] = [
        ("id", U4, 0, c.can_id),
        ("is_rtr", U1, 0, c.is_rtr),
        ("is_extended", U1, 0, c.is_extended),
        ("is_error", U1, 0, c.is_error),
        ("dlc", U1, 0, c.dlc),
        ("data", U1, CLASSIC_PAYLOAD, c.data),
    ]
    return header_message(ros, c.stamp, c.frame_id, seq_start, fields)


def protobuf(c: CanColumns) -> Serialized:
    n = c.stamp.size
    length = np.where(c.is_rtr, 0, np.minimum(c.dlc, CLASSIC_PAYLOAD))
    fields = Fields(n)
    fields.timestamp(1, c.stamp)
    fields.string(2, c.frame_id)
    fields.varint(3, c.can_id)
    fields.varint(4, c.is_extended)
    fields.varint(5, c.is_rtr)
    fields.varint(6, c.is_error)
    fields.varint(7, c.dlc)
    head = np.frombuffer(tag(8, LEN), np.uint8)  # field 8 (bytes): tag, 1-byte length, payload
    rows = np.concatenate(
        [np.broadcast_to(head, (n, head.size)), length[:, None].astype(np.uint8), c.data], axis=1
    )
    fields.rows(rows, np.where(length > 0, head.size + 1 + length, 0))
    return fields.encode()


class CanBuilder(Builder):
    """normalized/can_frames rows; a frame of more than 8 bytes (CAN FD) is refused."""

    columns = ["time_ns", "can_id", "is_extended", "is_remote", "dlc", "data"]

    def columns_of(self, rows: pa.Table) -> CanColumns:
        data = rows.column("data").combine_chunks()
        lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
        if len(lengths) and lengths.max() > CLASSIC_PAYLOAD:
            raise ExportError(
                f"{self.lane.topic}: a CAN frame carries {int(lengths.max())} bytes; "
                "can_msgs/Frame holds 8 (CAN FD is not supported by that message)"
            )
        padded = np.zeros((len(lengths), CLASSIC_PAYLOAD), np.uint8)
        flat = np.frombuffer(data.buffers()[2], np.uint8) if len(lengths) else np.zeros(0, np.uint8)
        offsets = np.frombuffer(data.buffers()[1], np.int32)[
            data.offset : data.offset + len(lengths) + 1
        ]
        col = np.arange(CLASSIC_PAYLOAD)[None, :]
        mask = col < lengths[:, None]
        src = (offsets[:-1, None] + col)[mask]
        padded[mask] = flat[src]
        remote = rows.column("is_remote").fill_null(False)
        return columns(
            self.t(rows),
            self.lane.frame_id,
            can_id=np_column(rows, "can_id", np.int64),
            is_rtr=np.asarray(remote.to_numpy(zero_copy_only=False), bool),
            is_extended=np.asarray(rows.column("is_extended").to_numpy(zero_copy_only=False), bool),
            is_error=np.zeros(len(lengths), bool),
            dlc=np_column(rows, "dlc", np.int64),
            data=padded,
        )


CODEC = Codec(columns, ros, protobuf, "bridge_lake.CanFrame", "can_frame")
KIND = Kind("can_msgs/msg/Frame", ("normalized/can_frames",), CODEC, CanBuilder, faults=("can",))

"""can_msgs/Frame -> bridge_lake.CanFrame (see bridge_lake.proto), from the same arguments as
messages.can_frame."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.messages.vehicle import check_ids
from bridge_lake.export.messages.wire import U1, U4
from bridge_lake.export.protobuf.wire import LEN, Fields, tag

CLASSIC_PAYLOAD = 8


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
    """bridge_lake.CanFrame, inputs as messages.can_frame (ids checked against 11 / 29 bits).

    `data` (n, 8) is zero-padded past dlc by contract; the message carries the payload a bus
    reader would hand out: its first min(dlc, 8) bytes, none for a remote frame (which only
    requests dlc bytes). dlc is kept as given. `ros` and `seq_start` are ignored.
    """
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    ids = arg.rows("can_id", can_id, n, U4)
    extended = np.broadcast_to(arg.per_message("is_extended", is_extended, n, np.bool_), (n,))
    error = np.broadcast_to(arg.per_message("is_error", is_error, n, np.bool_), (n,))
    rtr = np.broadcast_to(arg.per_message("is_rtr", is_rtr, n, np.bool_), (n,))
    wide = extended | error
    check_ids(ids, wide)
    dlc_arr = np.broadcast_to(arg.per_message("dlc", dlc, n, U1), (n,))
    payload = arg.rows("data", data, n, U1, (CLASSIC_PAYLOAD,))
    length = np.where(rtr, 0, np.minimum(dlc_arr, CLASSIC_PAYLOAD))

    fields = Fields(n)
    fields.timestamp(1, stamp)
    fields.string(2, arg.text("frame_id", frame_id))
    fields.varint(3, ids)
    fields.varint(4, extended)
    fields.varint(5, rtr)
    fields.varint(6, error)
    fields.varint(7, dlc_arr)
    head = np.frombuffer(tag(8, LEN), np.uint8)  # field 8 (bytes): tag, 1-byte length, payload
    rows = np.concatenate(
        [np.broadcast_to(head, (n, head.size)), length[:, None].astype(np.uint8), payload], axis=1
    )
    fields.rows(rows, np.where(length > 0, head.size + 1 + length, 0))
    return fields.encode()

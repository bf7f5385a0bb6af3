"""sensor_msgs/Image and sensor_msgs/CompressedImage from Arrow binary columns.

Both end with `uint8[] data`, so a message is a fixed prefix (header, metadata, data length)
followed by the image bytes: two parts joined per message in one call (serialized.join), the
bytes copied once from the Arrow column into the result.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join
from bridge_lake.export.messages.wire import U1, U4, Layout, header_values


def raw_pixels(
    data: arg.BinaryData, height: ArrayLike, step: ArrayLike, n: int
) -> tuple[pa.LargeBinaryArray, np.ndarray, np.ndarray, np.ndarray]:
    """image's pixel arguments checked (protobuf.image takes the same ones): the n images,
    their byte lengths, height and step (one for all or one per image); every image must be
    step * height bytes."""
    pixels = arg.binary("data", data, n)
    length = arg.binary_lengths(pixels)
    height_arr = arg.per_message("height", height, n, U4)
    step_arr = arg.per_message("step", step, n, U4)
    expected = np.broadcast_to(step_arr.astype(np.int64) * height_arr, (n,))
    wrong = np.flatnonzero(length != expected)
    if wrong.size:
        i = int(wrong[0])
        raise ValueError(f"data[{i}] has {length[i]} bytes, step * height is {expected[i]}")
    return pixels, length, height_arr, step_arr


def image(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    height: ArrayLike,
    width: ArrayLike,
    encoding: str,
    step: ArrayLike,
    data: arg.BinaryData,
    is_bigendian: bool = False,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """sensor_msgs/Image: raw pixels, len(data[i]) == step * height (checked).

    height, width and step (bytes per row) are one value for all or one per image; `encoding`
    is an image_encodings name such as "mono8", "bgr8", "bayer_rggb8".
    """
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    pixels, length, height_arr, step_arr = raw_pixels(data, height, step, n)

    prefix = Layout.message(ros)
    prefix.header(arg.text("frame_id", frame_id))
    prefix.field("height", U4)
    prefix.field("width", U4)
    prefix.string(arg.text("encoding", encoding))
    prefix.constant(U1, bool(is_bigendian))
    prefix.field("step", U4)
    prefix.field("data_length", U4)
    values = {
        **header_values(stamp, ros, seq_start),
        "height": height_arr,
        "width": arg.per_message("width", width, n, U4),
        "step": step_arr,
        "data_length": arg.convert("data lengths", length, U4),
    }
    return join([fixed_part(prefix.fill(n, values)), pixels])


def compressed_image(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    format: str,
    data: arg.BinaryData,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """sensor_msgs/CompressedImage: `format` "jpeg" or "png" (image_transport also writes
    e.g. "bgr8; jpeg compressed bgr8"); data one encoded image per message."""
    ros = arg.ros_version(ros)
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    encoded = arg.binary("data", data, n)
    prefix = Layout.message(ros)
    prefix.header(arg.text("frame_id", frame_id))
    prefix.string(arg.text("format", format))
    prefix.field("data_length", U4)
    values = {
        **header_values(stamp, ros, seq_start),
        "data_length": arg.convert("data lengths", arg.binary_lengths(encoded), U4),
    }
    return join([fixed_part(prefix.fill(n, values)), encoded])

"""sensor_msgs/Image -> foxglove.RawImage, CompressedImage -> foxglove.CompressedImage and
foxglove_msgs/CompressedVideo -> foxglove.CompressedVideo, from the same arguments as
bridge_lake.export.messages. Each image's bytes are copied once, from the Arrow column into
the result."""

from __future__ import annotations

from numpy.typing import ArrayLike

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.image import raw_pixels
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.messages.wire import U4
from bridge_lake.export.protobuf.wire import Fields


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
    """foxglove.RawImage, inputs as messages.image (len(data[i]) == step * height checked).

    RawImage has no byte order: Foxglove reads 16-bit encodings little endian, so
    is_bigendian=True is refused rather than exported to be misread. `ros` and `seq_start`
    are ignored.
    """
    if is_bigendian:
        raise ValueError("is_bigendian: foxglove.RawImage holds little-endian pixels only")
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    pixels, _, height_arr, step_arr = raw_pixels(data, height, step, n)

    fields = Fields(n)
    fields.timestamp(1, stamp)
    fields.fixed32(2, arg.per_message("width", width, n, U4))
    fields.fixed32(3, height_arr)
    fields.string(4, arg.text("encoding", encoding))
    fields.fixed32(5, step_arr)
    fields.binary(6, pixels)
    fields.string(7, arg.text("frame_id", frame_id))
    return fields.encode()


def compressed_image(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    format: str,
    data: arg.BinaryData,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """foxglove.CompressedImage; `format` as given ("jpeg", "png"; Foxglove decodes what a
    browser does). `ros` and `seq_start` are ignored."""
    stamp = arg.stamps(stamp_ns)
    encoded = arg.binary("data", data, stamp.size)
    fields = Fields(stamp.size)
    fields.timestamp(1, stamp)
    fields.binary(2, encoded)
    fields.string(3, arg.text("format", format))
    fields.string(4, arg.text("frame_id", frame_id))
    return fields.encode()


def compressed_video(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    format: str,
    data: arg.BinaryData,
    ros: int = 2,
) -> Serialized:
    """foxglove.CompressedVideo: one access unit per message, `format` "h264" (Annex B),
    "h265", "vp9" or "av1" as Foxglove documents. `ros` is ignored."""
    stamp = arg.stamps(stamp_ns)
    frames = arg.binary("data", data, stamp.size)
    fields = Fields(stamp.size)
    fields.timestamp(1, stamp)
    fields.string(2, arg.text("frame_id", frame_id))
    fields.binary(3, frames)
    fields.string(4, arg.text("format", format))
    return fields.encode()

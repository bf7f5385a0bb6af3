"""Camera frames kept encoded: sensor_msgs/CompressedImage (protobuf foxglove.CompressedImage)
and foxglove_msgs/CompressedVideo (protobuf foxglove.CompressedVideo), from
normalized/camera_frames; both take one encoded frame per message and a format string.

CompressedImage ends with `uint8[] data`: a fixed prefix (header, format, data length)
followed by the bytes, joined per message in one call. CompressedVideo (foxglove/schemas
ros_foxglove_msgs; ROS 2: builtin_interfaces/Time timestamp, string frame_id, uint8[] data,
string format; ROS 1 `time timestamp`) has no Header, so no seq in ROS 1; its `format`
follows the variable-length data, and in CDR its uint32 length is aligned to 4, so 0-3 zero
bytes of padding depend on len(data) % 4: the tail takes one of four byte strings per
message, picked by a vectorized take.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder, ExportError
from bridge_lake.formats.ros.wire import U4, Layout, header_values, stamp_values

IMAGE_BATCH_ROWS = 32
CAMERA_FAULTS = ("camera",)
VIDEO_TYPE = "foxglove_msgs/msg/CompressedVideo"
TABLES = ("normalized/camera_frames",)
"""Camera frames: every camera kind (raw images included) is made from them."""


@dataclass(frozen=True)
class EncodedColumns:
    stamp: np.ndarray
    frame_id: str
    format: str
    data: pa.LargeBinaryArray
    """one encoded frame per message"""


def columns(
    stamp_ns: ArrayLike, frame_id: str, *, format: str, data: arg.BinaryData
) -> EncodedColumns:
    """CompressedImage: `format` "jpeg" or "png" (image_transport also writes e.g. "bgr8;
    jpeg compressed bgr8"); CompressedVideo: one access unit per message, "h264" (Annex B,
    keyframes carrying SPS/PPS), "h265", "vp9" or "av1" as Foxglove documents."""
    stamp = arg.stamps(stamp_ns)
    encoded = arg.binary("data", data, stamp.size)
    return EncodedColumns(
        stamp, arg.text("frame_id", frame_id), arg.text("format", format), encoded
    )


def image_ros(c: EncodedColumns, ros: int, seq_start: int) -> Serialized:
    prefix = Layout.message(ros)
    prefix.header(c.frame_id)
    prefix.string(c.format)
    prefix.field("data_length", U4)
    values = {
        **header_values(c.stamp, ros, seq_start),
        "data_length": arg.convert("data lengths", arg.binary_lengths(c.data), U4),
    }
    return join([fixed_part(prefix.fill(c.stamp.size, values)), c.data])


def _protobuf(c: EncodedColumns, *, data: int, format: int, frame_id: int) -> Serialized:
    """foxglove.CompressedImage and CompressedVideo: a timestamp (field 1) and the same three
    fields under their own numbers, written in number order as protobuf does."""
    fields = Fields(c.stamp.size)
    fields.timestamp(1, c.stamp)
    write = {
        data: lambda: fields.binary(data, c.data),
        format: lambda: fields.string(format, c.format),
        frame_id: lambda: fields.string(frame_id, c.frame_id),
    }
    for number in sorted(write):
        write[number]()
    return fields.encode()


image_protobuf = functools.partial(_protobuf, data=2, format=3, frame_id=4)
video_protobuf = functools.partial(_protobuf, data=3, format=4, frame_id=2)


def video_ros(c: EncodedColumns, ros: int, seq_start: int) -> Serialized:
    """(no Header: `seq_start` has nothing to number)"""
    n = c.stamp.size
    length = arg.binary_lengths(c.data)
    prefix = Layout.message(ros)
    prefix.stamp()
    prefix.string(c.frame_id)
    prefix.field("data_length", U4)
    head = prefix.fill(
        n, {**stamp_values(c.stamp, ros), "data_length": arg.convert("data lengths", length, U4)}
    )
    format_layout = Layout(ros, known_alignment=4)
    format_layout.string(c.format)
    format_bytes = format_layout.fill(1, {}).tobytes()
    padding = -length % 4 if ros == 2 else np.zeros(n, np.int64)
    tails = pa.array([b"\0" * pad + format_bytes for pad in range(4)], pa.large_binary())
    return join([fixed_part(head), c.data, tails.take(pa.array(padding))])


class CompressedBuilder(Builder):
    """camera_frames kept encoded: CompressedImage (format = the lake's encoding) or
    CompressedVideo (H.264 access units only)."""

    columns = ["time_ns", "encoding", "data"]
    batch_rows = IMAGE_BATCH_ROWS

    def columns_of(self, rows: pa.Table) -> EncodedColumns:
        encodings = set(rows.column("encoding").to_pylist())
        if len(encodings) != 1:
            raise ExportError(f"{self.lane.topic}: frames of several encodings {encodings}")
        (encoding,) = encodings
        if self.lane.rule.type == VIDEO_TYPE and encoding != "h264":
            raise ExportError(f"{self.lane.topic}: CompressedVideo needs h264, not {encoding}")
        data = rows.column("data").combine_chunks()
        return columns(self.t(rows), self.lane.frame_id, format=encoding, data=data)


IMAGE_CODEC = Codec(
    columns, image_ros, image_protobuf, "foxglove.CompressedImage", "compressed_image"
)
IMAGE_KIND = Kind(
    "sensor_msgs/msg/CompressedImage", TABLES, IMAGE_CODEC, CompressedBuilder, faults=CAMERA_FAULTS
)
VIDEO_CODEC = Codec(
    columns, video_ros, video_protobuf, "foxglove.CompressedVideo", "compressed_video"
)
VIDEO_KIND = Kind(VIDEO_TYPE, TABLES, VIDEO_CODEC, CompressedBuilder, faults=CAMERA_FAULTS)

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

A CompressedVideo topic of a trimmed export (a scene, `--start`) starts at the key frame at
or before its window's start, so a player decodes it from its first message: the frames
between that key frame and the window's start come along (`from_keyframes`, as /tf brings
the last pose before the window), counted in the topic's expected messages.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder, ExportError, Lane, dataset, lane_filter
from bridge_lake.export.trim import Window
from bridge_lake.formats.ros.wire import U4, Layout, header_values, stamp_values
from bridge_lake.formats.video import NAL_PPS, NAL_SPS, nal_units
from bridge_lake.lake import Lake

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


def keyframe_before(lake: Lake, drive: str, lane: Lane, start_ns: int) -> int:
    """The time of the lane's last key frame at or before `start_ns` (`start_ns` when the
    lake has none before it)."""
    layer, table = lane.rule.table.split("/")
    data = dataset(lake, layer, table, drive)
    flt = (pc.field("time_ns") <= start_ns) & pc.field("is_keyframe")
    sel = lane_filter(lane.selection, None)
    rows = data.to_table(columns=["time_ns"], filter=flt if sel is None else flt & sel)
    return int(pc.max(rows.column("time_ns")).as_py()) if rows.num_rows else start_ns


def from_keyframes(
    lake: Lake, drive: str, lane: Lane, windows: list[Window] | None
) -> tuple[list[Window] | None, list[str]]:
    """A video lane's windows, each widened back to the key frame at or before its start
    (merged where they then overlap), and what still keeps a player from decoding the
    exported stream from its first message: a first frame that is no key frame (the lake
    has none before it), or a first key frame without SPS and PPS in band (Foxglove reads
    them from the stream: an encoder that writes them only once leaves a later window
    undecodable)."""
    if windows:
        wide = sorted(
            (Window(keyframe_before(lake, drive, lane, w.start_ns), w.end_ns) for w in windows),
            key=lambda w: w.start_ns,
        )
        windows = []
        for w in wide:
            if windows and w.start_ns <= windows[-1].end_ns:
                windows[-1] = Window(windows[-1].start_ns, max(windows[-1].end_ns, w.end_ns))
            else:
                windows.append(w)
    layer, table = lane.rule.table.split("/")
    first = (
        dataset(lake, layer, table, drive)
        .head(1, ["encoding", "is_keyframe", "data"], filter=lane_filter(lane.selection, windows))
        .to_pylist()
    )
    warnings = []
    if first and first[0]["encoding"] == "h264":
        if not first[0]["is_keyframe"]:
            warnings.append(
                f"{lane.topic}: the video starts with a frame that is not a key frame (the lake "
                "has none before it); players show nothing until its first key frame"
            )
        else:
            _, types = nal_units(np.frombuffer(first[0]["data"], np.uint8))
            if not {NAL_SPS, NAL_PPS} <= set(types.tolist()):
                warnings.append(
                    f"{lane.topic}: its first key frame carries no SPS/PPS in band; Foxglove "
                    "cannot decode the video (map the camera as sensor_msgs/msg/Image instead)"
                )
    return windows, warnings


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
VIDEO_KIND = Kind(
    VIDEO_TYPE, TABLES, VIDEO_CODEC, CompressedBuilder, faults=CAMERA_FAULTS,
    lead_in=from_keyframes,
)  # fmt: skip

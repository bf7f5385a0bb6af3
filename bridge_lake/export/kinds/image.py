"""sensor_msgs/Image from normalized/camera_frames (decoded to raw pixels); protobuf:
foxglove.RawImage.

Image ends with `uint8[] data`, so a message is a fixed prefix (header, metadata, data
length) followed by the pixels: two parts joined per message in one call, the bytes copied
once from the Arrow column into the result. RawImage has no byte order: Foxglove reads
16-bit encodings little endian, so is_bigendian=True is refused there rather than exported
to be misread.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.compressed import CAMERA_FAULTS, IMAGE_BATCH_ROWS, TABLES
from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Batch, Builder, ExportError, dataset, lane_filter, times
from bridge_lake.export.trim import Window
from bridge_lake.formats import video
from bridge_lake.formats.ros.wire import U1, U4, Layout, header_values


@dataclass(frozen=True)
class ImageColumns:
    stamp: np.ndarray
    frame_id: str
    height: np.ndarray
    width: np.ndarray
    encoding: str
    step: np.ndarray
    pixels: pa.LargeBinaryArray
    length: np.ndarray
    is_bigendian: bool


def columns(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    height: ArrayLike,
    width: ArrayLike,
    encoding: str,
    step: ArrayLike,
    data: arg.BinaryData,
    is_bigendian: bool = False,
) -> ImageColumns:
    """Raw pixels, len(data[i]) == step * height (checked). height, width and step (bytes
    per row) are one value for all or one per image; `encoding` is an image_encodings name
    such as "mono8", "bgr8", "bayer_rggb8"."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    pixels = arg.binary("data", data, n)
    length = arg.binary_lengths(pixels)
    height_arr = arg.per_message("height", height, n, U4)
    step_arr = arg.per_message("step", step, n, U4)
    expected = np.broadcast_to(step_arr.astype(np.int64) * height_arr, (n,))
    wrong = np.flatnonzero(length != expected)
    if wrong.size:
        i = int(wrong[0])
        raise ValueError(f"data[{i}] has {length[i]} bytes, step * height is {expected[i]}")
    return ImageColumns(
        stamp,
        arg.text("frame_id", frame_id),
        height_arr,
        arg.per_message("width", width, n, U4),
        arg.text("encoding", encoding),
        step_arr,
        pixels,
        length,
        bool(is_bigendian),
    )


def ros(c: ImageColumns, ros: int, seq_start: int) -> Serialized:
    prefix = Layout.message(ros)
    prefix.header(c.frame_id)
    prefix.field("height", U4)
    prefix.field("width", U4)
    prefix.string(c.encoding)
    prefix.constant(U1, c.is_bigendian)
    prefix.field("step", U4)
    prefix.field("data_length", U4)
    values = {
        **header_values(c.stamp, ros, seq_start),
        "height": c.height,
        "width": c.width,
        "step": c.step,
        "data_length": arg.convert("data lengths", c.length, U4),
    }
    return join([fixed_part(prefix.fill(c.stamp.size, values)), c.pixels])


def protobuf(c: ImageColumns) -> Serialized:
    if c.is_bigendian:
        raise ValueError("is_bigendian: foxglove.RawImage holds little-endian pixels only")
    fields = Fields(c.stamp.size)
    fields.timestamp(1, c.stamp)
    fields.fixed32(2, c.width)
    fields.fixed32(3, c.height)
    fields.string(4, c.encoding)
    fields.fixed32(5, c.step)
    fields.binary(6, c.pixels)
    fields.string(7, c.frame_id)
    return fields.encode()


class ImageBuilder(Builder):
    """camera_frames decoded to raw pixels (PyAV: H.264 access units in order, TIFF/PNG/JPEG
    one by one); raw rgb8/bgr8/mono8 rows pass through. `options.encoding`: rgb8 (default)
    or bgr8. A trimmed export starts decoding at the key frame before its window and drops
    the frames before it, so its first image is whole."""

    columns = ["time_ns", "encoding", "width", "height", "is_keyframe", "data"]
    batch_rows = IMAGE_BATCH_ROWS

    def __init__(self, lake, drive, lane, encode, shift_ns=0) -> None:
        super().__init__(lake, drive, lane, encode, shift_ns)
        self.encoding = lane.rule.options.get("encoding", "rgb8")
        if self.encoding not in ("rgb8", "bgr8"):
            raise ExportError(f"{lane.topic}: options.encoding must be rgb8 or bgr8")
        self.decoder: video.Decoder | None = None
        """the lane's H.264 context: access units are decoded in order"""
        self.intra: dict[str, video.Decoder] = {}
        self.reformatter = video.Reformatter()

    def batches(self, windows: list[Window] | None) -> Iterator[Batch]:
        wanted = windows
        if windows:
            windows = [Window(self._keyframe_before(w.start_ns), w.end_ns) for w in windows]
        for rows in self.rows(windows):
            t = times(rows)
            images = self.build(rows)
            if wanted:
                keep = np.zeros(len(t), bool)
                for w in wanted:
                    keep |= (t >= w.start_ns) & (t < w.end_ns)
                if not keep.all():
                    t, images = t[keep], images.take(np.flatnonzero(keep))
            if len(t):
                yield Batch(t - self.shift_ns, images)

    def _keyframe_before(self, start_ns: int) -> int:
        layer, table = self.lane.rule.table.split("/")
        data = dataset(self.lake, layer, table, self.drive)
        flt = (pc.field("time_ns") <= start_ns) & pc.field("is_keyframe")
        sel = lane_filter(self.lane.selection, None)
        rows = data.to_table(columns=["time_ns"], filter=flt if sel is None else flt & sel)
        return int(pc.max(rows.column("time_ns")).as_py()) if rows.num_rows else start_ns

    def columns_of(self, rows: pa.Table) -> ImageColumns:
        frames = [
            self._decode(enc, data, w, h)
            for enc, data, w, h in zip(
                rows.column("encoding").to_pylist(),
                rows.column("data").to_pylist(),
                rows.column("width").to_pylist(),
                rows.column("height").to_pylist(),
                strict=True,
            )
        ]
        h = np.array([f.shape[0] for f in frames], np.int64)
        w = np.array([f.shape[1] for f in frames], np.int64)
        c = np.array([1 if f.ndim == 2 else f.shape[2] for f in frames], np.int64)
        if len(set(c.tolist())) > 1:
            raise ExportError(f"{self.lane.topic}: frames mix mono and colour")
        enc = "mono8" if len(c) and c[0] == 1 else self.encoding
        data = pa.array([f.tobytes() for f in frames], pa.large_binary())
        return columns(
            self.t(rows), self.lane.frame_id, height=h, width=w, encoding=enc, step=w * c,
            data=data,
        )  # fmt: skip

    def _decode(self, encoding: str, data: bytes, width: int | None, height: int | None):
        if encoding in ("rgb8", "bgr8", "mono8"):
            if not width or not height:
                raise ExportError(f"{self.lane.topic}: raw {encoding} frames need width/height")
            img = np.frombuffer(data, np.uint8).reshape(height, width, -1)
            if encoding == "mono8":
                return img[:, :, 0]
            return img if encoding == self.encoding else img[:, :, ::-1]
        if encoding not in video.CODECS:
            raise ExportError(f"{self.lane.topic}: cannot decode {encoding!r} frames to an Image")
        if encoding in video.STREAMED:
            if self.decoder is None:
                self.decoder = video.Decoder(encoding)
            ctx = self.decoder
        else:
            ctx = self.intra.get(encoding) or self.intra.setdefault(
                encoding, video.Decoder(encoding)
            )
        frames = ctx.decode(data)
        if not frames:
            raise ExportError(
                f"{self.lane.topic}: a {encoding} frame gave no picture (stream starts without "
                "a key frame, or the decoder delays frames, e.g. B-frames); map the camera as "
                "foxglove_msgs/msg/CompressedVideo or sensor_msgs/msg/CompressedImage instead"
            )
        fmt = "rgb24" if self.encoding == "rgb8" else "bgr24"
        return self.reformatter.to_ndarray(frames[-1], fmt)


CODEC = Codec(columns, ros, protobuf, "foxglove.RawImage", "image")
IMAGE = "sensor_msgs/msg/Image"
KIND = Kind(
    IMAGE, TABLES, CODEC, ImageBuilder, {"encoding": str}, faults=CAMERA_FAULTS, prefetch=True
)

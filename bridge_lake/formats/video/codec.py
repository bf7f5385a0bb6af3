"""Decoding and encoding camera frames: the one module that imports PyAV.

`CODECS` maps the lake's camera_frames encodings to FFmpeg decoders; raw pixel encodings
(`RAW_CHANNELS`) need none. A `Decoder` keeps one codec context: for H.264 (`STREAMED`)
frames depend on earlier ones, so one context decodes a camera's access units in order; the
intra codecs (TIFF, PNG, JPEG) reuse one context for every frame. FFmpeg's errors become
`DecodeError`, so callers catch one of the project's errors.
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from bridge_lake.errors import BridgeLakeError

VideoFrame = av.VideoFrame
"""A decoded picture (PyAV's frame: planes, format.name, width, height, pts, color_range)."""

CODECS = {"h264": "h264", "tiff": "tiff", "png": "png", "jpeg": "mjpeg"}
"""camera_frames encoding → FFmpeg decoder; raw pixel encodings are read without one."""
STREAMED = frozenset({"h264"})
"""Encodings whose frames depend on earlier ones: every frame is decoded, in order."""
RAW_CHANNELS = {"rgb8": 3, "bgr8": 3, "mono8": 1}
"""Raw pixel encodings of camera_frames and their bytes per pixel."""
RAW_FORMATS = {"rgb8": "rgb24", "bgr8": "bgr24", "mono8": "gray"}
"""Raw pixel encodings → the FFmpeg pixel format of the same layout."""


class DecodeError(BridgeLakeError):
    """A frame FFmpeg cannot decode or encode, or an encoding no decoder handles."""


class Decoder:
    """One decoder context for frames of one encoding. `threaded` lets FFmpeg decode H.264
    on frame threads (decoding delays pictures then; give each packet a `pts` to match them)."""

    def __init__(self, encoding: str, *, threaded: bool = False) -> None:
        codec = CODECS.get(encoding)
        if codec is None:
            raise DecodeError(f"no decoder for {encoding!r} frames")
        self.encoding = encoding
        self.context = av.CodecContext.create(codec, "r")
        if threaded:
            self.context.thread_type = "AUTO"

    def decode(self, data: bytes, pts: int | None = None) -> list[VideoFrame]:
        """The pictures that this packet completes (none while the decoder holds them)."""
        packet = av.Packet(data)
        if pts is not None:
            packet.pts = pts
        try:
            return self.context.decode(packet)
        except av.error.FFmpegError as exc:
            raise DecodeError(f"{self.encoding}: {exc}") from exc

    def flush(self) -> list[VideoFrame]:
        """The pictures the decoder still holds back."""
        try:
            return self.context.decode(None)
        except av.error.FFmpegError as exc:
            raise DecodeError(f"{self.encoding}: {exc}") from exc


class Reformatter:
    """Scales and converts pictures through one reused swscale context: building one per
    frame costs about 20x the conversion."""

    def __init__(self) -> None:
        self._swscale = VideoReformatter()

    def reformat(self, frame: VideoFrame, format: str, **size: int) -> VideoFrame:
        return self._swscale.reformat(frame, format=format, **size)

    def to_ndarray(self, frame: VideoFrame, format: str, **size: int) -> np.ndarray:
        return self.reformat(frame, format, **size).to_ndarray()


def frame_from_pixels(pixels: np.ndarray, encoding: str) -> VideoFrame:
    """A picture from raw pixels of a RAW_CHANNELS encoding ((h, w) or (h, w, 3) uint8)."""
    return av.VideoFrame.from_ndarray(pixels, format=RAW_FORMATS[encoding])


def encode_image(rgb: np.ndarray, codec: str, quality: int | None = None) -> bytes:
    """An (h, w, 3) uint8 picture as one JPEG (`mjpeg`, quantizer `quality`) or PNG file."""
    ctx = av.CodecContext.create(codec, "w")
    ctx.width, ctx.height = rgb.shape[1], rgb.shape[0]
    ctx.time_base = Fraction(1, 1)
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
    if codec == "mjpeg":
        ctx.pix_fmt = "yuvj420p"
        ctx.options = {"qmin": str(quality), "qmax": str(quality)}
        frame = frame.reformat(format="yuvj420p")
    else:
        ctx.pix_fmt = "rgb24"
    return b"".join(bytes(p) for p in [*ctx.encode(frame), *ctx.encode(None)])


class H264Encoder:
    """x264 at a fixed GOP, one Annex-B access unit per frame, SPS/PPS repeated on every key
    frame (as recorders write camera streams, so a stream can be cut at any key frame)."""

    def __init__(self, width: int, height: int, fps: int, gop: int, bit_rate: int) -> None:
        self.context = av.CodecContext.create("libx264", "w")
        self.context.width, self.context.height, self.context.pix_fmt = width, height, "yuv420p"
        self.context.time_base = Fraction(1, fps)
        self.context.framerate = fps
        self.context.bit_rate = bit_rate
        self.context.options = {
            "preset": "ultrafast",
            "tune": "zerolatency",
            "threads": "1",
            "x264-params": f"repeat-headers=1:keyint={gop}:min-keyint={gop}:scenecut=0",
        }

    def encode(self, rgb: np.ndarray, pts: int) -> bytes:
        """The access unit of one (h, w, 3) uint8 picture."""
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts = pts
        return b"".join(bytes(p) for p in self.context.encode(frame))

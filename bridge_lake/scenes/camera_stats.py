"""Frame statistics for the camera rules: mean and spread of the luma, change to the previous
frame, per camera frame.

No earlier layer decodes images (the normalized layer keeps them encoded, as recorded), so
this is the one place that does, once per drive, into the small `scenes/camera_stats` table
the SQL rules read. Frames are measured at about THUMB_WIDTH pixels wide: enough for "black"
and "frozen", and the cost is then the decoding. H.264 is decoded in stream order on one
context per camera (PyAV's frame threads; the row's time as the packet's pts keeps pictures
matched to rows whatever the decoder's delay); planar YUV pictures are measured on their Y
plane directly, packed RGB (TIFF, raw rows) with numpy on every k-th pixel, anything else
through one reused swscale context to gray.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bridge_lake.formats.video import (
    CODECS,
    RAW_CHANNELS,
    STREAMED,
    DecodeError,
    Decoder,
    Reformatter,
    VideoFrame,
)
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas.scenes import CAMERA_STATS

THUMB_WIDTH = 160
"""Frames are measured on every k-th pixel (k = width // THUMB_WIDTH) of each axis."""
PLANAR_YUV = frozenset(
    {"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "nv12", "nv21"}
)
FULL_RANGE_YUV = frozenset({"yuvj420p", "yuvj422p", "yuvj444p"})
JPEG_RANGE = 2
"""AVCOL_RANGE_JPEG: a YUV picture whose luma already spans 0-255."""
RGB_ORDER = {"rgb8": (0, 1, 2), "bgr8": (2, 1, 0), "rgb24": (0, 1, 2), "bgr24": (2, 1, 0)}
"""Packed colour layouts (camera_frames encodings, PyAV formats) → index of R, G, B."""


@dataclass
class _Camera:
    """One camera's state: its H.264 context, the times of rows waiting for their picture, the
    last measured picture and the time of the last kept row."""

    stream: str
    decoder: Decoder | None = None
    pending: set[int] = field(default_factory=set)
    previous: np.ndarray | None = None
    last_kept_ns: int | None = None


@dataclass
class CameraStats:
    """Rows of scenes/camera_stats, gathered as plain lists and turned into Arrow once."""

    time_ns: list[int] = field(default_factory=list)
    stream: list[str] = field(default_factory=list)
    camera: list[str] = field(default_factory=list)
    mean: list[float | None] = field(default_factory=list)
    std: list[float | None] = field(default_factory=list)
    diff: list[float | None] = field(default_factory=list)
    frames: int = 0
    """camera rows read"""
    undecoded: int = 0
    """rows kept without a picture (the decoder gave none: no key frame yet, broken data)"""
    unsupported: int = 0
    """rows of an encoding this module cannot decode (no stats row)"""

    def add(
        self, t: int, stream: str, camera: str, luma: np.ndarray | None, prev: np.ndarray | None
    ) -> None:
        self.time_ns.append(t)
        self.stream.append(stream)
        self.camera.append(camera)
        if luma is None:
            self.undecoded += 1
            self.mean.append(None)
            self.std.append(None)
            self.diff.append(None)
            return
        self.mean.append(float(luma.mean()))
        self.std.append(float(luma.std()))
        same = prev is not None and prev.shape == luma.shape
        self.diff.append(float(np.abs(luma - prev).mean()) if same else None)

    def table(self) -> pa.Table:
        """The rows in (camera, time) order."""
        order = np.lexsort((np.asarray(self.time_ns, np.int64), np.asarray(self.camera, object)))
        return pa.table(
            {
                "time_ns": pa.array(self.time_ns, pa.int64()),
                "stream": pa.array(self.stream, pa.string()),
                "camera": pa.array(self.camera, pa.string()),
                "mean_luma": pa.array(self.mean, pa.float32()),
                "luma_std": pa.array(self.std, pa.float32()),
                "diff_prev": pa.array(self.diff, pa.float32()),
            },
            schema=CAMERA_STATS.schema,
        ).take(pa.array(order, pa.int64()))


class StatsBuilder:
    """Measures camera rows fed in time order per camera, keeping one picture per camera.

    `max_rate_hz` measures at most that many rows per second and camera: H.264 is still
    decoded whole (frames depend on earlier ones), intra-coded frames between the kept ones
    are not decoded at all; `diff_prev` is then the change between kept rows."""

    def __init__(self, max_rate_hz: float | None = None) -> None:
        self.min_step_ns = round(1e9 / max_rate_hz) if max_rate_hz else 0
        self.cameras: dict[str, _Camera] = {}
        self.reformatter = Reformatter()
        self.intra: dict[str, Decoder] = {}
        self.out = CameraStats()

    def add(
        self, time_ns: int, stream: str, camera: str, encoding: str, data: bytes, w: int, h: int
    ) -> None:
        self.out.frames += 1
        cam = self.cameras.setdefault(camera, _Camera(stream))
        keep = cam.last_kept_ns is None or time_ns - cam.last_kept_ns >= self.min_step_ns
        if keep:
            cam.last_kept_ns = time_ns
        if encoding in STREAMED:
            if cam.decoder is None:
                cam.decoder = Decoder(encoding, threaded=True)
            if keep:
                cam.pending.add(time_ns)
            try:
                frames = cam.decoder.decode(data, pts=time_ns)
            except DecodeError:
                frames = []
            self._take(camera, cam, frames)
            return
        if not keep:
            return
        if encoding not in RAW_CHANNELS and encoding not in CODECS:
            self.out.unsupported += 1
            return
        luma = self._intra(encoding, data, w, h)
        self.out.add(time_ns, cam.stream, camera, luma, cam.previous)
        if luma is not None:
            cam.previous = luma

    def finish(self) -> CameraStats:
        """Flush the decoders; rows still waiting for a picture get null figures."""
        for camera, cam in self.cameras.items():
            if cam.decoder is not None:
                with contextlib.suppress(DecodeError):
                    self._take(camera, cam, cam.decoder.flush())
            for t in sorted(cam.pending):
                self.out.add(t, cam.stream, camera, None, None)
            cam.pending.clear()
        return self.out

    def _take(self, camera: str, cam: _Camera, frames: list[VideoFrame]) -> None:
        for frame in frames:
            t = frame.pts
            if t is None or t not in cam.pending:  # a row between kept ones: not measured
                continue
            cam.pending.discard(t)
            for late in sorted(p for p in cam.pending if p < t):  # rows the decoder skipped
                cam.pending.discard(late)
                self.out.add(late, cam.stream, camera, None, None)
            luma = self._measure(frame)
            self.out.add(t, cam.stream, camera, luma, cam.previous)
            cam.previous = luma

    def _intra(self, encoding: str, data: bytes, w: int, h: int) -> np.ndarray | None:
        if encoding in RAW_CHANNELS:
            channels = RAW_CHANNELS[encoding]
            if not w or not h or len(data) < w * h * channels:
                return None
            img = np.frombuffer(data, np.uint8, w * h * channels).reshape(h, w, channels)
            if channels == 1:
                return img[:: _step(w), :: _step(w), 0].astype(np.float32)
            return _rgb_luma(img, RGB_ORDER[encoding])
        ctx = self.intra.get(encoding)
        if ctx is None:
            ctx = self.intra[encoding] = Decoder(encoding)
        try:
            frames = ctx.decode(data)
        except DecodeError:
            return None
        return self._measure(frames[-1]) if frames else None

    def _measure(self, frame: VideoFrame) -> np.ndarray:
        """Full-range luma at about THUMB_WIDTH wide, float32."""
        step, name = _step(frame.width), frame.format.name
        if name in PLANAR_YUV or name in RGB_ORDER:
            plane = frame.planes[0]
            rows = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
        if name in PLANAR_YUV:
            luma = rows[::step, : frame.width : step].astype(np.float32)
            full = name in FULL_RANGE_YUV or frame.color_range == JPEG_RANGE
            return luma if full else np.clip((luma - 16.0) * (255.0 / 219.0), 0.0, 255.0)
        if name in RGB_ORDER:  # numpy on every k-th pixel: cheaper than swscale here
            img = rows[:, : frame.width * 3].reshape(frame.height, frame.width, 3)
            return _rgb_luma(img, RGB_ORDER[name])
        size = {"width": max(1, frame.width // step), "height": max(1, frame.height // step)}
        return self.reformatter.to_ndarray(frame, "gray", **size).astype(np.float32)


def _step(width: int) -> int:
    return max(1, width // THUMB_WIDTH)


def _rgb_luma(img: np.ndarray, order: tuple[int, int, int]) -> np.ndarray:
    """BT.601 luma of every k-th pixel of a (h, w, 3) uint8 image, float32."""
    step = _step(img.shape[1])
    r, g, b = (img[::step, ::step, i].astype(np.float32) for i in order)
    return 0.299 * r + 0.587 * g + 0.114 * b


def iter_camera_rows(
    lake: Lake, drive: str
) -> Iterator[tuple[int, str, str, str, bytes, int, int]]:
    """(time, stream, camera, encoding, data, width, height) of every camera row, in the
    partition's order (each camera's rows in time order, as the normalized layer writes them).

    Read one row group at a time (at most 64 MiB, as the lake writes them): pyarrow's
    iter_batches in small batches re-reads a binary column's pages, 5x slower on images."""
    columns = ["time_ns", "stream", "camera", "encoding", "data", "width", "height"]
    for path in lake.partition_files("normalized", "camera_frames", drive):
        with contextlib.ExitStack() as stack:
            source = path if lake.is_local else stack.enter_context(lake.fs.open(path, "rb"))
            parquet = pq.ParquetFile(source)
            for group in range(parquet.num_row_groups):
                rows = parquet.read_row_group(group, columns=columns)
                yield from zip(*(rows.column(c).to_pylist() for c in columns), strict=True)


def camera_stats(lake: Lake, drive: str, max_rate_hz: float | None = None) -> CameraStats:
    """The scenes/camera_stats rows of one drive (not written; see `write_camera_stats`)."""
    builder = StatsBuilder(max_rate_hz)
    for t, stream, camera, encoding, data, w, h in iter_camera_rows(lake, drive):
        builder.add(t, stream, camera, encoding, data, w or 0, h or 0)
    return builder.finish()


def write_camera_stats(lake: Lake, drive: str, max_rate_hz: float | None = None) -> CameraStats:
    """Compute and publish scenes/camera_stats of the drive (an empty partition if it has no
    camera), so the camera rules find the table."""
    stats = camera_stats(lake, drive, max_rate_hz)
    lake.write_partition("scenes", CAMERA_STATS.name, drive, stats.table())
    return stats

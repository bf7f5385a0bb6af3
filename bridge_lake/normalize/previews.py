"""Pictures for the per-drive report, read back from a drive's published partitions: a few
camera thumbnails per camera spread over the drive and a top-down view of one lidar scan.

The report must stay cheap beside normalizing, whatever the drive's size, so only a handful
of rows are read: the small index columns of camera_frames (time, camera, encoding, key
frame flag) to choose frames, then the `data` column of just the row groups holding them
(one row group in memory at a time, and beyond each camera's first thumbnail at most
MAX_READ_BYTES of them: a row group of images is one Parquet page, so it is the unit of
reading); one lidar scan's points through a `scan_id` filter that Parquet statistics prune
to one or two row groups. Frames are decoded with PyAV (H.264 from a key frame alone; TIFF,
PNG, JPEG; raw rgb8/bgr8/mono8 with numpy), scaled to THUMB_WIDTH, turned upright and
stored as small JPEGs (at most MAX_THUMB_BYTES).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bridge_lake.formats.video import (
    CODECS,
    RAW_CHANNELS,
    RAW_FORMATS,
    DecodeError,
    Decoder,
    VideoFrame,
    encode_image,
    frame_from_pixels,
)
from bridge_lake.geometry.rotations import Transform
from bridge_lake.lake import Lake

THUMBS_PER_CAMERA = 4
MAX_CAMERAS = 8
"""Cameras beyond this are named in the report but get no thumbnails."""
THUMB_WIDTH = 192
"""Upright thumbnail width [px] (height follows the aspect ratio, at most THUMB_WIDTH)."""
JPEG_QUALITY = (4, 12)
"""mjpeg quantizer scales tried in turn (lower is finer) until a thumbnail fits."""
MAX_THUMB_BYTES = 24_000
MAX_READ_BYTES = 512 << 20
"""Compressed bytes of camera data read for more than one thumbnail per camera: a drive of
large TIFFs gets fewer thumbnails rather than a long read. Every camera shown gets its first
thumbnail whatever it costs (at most MAX_CAMERAS row groups)."""
READ_BUFFER_BYTES = 1 << 20
INDEX_COLUMNS = ["time_ns", "camera", "encoding", "is_keyframe", "width", "height", "rotate_cw_deg"]

LIDAR_SIZE = 360
"""Side of the top-down lidar picture [px]."""
LIDAR_RANGE_QUANTILE = 0.98
"""The view holds this share of the scan's points by horizontal range; farther ones are
counted as not shown, so a few far returns do not shrink the rest to a dot."""
COLORMAP = np.array(
    [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)], np.float32
)
"""Viridis at five stops: low points dark blue, high points yellow (legible for colour-blind
readers and in grey)."""
BACKGROUND = (250, 250, 250)


@dataclass(frozen=True)
class Thumbnail:
    camera: str
    time_ns: int
    jpeg: bytes | None
    """None when the frame could not be decoded (see `problem`)."""
    width: int = 0
    height: int = 0
    problem: str | None = None


@dataclass(frozen=True)
class CameraPreview:
    thumbnails: list[Thumbnail]
    cameras: list[str]
    """every camera of the drive, shown or not"""
    bytes_read: int
    """compressed bytes of the data column read"""


@dataclass(frozen=True)
class LidarPreview:
    stream: str
    frame: str
    """the frame the points are drawn in"""
    scan_id: int
    time_ns: int
    points: int
    """points of the scan"""
    shown: int
    """points inside the view"""
    png: bytes
    half_extent_m: float
    """the picture spans ±half_extent_m around the sensor in x and y"""
    z_low_m: float
    z_high_m: float
    """heights at the two ends of the colour map (2nd and 98th percentile)"""


# --- cameras ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pick:
    camera: str
    rank: int
    """0 for a camera's first thumbnail, 1 for its second, ..."""
    file: int
    group: int
    row: int
    """row inside the row group"""
    time_ns: int
    encoding: str
    width: int
    height: int
    rotate_cw_deg: int


def camera_preview(
    lake: Lake, drive: str, *, per_camera: int = THUMBS_PER_CAMERA, max_read: int = MAX_READ_BYTES
) -> CameraPreview:
    """Thumbnails of the drive's camera_frames partition (none if it has no frames)."""
    files = lake.partition_files("normalized", "camera_frames", drive)
    picks, cameras = _choose(_index(lake, files), per_camera)
    by_group: dict[tuple[int, int], list[_Pick]] = {}
    read = 0
    for p in sorted(picks, key=lambda p: (p.rank, p.camera)):
        key = (p.file, p.group)
        if key not in by_group:
            cost = _data_bytes(lake, files[p.file], p.group)
            if p.rank > 0 and read + cost > max_read:
                continue
            read += cost
        by_group.setdefault(key, []).append(p)
    thumbs: list[Thumbnail] = []
    for (file, group), group_picks in sorted(by_group.items()):
        with _open(lake, files[file]) as parquet:  # one row group's images in memory at a time
            data = parquet.read_row_group(group, columns=["data"]).column("data")
        thumbs.extend(_thumbnail(p, data[p.row].as_py()) for p in group_picks)
        del data
    thumbs.sort(key=lambda t: (t.camera, t.time_ns))
    return CameraPreview(thumbs, cameras, read)


def _index(lake: Lake, files: list[str]) -> dict[str, np.ndarray]:
    """The index columns of every row, with the file, row group and row inside it."""
    parts: list[dict[str, np.ndarray]] = []
    for i, path in enumerate(files):
        with _open(lake, path) as parquet:
            meta = parquet.metadata
            table = parquet.read(columns=INDEX_COLUMNS)
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        starts = np.repeat(np.cumsum([0, *sizes])[:-1], sizes)
        cols = {c: table.column(c) for c in INDEX_COLUMNS}
        cols["is_keyframe"] = pc.fill_null(cols["is_keyframe"], False)
        for c in ("width", "height", "rotate_cw_deg"):  # unknown: 0
            cols[c] = pc.fill_null(cols[c], 0)
        part = {c: v.to_numpy(zero_copy_only=False) for c, v in cols.items()}
        part["file"] = np.full(table.num_rows, i)
        part["group"] = np.repeat(np.arange(len(sizes)), sizes)
        part["row"] = np.arange(table.num_rows) - starts
        parts.append(part)
    if not parts:
        return {}
    return {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}


def _choose(index: dict[str, np.ndarray], per_camera: int) -> tuple[list[_Pick], list[str]]:
    """Per camera, the frames nearest `per_camera` times spread evenly over its span. H.264
    frames are taken at key frames, which decode alone (a camera without flagged key frames:
    its first frame, as a stream usually starts with one)."""
    if not index:
        return [], []
    cameras = sorted(set(index["camera"].tolist()))
    picks = []
    for camera in cameras[:MAX_CAMERAS]:
        mine = np.flatnonzero(index["camera"] == camera)
        mine = mine[np.argsort(index["time_ns"][mine], kind="stable")]
        streamed = index["encoding"][mine] == "h264"
        usable = mine[~streamed | index["is_keyframe"][mine]]
        if usable.size == 0:
            usable = mine[:1]
        times = index["time_ns"][usable]
        targets = times[0] + (np.arange(per_camera) + 0.5) / per_camera * (times[-1] - times[0])
        nearest = sorted({int(np.abs(times - t).argmin()) for t in targets})
        for rank, k in enumerate(nearest):
            i = usable[k]
            picks.append(
                _Pick(
                    camera,
                    rank,
                    int(index["file"][i]),
                    int(index["group"][i]),
                    int(index["row"][i]),
                    int(index["time_ns"][i]),
                    str(index["encoding"][i]),
                    int(index["width"][i]),
                    int(index["height"][i]),
                    int(index["rotate_cw_deg"][i]),
                )
            )
    return picks, cameras


@contextlib.contextmanager
def _open(lake: Lake, path: str) -> Iterator[pq.ParquetFile]:
    """A part file read through a 1 MiB buffer instead of pre-buffering whole column chunks:
    reading a row group of images then peaks at about 1.5x its size instead of 3x."""
    with contextlib.ExitStack() as stack:
        source = path if lake.is_local else stack.enter_context(lake.fs.open(path, "rb"))
        yield pq.ParquetFile(source, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)


def _data_bytes(lake: Lake, path: str, group: int) -> int:
    with _open(lake, path) as parquet:
        rg = parquet.metadata.row_group(group)
        names = [rg.column(c).path_in_schema for c in range(rg.num_columns)]
        return rg.column(names.index("data")).total_compressed_size


def _thumbnail(p: _Pick, data: bytes) -> Thumbnail:
    try:
        frame = _decode(p.encoding, data, p.width, p.height)
    except (DecodeError, ValueError) as exc:
        return Thumbnail(p.camera, p.time_ns, None, problem=f"{p.encoding}: {exc}")
    if frame is None:
        return Thumbnail(p.camera, p.time_ns, None, problem=f"{p.encoding}: no picture decoded")
    quarter_turns = (p.rotate_cw_deg // 90) % 4
    up_w, up_h = (frame.height, frame.width) if quarter_turns % 2 else (frame.width, frame.height)
    scale = min(THUMB_WIDTH / up_w, THUMB_WIDTH / up_h, 1.0)
    tw, th = _even(up_w * scale), _even(up_h * scale)
    size = (th, tw) if quarter_turns % 2 else (tw, th)
    rgb = frame.reformat(width=size[0], height=size[1], format="rgb24").to_ndarray()
    upright = np.ascontiguousarray(np.rot90(rgb, -quarter_turns))
    for q in JPEG_QUALITY:
        jpeg = encode_image(upright, "mjpeg", q)
        if len(jpeg) <= MAX_THUMB_BYTES:
            return Thumbnail(p.camera, p.time_ns, jpeg, tw, th)
    return Thumbnail(p.camera, p.time_ns, None, problem=f"thumbnail over {MAX_THUMB_BYTES} B")


def _even(v: float) -> int:
    return max(2, round(v / 2) * 2)


def _decode(encoding: str, data: bytes, width: int, height: int) -> VideoFrame | None:
    if encoding in RAW_FORMATS:
        channels = RAW_CHANNELS[encoding]
        if not width or not height or len(data) < width * height * channels:
            raise ValueError(f"{len(data)} bytes do not hold {width}x{height}x{channels}")
        pixels = np.frombuffer(data, np.uint8, width * height * channels)
        shape = (height, width) if channels == 1 else (height, width, channels)
        return frame_from_pixels(pixels.reshape(shape), encoding)
    if encoding not in CODECS:
        raise ValueError("no decoder for this encoding")
    ctx = Decoder(encoding)
    frames = ctx.decode(data)
    frames += ctx.flush()  # a decoder may hold the picture back
    return frames[-1] if frames else None


# --- lidar --------------------------------------------------------------------------------


def lidar_preview(
    lake: Lake, drive: str, to_base: Callable[[str], Transform | None] | None = None
) -> LidarPreview | None:
    """A top-down picture of the scan nearest the drive's middle among its full scans (at
    least half the median point count), or None when the drive has no lidar points.

    `to_base(frame_id)` gives the lidar's pose in the vehicle frame (base_link: x forward,
    y left, z up) from the drive's rig: "top-down" and "height" then mean what they say
    whatever way the sensor is mounted (NCLT's Velodyne frame has z pointing down). Without
    it (or when it returns None) the points are drawn in their sensor frame."""
    scan_files = lake.partition_files("normalized", "lidar_scans", drive)
    if not scan_files:
        return None
    scans = pq.read_table(
        scan_files,
        filesystem=lake.fs,
        columns=["scan_id", "time_ns", "stream", "frame_id", "point_count"],
    )
    counts = scans.column("point_count").to_numpy()
    if not (counts > 0).any():
        return None
    full = counts >= max(1, 0.5 * np.median(counts[counts > 0]))
    times = scans.column("time_ns").to_numpy()
    middle = (times.min() + times.max()) // 2
    k = int(np.flatnonzero(full)[np.abs(times[full] - middle).argmin()])
    scan_id = int(scans.column("scan_id")[k].as_py())
    points = pq.read_table(  # Parquet statistics on scan_id prune to the scan's row groups
        lake.partition_files("normalized", "lidar_points", drive),
        filesystem=lake.fs,
        columns=["x", "y", "z"],
        filters=[("scan_id", "==", scan_id)],
    )
    xyz = np.column_stack([points.column(c).to_numpy().astype(np.float64) for c in "xyz"])
    xyz = xyz[np.isfinite(xyz).all(axis=1)]
    if xyz.shape[0] == 0:
        return None
    frame_id = str(scans.column("frame_id")[k].as_py())
    transform = to_base(frame_id) if to_base is not None else None
    frame = f"sensor frame {frame_id}"
    if transform is not None:
        xyz, frame = transform.apply(xyz), f"base_link (from {frame_id} through the rig)"
    x, y, z = xyz.T
    half = nice_ceiling(float(np.quantile(np.hypot(x, y), LIDAR_RANGE_QUANTILE)))
    z_low, z_high = (float(v) for v in np.quantile(z, [0.02, 0.98]))
    png, shown = _top_down(x, y, z, half, z_low, z_high)
    stream = str(scans.column("stream")[k].as_py())
    return LidarPreview(
        stream, frame, scan_id, int(times[k]), int(x.size), shown, png, half, z_low, z_high
    )


def colormap(v: np.ndarray) -> np.ndarray:
    """Values in [0, 1] → (n, 3) uint8 colours of COLORMAP, linearly between its stops."""
    pos = np.clip(v, 0.0, 1.0) * (len(COLORMAP) - 1)
    lo = np.minimum(pos.astype(int), len(COLORMAP) - 2)
    frac = (pos - lo)[:, None]
    return (COLORMAP[lo] * (1 - frac) + COLORMAP[lo + 1] * frac).round().astype(np.uint8)


def _top_down(
    x: np.ndarray, y: np.ndarray, z: np.ndarray, half: float, z_low: float, z_high: float
) -> tuple[bytes, int]:
    """The points seen from above (x up, y to the left, the sensor in the middle), 2x2 px
    each, drawn lowest first so the highest return at a place shows; PNG bytes and how
    many points lie inside the view."""
    px_per_m = (LIDAR_SIZE - 2) / (2 * half)
    col = np.floor(LIDAR_SIZE / 2 - y * px_per_m).astype(np.int64)
    row = np.floor(LIDAR_SIZE / 2 - x * px_per_m).astype(np.int64)
    inside = (col >= 0) & (col < LIDAR_SIZE - 1) & (row >= 0) & (row < LIDAR_SIZE - 1)
    col, row, zi = col[inside], row[inside], z[inside]
    order = np.argsort(zi, kind="stable")
    col, row = col[order], row[order]
    colours = colormap((zi[order] - z_low) / max(z_high - z_low, 1e-6))
    img = np.empty((LIDAR_SIZE, LIDAR_SIZE, 3), np.uint8)
    img[:] = BACKGROUND
    for dr in (0, 1):
        for dc in (0, 1):
            img[row + dr, col + dc] = colours
    c = LIDAR_SIZE // 2
    img[c - 6 : c + 7, c - 1 : c + 1] = (214, 39, 40)  # the sensor: a red cross
    img[c - 1 : c + 1, c - 6 : c + 7] = (214, 39, 40)
    return encode_image(img, "png"), int(inside.sum())


def nice_ceiling(v: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least `v` (> 0)."""
    v = max(v, 1e-3)
    exp = np.floor(np.log10(v))
    for m in (1, 2, 5, 10):
        if m * 10**exp >= v * (1 - 1e-9):
            return float(m * 10**exp)
    return float(10 ** (exp + 1))


def nice_floor(v: float) -> float:
    """The largest 1, 2 or 5 times a power of ten that is at most `v` (> 0): scale bars."""
    v = max(v, 1e-3)
    exp = np.floor(np.log10(v))
    for m in (5, 2, 1):
        if m * 10**exp <= v * (1 + 1e-9):
            return float(m * 10**exp)
    return float(10**exp)

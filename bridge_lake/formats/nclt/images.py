"""Ladybug3 images `lb3/Cam<k>/<utime>.tiff`: kept encoded, described from their own TIFF header.

The lake stores the TIFF bytes unchanged (spec §9); decoding pixels is left to previews. What
the normalized layer needs — width, height, pixel encoding, compression — is read from the
first IFD, not assumed (colour vs Bayer and compression are to be verified on real files).
The stored images lie on their side; every record carries the rotation that makes it upright
(90° clockwise) and the upright size, instead of rotating pixels.

Error policy: a TIFF whose header, IFD or strips do not fit the file is a `FormatError`
naming the file and the offset (one image is one record; there is nothing to resynchronize).
All offsets and counts are checked against the file size before anything is read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from bridge_lake.errors import FormatError, TruncatedFileError
from bridge_lake.formats.nclt.constants import LB3_UPRIGHT_ROTATION
from bridge_lake.formats.nclt.kinds import camera_of, utime_of

TAG_WIDTH = 256
TAG_HEIGHT = 257
TAG_BITS = 258
TAG_COMPRESSION = 259
TAG_PHOTOMETRIC = 262
TAG_STRIP_OFFSETS = 273
TAG_SAMPLES = 277
TAG_ROWS_PER_STRIP = 278
TAG_STRIP_BYTES = 279
TAG_X_RESOLUTION = 282
TAG_Y_RESOLUTION = 283
TAG_PLANAR = 284
TAG_RESOLUTION_UNIT = 296
TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}
"""Byte size of each TIFF field type (BYTE, ASCII, SHORT, LONG, RATIONAL, ...)."""
COMPRESSION = {1: "none", 5: "lzw", 7: "jpeg", 8: "deflate", 32773: "packbits", 32946: "deflate"}
PHOTOMETRIC = {0: "mono", 1: "mono", 2: "rgb", 32803: "bayer"}
MAX_IFD_ENTRIES = 4096

SCHEMA = pa.schema(
    [
        ("utime", pa.int64()),
        ("camera", pa.uint8()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("upright_width", pa.int32()),
        ("upright_height", pa.int32()),
        ("rotation", pa.string()),
        ("encoding", pa.string()),
        ("compression", pa.string()),
        ("data", pa.large_binary()),
    ]
)
"""One row per image; `data` is the unchanged TIFF file."""


@dataclass(frozen=True)
class TiffInfo:
    width: int
    height: int
    encoding: str
    """ROS-style pixel encoding: mono8, rgb8, mono16, bayer8, ..."""
    compression: str


def tiff_info(data: bytes, path: str = "<bytes>") -> TiffInfo:
    """Describe a TIFF from its first IFD, validating every offset against `len(data)`."""
    if len(data) < 8:
        raise TruncatedFileError(f"TIFF header needs 8 bytes, file has {len(data)}", path=path)
    order = {b"II": "<", b"MM": ">"}.get(data[:2])
    if order is None or struct.unpack_from(order + "H", data, 2)[0] != 42:
        raise FormatError("not a TIFF (byte order mark and 42 expected)", path=path, offset=0)
    (ifd,) = struct.unpack_from(order + "I", data, 4)
    if ifd + 2 > len(data):
        raise TruncatedFileError("first IFD lies past the end of the file", path=path, offset=4)
    (count,) = struct.unpack_from(order + "H", data, ifd)
    if count > MAX_IFD_ENTRIES or ifd + 2 + 12 * count > len(data):
        raise TruncatedFileError(f"IFD of {count} entries does not fit", path=path, offset=ifd)
    tags = {}
    for i in range(count):
        tag, typ, n = struct.unpack_from(order + "HHI", data, ifd + 2 + 12 * i)
        tags[tag] = _values(data, order, ifd + 2 + 12 * i, typ, n, path)

    def first(tag: int, default: int | None = None) -> int:
        """A tag's first value; a tag without integer values counts as absent."""
        values = tags.get(tag) or ([default] if default is not None else [])
        if not values:
            raise FormatError(f"TIFF lacks required tag {tag}", path=path, offset=ifd)
        return values[0]

    width, height = first(TAG_WIDTH), first(TAG_HEIGHT)
    try:
        offsets, sizes = tags[TAG_STRIP_OFFSETS], tags[TAG_STRIP_BYTES]
    except KeyError as exc:
        raise FormatError(f"TIFF lacks required tag {exc.args[0]}", path=path, offset=ifd) from None
    if len(offsets) != len(sizes) or any(
        o + s > len(data) for o, s in zip(offsets, sizes, strict=False)
    ):
        raise TruncatedFileError("image strips lie past the end of the file", path=path, offset=ifd)
    samples = first(TAG_SAMPLES, 1)
    bits = first(TAG_BITS, 1)
    photometric = PHOTOMETRIC.get(first(TAG_PHOTOMETRIC, 1), "unknown")
    base = (
        {1: "mono", 3: "rgb", 4: "rgba"}.get(samples, f"{samples}ch")
        if photometric != "bayer"
        else "bayer"
    )
    compression = COMPRESSION.get(first(TAG_COMPRESSION, 1), "unknown")
    return TiffInfo(width, height, f"{base}{bits}", compression)


def _values(data: bytes, order: str, entry: int, typ: int, n: int, path: str) -> list[int]:
    size = TYPE_SIZES.get(typ)
    if size is None:
        raise FormatError(f"unknown TIFF field type {typ}", path=path, offset=entry)
    if typ not in (1, 3, 4):
        return []  # only integer tags are interpreted; the rest are kept in the bytes
    at = entry + 8
    if size * n > 4:
        (at,) = struct.unpack_from(order + "I", data, entry + 8)
        if at + size * n > len(data):
            raise TruncatedFileError(
                "TIFF tag values lie past the end of the file", path=path, offset=entry
            )
    fmt = {1: "B", 3: "H", 4: "I"}[typ]
    return list(struct.unpack_from(f"{order}{n}{fmt}", data, at))


def read_lb3_image(path: str | os.PathLike, relative_path: str | None = None) -> dict[str, object]:
    """One image as a SCHEMA row; camera and utime come from `lb3/Cam<k>/<utime>.tiff`."""
    path = Path(path)
    rel = relative_path or "/".join(path.parts[-3:])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read: {exc}", path=str(path)) from exc
    info = tiff_info(data, str(path))
    return {
        "utime": utime_of(rel),
        "camera": camera_of(rel),
        "width": info.width,
        "height": info.height,
        "upright_width": info.height,
        "upright_height": info.width,
        "rotation": LB3_UPRIGHT_ROTATION,
        "encoding": info.encoding,
        "compression": info.compression,
        "data": data,
    }


def iter_lb3_batches(paths: Iterable[Path], *, batch_images: int = 64) -> Iterator[pa.RecordBatch]:
    """Images as record batches of at most `batch_images` rows (bounded memory), in input order."""
    rows: list[dict[str, object]] = []
    for path in paths:
        rows.append(read_lb3_image(path))
        if len(rows) == batch_images:
            yield pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
            rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def encode_baseline_tiff(rgb: bytes, width: int, height: int) -> bytes:
    """An uncompressed baseline RGB TIFF (little endian, one strip) of `width` x `height` pixels.

    The synthetic sessions use it; it is here beside the reader so the tag numbers exist once.
    """
    if len(rgb) != width * height * 3:
        raise ValueError(f"need {width * height * 3} bytes of RGB, got {len(rgb)}")
    entries = [
        (TAG_WIDTH, 4, 1, width),
        (TAG_HEIGHT, 4, 1, height),
        (TAG_BITS, 3, 3, None),
        (TAG_COMPRESSION, 3, 1, 1),
        (TAG_PHOTOMETRIC, 3, 1, 2),
        (TAG_STRIP_OFFSETS, 4, 1, None),
        (TAG_SAMPLES, 3, 1, 3),
        (TAG_ROWS_PER_STRIP, 4, 1, height),
        (TAG_STRIP_BYTES, 4, 1, len(rgb)),
        (TAG_X_RESOLUTION, 5, 1, None),
        (TAG_Y_RESOLUTION, 5, 1, None),
        (TAG_PLANAR, 3, 1, 1),
        (TAG_RESOLUTION_UNIT, 3, 1, 2),
    ]
    ifd_at = 8
    extra_at = ifd_at + 2 + 12 * len(entries) + 4
    bits_at, xres_at, yres_at = extra_at, extra_at + 6, extra_at + 14
    pixels_at = extra_at + 22
    pointers = {
        TAG_BITS: bits_at,
        TAG_STRIP_OFFSETS: pixels_at,
        TAG_X_RESOLUTION: xres_at,
        TAG_Y_RESOLUTION: yres_at,
    }
    out = bytearray(b"II" + struct.pack("<HI", 42, ifd_at) + struct.pack("<H", len(entries)))
    for tag, typ, n, value in entries:
        value = pointers.get(tag, value)
        packed = (
            struct.pack("<H", value) + b"\0\0" if typ == 3 and n == 1 else struct.pack("<I", value)
        )
        out += struct.pack("<HHI", tag, typ, n) + packed
    out += struct.pack("<I", 0)
    out += struct.pack("<3H", 8, 8, 8) + struct.pack("<2I", 72, 1) + struct.pack("<2I", 72, 1)
    assert len(out) == pixels_at
    return bytes(out) + rgb

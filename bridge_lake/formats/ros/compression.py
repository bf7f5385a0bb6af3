"""Chunk compression of MCAP (zstd, lz4) and ROS 1 bags (lz4, bz2): whole and cut chunks.

A chunk cut by the end of the file still holds every compressed block written before the
crash; the streaming decompressors hand those out, and the caller keeps the whole records
among them. Output sizes are bounded by what the chunk header announces, so a lying size
cannot make us allocate more than the chunk claims (itself bounded by the file's size).
"""

from __future__ import annotations

import bz2

import lz4.frame
import zstandard

NONE = ("", "none")
ONE_SHOT_RATIO = 64
"""A zstd or lz4 chunk whose content is at most this many times its compressed size (plus
OUT_STEP) is decompressed in one call into a buffer of its stated size; beyond, streamed."""
OUT_STEP = 8 << 20
"""Output asked of lz4 / bz2 at a time: they allocate what `max_length` allows up front, so
a size claimed by a damaged header is never asked for in one go."""
STEP = 1 << 10
"""Compressed bytes fed at a time: 1 KB expands to at most ~32 MB (RLE blocks)."""


class DecompressError(ValueError):
    """A chunk's bytes do not decompress with the compression it names."""


def known(compression: str) -> bool:
    return compression in NONE or compression in ("zstd", "lz4", "bz2")


MAX_CONTENT = 1 << 30
"""Largest chunk content we decompress (writers' chunks are a few MB): a header claiming
more is damage, not an allocation."""


def decompress(compression: str, data: bytes | memoryview, size: int) -> bytes | memoryview:
    """A whole chunk's content; `size` is the uncompressed size its header states. The
    output never grows past `size` (a lying header cannot become an allocation)."""
    if size > MAX_CONTENT:
        raise DecompressError(f"its header claims {size} bytes of content")
    try:
        if compression in NONE:
            return data
        if compression == "zstd":
            return _zstd(data, size)
        if compression == "lz4" and _lz4_sized(data, size):
            return lz4.frame.decompress(data)  # one call, as rosbags and mcap do it
        if compression in ("lz4", "bz2"):
            dec = _frame_decompressor(compression)
            out = _stepped(dec, data, size + 1)
            if not dec.eof:  # the readers decompress whole frames and fail on this
                raise DecompressError(f"{compression} frame is incomplete")
            return out
    except DecompressError:
        raise
    except (zstandard.ZstdError, RuntimeError, OSError, ValueError, EOFError) as exc:
        raise DecompressError(f"{compression} data does not decompress: {exc}") from None
    raise DecompressError(f"unknown compression {compression!r}")


def _zstd(data: bytes | memoryview, size: int) -> bytes:
    """One zstd frame (as MCAP writers write them): its own content size must be the
    chunk's; without one, streamed up to `size`."""
    frame = zstandard.frame_content_size(data)
    if frame >= 0 and frame != size:
        raise DecompressError(f"zstd frame holds {frame} bytes, the chunk header says {size}")
    if frame >= 0 and size <= ONE_SHOT_RATIO * len(data) + OUT_STEP:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    # no size in the frame, or one far beyond what the data can plausibly hold: streamed,
    # so memory follows what really comes out
    dobj = zstandard.ZstdDecompressor().decompressobj()
    out = _zstd_stream(data, size + 1, dobj)  # a longer output is caught by the caller
    if not dobj.eof:
        raise DecompressError("zstd frame is incomplete")
    return out


def _zstd_stream(
    data: bytes | memoryview, limit: int, dobj: zstandard.ZstdDecompressionObj | None = None
) -> bytes:
    """Up to about `limit` bytes of a zstd stream, as far as it decodes (a cut frame gives
    everything before the cut). Input goes in small pieces, so a frame that expands wildly
    (RLE blocks) stops within one piece's worth past the limit."""
    out = bytearray()
    dobj = dobj or zstandard.ZstdDecompressor().decompressobj()
    view = memoryview(data)
    try:
        for at in range(0, len(view), STEP):
            out += dobj.decompress(view[at : at + STEP])
            if len(out) >= limit:
                break
    except zstandard.ZstdError:
        pass  # the stream breaks here: keep what came before
    return bytes(out[:limit])


def decompress_prefix(compression: str, data: bytes | memoryview, size: int) -> bytes:
    """As much of a cut chunk's content as its complete compressed blocks give (at most
    `size` bytes); b"" when nothing decompresses."""
    try:
        if compression in NONE:
            return bytes(data[:size])
        if compression == "zstd":
            out = _zstd_stream(data, size)
        elif compression in ("lz4", "bz2"):
            out = _stepped(_frame_decompressor(compression), data, size, partial=True)
        else:
            return b""
    except (zstandard.ZstdError, RuntimeError, OSError, ValueError, EOFError):
        return b""
    return out[:size]


def _lz4_sized(data: bytes | memoryview, size: int) -> bool:
    """Whether an lz4 frame states the chunk's size, and a size its data can plausibly
    hold: then one `lz4.frame.decompress` (which allocates that size) is safe and fastest."""
    try:
        stated = lz4.frame.get_frame_info(data)["content_size"]
    except (RuntimeError, ValueError):
        return False
    return stated == size and size <= ONE_SHOT_RATIO * len(data) + OUT_STEP


def _frame_decompressor(compression: str) -> lz4.frame.LZ4FrameDecompressor | bz2.BZ2Decompressor:
    return lz4.frame.LZ4FrameDecompressor() if compression == "lz4" else bz2.BZ2Decompressor()


def _stepped(
    dec: lz4.frame.LZ4FrameDecompressor | bz2.BZ2Decompressor,
    data: bytes | memoryview,
    limit: int,
    *,
    partial: bool = False,
) -> bytes:
    """Up to `limit` bytes from an lz4 / bz2 decompressor, OUT_STEP at a time. `partial`:
    a cut frame; what decompressed before the error is kept."""
    feed = bytes(data)
    try:
        first = dec.decompress(feed, max_length=min(OUT_STEP, limit))
        if dec.eof or not first:
            return first
    except (RuntimeError, OSError, EOFError):
        if not partial:
            raise
        return b""
    out = bytearray(first)
    feed = b""
    try:
        while len(out) < limit and not dec.eof:
            piece = dec.decompress(feed, max_length=min(OUT_STEP, limit - len(out)))
            feed = b""
            out += piece
            if not piece and dec.needs_input:
                break
    except (RuntimeError, OSError, EOFError):
        if not partial:
            raise
    return bytes(out)


def compress(compression: str, data: bytes | memoryview) -> bytes:
    """A chunk's bytes in `compression`: every bag1 chunk we write and every chunk recover
    rebuilds. LZ4 is the frame roslz4 (ROS 1's rosbag) reads: a content checksum, no content
    size in the header and independent blocks (4 MB at most, as ROS writes them). Measured
    with Debian's roslz4: a stated size, a missing checksum, or linked blocks in a chunk of
    more than one block each fail with "malformed data to decompress" (lz4's defaults and
    rosbags' writer do all three). Other LZ4 readers (rosbags, mcap) read this frame too."""
    if compression in NONE:
        return bytes(data)
    if compression == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    if compression == "lz4":
        return lz4.frame.compress(
            data,
            compression_level=0,
            block_size=lz4.frame.BLOCKSIZE_MAX4MB,
            block_linked=False,
            content_checksum=True,
            store_size=False,
        )
    if compression == "bz2":
        return bz2.compress(data, 9)
    raise DecompressError(f"unknown compression {compression!r}")

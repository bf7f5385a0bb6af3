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


class DecompressError(ValueError):
    """A chunk's bytes do not decompress with the compression it names."""


def known(compression: str) -> bool:
    return compression in NONE or compression in ("zstd", "lz4", "bz2")


def decompress(compression: str, data: bytes | memoryview, size: int) -> bytes | memoryview:
    """A whole chunk's content; `size` is the uncompressed size its header states."""
    try:
        if compression in NONE:
            return data
        if compression == "zstd":
            return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
        if compression == "lz4":
            return lz4.frame.decompress(data)
        if compression == "bz2":
            return bz2.decompress(data)
    except (zstandard.ZstdError, RuntimeError, OSError, ValueError, EOFError) as exc:
        raise DecompressError(f"{compression} data does not decompress: {exc}") from None
    raise DecompressError(f"unknown compression {compression!r}")


def decompress_prefix(compression: str, data: bytes | memoryview, size: int) -> bytes:
    """As much of a cut chunk's content as its complete compressed blocks give (at most
    `size` bytes); b"" when nothing decompresses."""
    try:
        if compression in NONE:
            return bytes(data[:size])
        if compression == "zstd":
            out = zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))
        elif compression == "lz4":
            out = lz4.frame.LZ4FrameDecompressor().decompress(bytes(data), max_length=size)
        elif compression == "bz2":
            out = bz2.BZ2Decompressor().decompress(bytes(data), max_length=size)
        else:
            return b""
    except (zstandard.ZstdError, RuntimeError, OSError, ValueError, EOFError):
        return b""
    return out[:size]


def compress(compression: str, data: bytes) -> bytes:
    """A chunk rebuilt from the whole records of a cut one, in the compression it had."""
    if compression in NONE:
        return data
    if compression == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    if compression == "lz4":
        return lz4.frame.compress(data)
    if compression == "bz2":
        return bz2.compress(data, 9)
    raise DecompressError(f"unknown compression {compression!r}")

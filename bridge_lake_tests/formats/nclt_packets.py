"""Hand-built velodyne_hits.bin bytes for tests, written with struct (independent of the reader)."""

from __future__ import annotations

import struct

MAGIC = struct.pack("<4H", 44444, 44444, 44444, 44444)


def hit(x: int, y: int, z: int, intensity: int = 0, laser: int = 0) -> bytes:
    return struct.pack("<HHHBB", x, y, z, intensity, laser)


def packet(
    utime: int, hits: list[bytes], *, num_hits: int | None = None, magic: bytes = MAGIC
) -> bytes:
    n = len(hits) if num_hits is None else num_hits
    return magic + struct.pack("<IQ", n, utime) + b"\xee" * 4 + b"".join(hits)


def metres(code: int) -> float:
    return code * 0.005 - 100.0

"""Process memory settings for the heavy steps (normalize, calibrate, export).

glibc raises its mmap threshold each time a large block is freed (up to 32 MB), after which
numpy's per-batch temporaries of a few MB come from the heap, fragment it and are never
returned: on a 15-minute drive the calibrated layer's RSS settled at ~3x the live data.
A fixed threshold keeps every block above 1 MiB in its own mapping, returned to the system
when freed, so peak RSS follows what is alive and no longer the drive's length (measured in
benchmarks/bench_calibrate.py).

An export allocates the same few sizes batch after batch (points, messages, chunks of
megabytes): mapped and unmapped each time, every batch faulted its pages in again, a fifth of
an export's CPU. Exports keep freed blocks below 8 MB in the heap for the next batch, and up
to 64 MB of free heap (`reuse_large_frees`); their memory stays bounded by the batches in
flight, flat in the drive's length (docs/benchmarks.md, "Design figures"). Each step sets
what it needs when it starts, so a process running several steps gets each one's setting.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20
REUSE_MMAP_THRESHOLD_BYTES = 8 << 20
REUSE_TRIM_THRESHOLD_BYTES = 64 << 20
DEFAULT_TRIM_THRESHOLD_BYTES = 128 << 10
"""glibc's own M_TRIM_THRESHOLD, restored by `release_large_frees`."""


def release_large_frees() -> bool:
    """Fix glibc's mmap threshold at 1 MiB; False where there is no glibc."""
    return _mallopt(MMAP_THRESHOLD_BYTES, DEFAULT_TRIM_THRESHOLD_BYTES)


def reuse_large_frees() -> bool:
    """Keep freed blocks below 8 MB in the heap, and up to 64 MB of free heap before it is
    given back; False where there is no glibc."""
    return _mallopt(REUSE_MMAP_THRESHOLD_BYTES, REUSE_TRIM_THRESHOLD_BYTES)


def _mallopt(mmap_threshold: int, trim_threshold: int) -> bool:
    mallopt = _libc_mallopt()
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        mallopt(M_TRIM_THRESHOLD, trim_threshold)
    )


@functools.cache
def _libc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's mallopt, looked up once (finding the C library may run ldconfig)."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt

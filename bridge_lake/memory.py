"""Process memory settings for the heavy steps (normalize, calibrate, export).

glibc raises its mmap threshold each time a large block is freed (up to 32 MB), after which
numpy's per-batch temporaries of a few MB come from the heap, fragment it and are never
returned: on a 15-minute drive the calibrated layer's RSS settled at ~3x the live data.
A fixed threshold keeps every block above 1 MiB in its own mapping, returned to the system
when freed, so peak RSS follows what is alive and no longer the drive's length (measured in
benchmarks/bench_calibrate.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20


@functools.cache
def release_large_frees() -> bool:
    """Fix glibc's mmap threshold at 1 MiB (once per process); False where there is no glibc."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))

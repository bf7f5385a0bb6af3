"""Time-order facts of a utime sequence: readers keep file order and count, never reorder.

NCLT files are believed monotonic, but nothing guarantees it (spec §11), so every reader
reports duplicates and backward steps and leaves sorting to the layer that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TimeOrder:
    duplicates: int
    """Steps where utime equals the previous value."""
    backward: int
    """Steps where utime is smaller than the previous value."""

    @classmethod
    def of(cls, utime: np.ndarray) -> TimeOrder:
        step = np.diff(utime.astype(np.int64, copy=False))
        return cls(
            duplicates=int(np.count_nonzero(step == 0)), backward=int(np.count_nonzero(step < 0))
        )

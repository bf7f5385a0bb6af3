"""The result of every serializer: n messages back to back in one buffer.

One uint8 buffer plus n + 1 offsets instead of n `bytes` objects: the exporter hands whole
batches to the bag/MCAP writers, slices them without copies, and merges or trims topics with one
vectorized gather (`take`) rather than a Python loop over messages.

Variable-size messages (point clouds, images, video) are assembled from per-message parts with
Arrow's `binary_join_element_wise`: a C++ loop that concatenates the i-th element of every part,
so the whole batch is built in one call with no Python object per message, an order of
magnitude faster than a numpy byte-index scatter (docs/benchmarks.md, "Design figures").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Serialized:
    """n messages back to back in one buffer."""

    data: np.ndarray  # uint8, contiguous, all messages concatenated
    offsets: np.ndarray  # int64, length n + 1; message i is data[offsets[i]:offsets[i+1]]

    def __post_init__(self) -> None:
        data, offsets = self.data, self.offsets
        if data.dtype != np.uint8 or data.ndim != 1 or not data.flags.c_contiguous:
            raise ValueError(f"data must be a contiguous 1-D uint8 array, got {data.dtype}")
        if offsets.dtype != np.int64 or offsets.ndim != 1 or offsets.size == 0:
            raise ValueError("offsets must be a 1-D int64 array of n + 1 entries")
        if offsets[0] != 0 or offsets[-1] != data.size or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must rise from 0 to len(data)")

    def __len__(self) -> int:
        return self.offsets.size - 1

    def message(self, i: int) -> memoryview:
        """Message i as a zero-copy view (negative i counts from the end)."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"message {i} out of range for {n} messages")
        i %= n
        return memoryview(self.data[self.offsets[i] : self.offsets[i + 1]])

    def take(self, index: np.ndarray) -> Serialized:
        """Messages at `index` (integers, negative from the end, repeats allowed), in that order."""
        index = np.asarray(index)
        if index.ndim != 1 or not (index.size == 0 or np.issubdtype(index.dtype, np.integer)):
            raise ValueError(f"index must be a 1-D integer array, got {index.dtype}")
        n = len(self)
        if index.size and (index.min() < -n or index.max() >= n):
            raise IndexError(f"index out of range for {n} messages")
        index = np.where(index < 0, index + n, index).astype(np.int64)
        return _from_arrow(self._arrow().take(pa.array(index)))

    @staticmethod
    def concat(parts: Sequence[Serialized]) -> Serialized:
        """All messages of `parts`, in order, in one new buffer."""
        if not parts:
            return Serialized(np.zeros(0, np.uint8), np.zeros(1, np.int64))
        data = np.concatenate([p.data for p in parts])
        starts = np.cumsum([0] + [p.data.size for p in parts[:-1]])
        offsets = np.concatenate(
            [np.zeros(1, np.int64)]
            + [p.offsets[1:] + s for p, s in zip(parts, starts, strict=True)]
        )
        return Serialized(data, offsets)

    def _arrow(self) -> pa.LargeBinaryArray:
        return ragged_part(self.data, self.offsets)


def fixed(records: np.ndarray) -> Serialized:
    """Messages of one size: row i of a C-contiguous (n, size) uint8 array is message i."""
    n, size = records.shape
    return Serialized(records.reshape(-1), np.arange(n + 1, dtype=np.int64) * size)


def ragged_part(data: np.ndarray, offsets: np.ndarray) -> pa.LargeBinaryArray:
    """Zero-copy Arrow view of ragged bytes: element i is data[offsets[i]:offsets[i+1]]."""
    return pa.Array.from_buffers(
        pa.large_binary(),
        offsets.size - 1,
        [None, pa.py_buffer(np.ascontiguousarray(offsets, np.int64)), pa.py_buffer(data)],
    )


def fixed_part(records: np.ndarray) -> pa.LargeBinaryArray:
    """Row i of a C-contiguous (n, size) uint8 array as element i."""
    n, size = records.shape
    return ragged_part(records.reshape(-1), np.arange(n + 1, dtype=np.int64) * size)


def join(parts: Sequence[pa.LargeBinaryArray]) -> Serialized:
    """Message i = the concatenation of element i of every part (all parts of length n)."""
    separator = pa.scalar(b"", pa.large_binary())
    return _from_arrow(pc.binary_join_element_wise(*parts, separator))


def _from_arrow(array: pa.LargeBinaryArray) -> Serialized:
    """Serialized over an Arrow large_binary array's buffers, rebased so offsets start at 0."""
    _, offsets_buf, data_buf = array.buffers()
    n = len(array)
    offsets = np.frombuffer(offsets_buf, np.int64, n + 1, array.offset * 8)
    start, stop = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buf, np.uint8)[start:stop] if data_buf else np.zeros(0, np.uint8)
    return Serialized(data, offsets - start)

"""Checks and conversions of serializer arguments; every error is a ValueError naming the argument.

Wire fields are narrow (uint8, int8, uint16, uint32, float32): numpy would wrap an out-of-range
integer or truncate a float silently on assignment, so values are range-checked and only
same-kind conversions are made (float64 -> float32 rounds, as any float32 message field does).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike, DTypeLike

from bridge_lake.export.messages.serialized import ragged_part
from bridge_lake.formats.ros.wire import ros_version, stamps

BinaryData = pa.Array | pa.ChunkedArray | tuple[ArrayLike, ArrayLike]


def text(name: str, value: str) -> str:
    """A string field: str without NUL (CDR ends strings at the first NUL)."""
    if not isinstance(value, str) or "\0" in value:
        raise ValueError(f"{name} must be a str without NUL characters, got {value!r}")
    return value


def convert(name: str, arr: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """`arr` as `dtype`: floats from any real numbers; integers and bools only from integers or
    bools and only when every value fits."""
    dt = np.dtype(dtype)
    kind = arr.dtype.kind if arr.size else dt.kind
    if dt.kind == "f":
        if kind not in "fiub":
            raise ValueError(f"{name} must be numeric, got {arr.dtype}")
        return arr.astype(dt, copy=False)
    if kind not in "iub":
        raise ValueError(f"{name} must be integers, got {arr.dtype}")
    if arr.size and kind != "b":
        info = (0, 1) if dt.kind == "b" else (np.iinfo(dt).min, np.iinfo(dt).max)
        lo, hi = arr.min(), arr.max()
        if lo < info[0] or hi > info[1]:
            bad = int(np.flatnonzero((arr < info[0]) | (arr > info[1]))[0])
            raise ValueError(
                f"{name} has {arr.reshape(-1)[bad]} outside {dt} range {info[0]} .. {info[1]}"
            )
    return arr.astype(dt, copy=False)


def per_message(
    name: str, value: ArrayLike, n: int, dtype: DTypeLike, shape: tuple[int, ...] = ()
) -> np.ndarray:
    """One value for all messages (shape `shape`) or one per message (shape (n, *shape))."""
    arr = np.asarray(value)
    if arr.shape not in (shape, (n, *shape)):
        raise ValueError(
            f"{name} must have shape {shape} (one for all messages) or {(n, *shape)} "
            f"(one per message), got {arr.shape}"
        )
    return convert(name, arr, dtype)


def rows(
    name: str, value: ArrayLike, n: int, dtype: DTypeLike, shape: tuple[int, ...] = ()
) -> np.ndarray:
    """One value per message: shape (n, *shape)."""
    arr = np.asarray(value)
    if arr.shape != (n, *shape):
        raise ValueError(f"{name} must have shape {(n, *shape)}, got {arr.shape}")
    return convert(name, arr, dtype)


def counts(name: str, value: ArrayLike, n: int) -> np.ndarray:
    """Element counts per message -> int64 offsets (n + 1) into the flattened elements."""
    arr = np.asarray(value)
    if arr.shape != (n,) or not (arr.size == 0 or arr.dtype.kind in "iu"):
        raise ValueError(f"{name} must be {n} integers, got {arr.dtype} {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= 2**32):
        raise ValueError(f"{name} must be in 0 .. 2**32 - 1 (a uint32 sequence length)")
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(arr, out=offsets[1:])
    return offsets


def flat(
    name: str, value: ArrayLike, total: int, dtype: DTypeLike, shape: tuple[int, ...] = ()
) -> np.ndarray:
    """Flattened elements of all messages: shape (total, *shape), total = sum of the counts."""
    arr = np.asarray(value)
    if arr.shape != (total, *shape):
        raise ValueError(
            f"{name} must have shape {(total, *shape)} (sum of counts), got {arr.shape}"
        )
    return convert(name, arr, dtype)


def column(
    columns: Mapping[str, ArrayLike], key: str, total: int, dtype: DTypeLike, count: int
) -> np.ndarray:
    """columns[key] flattened over all messages: (total,) or (total, count) for count > 1."""
    if key not in columns:
        raise ValueError(f"columns has no {key!r} (fields need {key!r})")
    return flat(f"columns[{key!r}]", columns[key], total, dtype, (count,) if count > 1 else ())


def binary(name: str, data: BinaryData, n: int) -> pa.LargeBinaryArray:
    """One byte string per message from an Arrow binary array (any chunking, no nulls) or a
    (buffer, offsets) pair, as a large_binary array without copying the bytes where possible."""
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    if isinstance(data, pa.Array):
        if not (
            pa.types.is_binary(data.type)
            or pa.types.is_large_binary(data.type)
            or pa.types.is_fixed_size_binary(data.type)
            or pa.types.is_binary_view(data.type)
        ):
            raise ValueError(f"{name} must be an Arrow binary array, got {data.type}")
        if data.null_count:
            raise ValueError(f"{name} has {data.null_count} nulls")
        result = data.cast(pa.large_binary())
    elif isinstance(data, tuple) and len(data) == 2:
        buffer = data[0] if isinstance(data[0], np.ndarray) else np.frombuffer(data[0], np.uint8)
        offsets = np.asarray(data[1])
        if buffer.dtype != np.uint8 or buffer.ndim != 1:
            raise ValueError(f"{name} buffer must be 1-D uint8, got {buffer.dtype} {buffer.shape}")
        if offsets.shape != (n + 1,) or offsets.dtype.kind not in "iu":
            raise ValueError(f"{name} offsets must be {n + 1} integers, got {offsets.shape}")
        if offsets[0] < 0 or offsets[-1] > buffer.size or np.any(np.diff(offsets) < 0):
            raise ValueError(f"{name} offsets must rise within the buffer of {buffer.size} bytes")
        result = ragged_part(np.ascontiguousarray(buffer), offsets.astype(np.int64))
    else:
        raise ValueError(f"{name} must be an Arrow binary array or (buffer, offsets)")
    if len(result) != n:
        raise ValueError(f"{name} has {len(result)} entries, expected {n}")
    return result


def binary_lengths(data: pa.LargeBinaryArray) -> np.ndarray:
    """Byte length of each entry (int64)."""
    offsets = np.frombuffer(data.buffers()[1], np.int64, len(data) + 1, data.offset * 8)
    return np.diff(offsets)


__all__ = [
    "BinaryData",
    "binary",
    "binary_lengths",
    "column",
    "convert",
    "counts",
    "flat",
    "per_message",
    "ros_version",
    "rows",
    "stamps",
    "text",
]

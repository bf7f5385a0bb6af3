"""Vectorized DDL decoding: many samples of one struct to an Arrow table in one pass.

The per-row start offsets are a numpy array, so neither rows nor points (of a dynamic array)
ever become Python objects: every element is one gather over all rows, with its own bounds
check against each row's sample size, so a lying count cannot read outside its sample or
allocate more than the samples hold.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from bridge_lake.formats.adtf.ddl import DDL, Element, Enum, Layout, align, is_bitfield, static_size
from bridge_lake.formats.adtf.errors import DDLError

_GATHER_BLOCK = 1 << 22
"""Bytes of gather index built at once: bounds the temporary memory of a decode."""


def _gather(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Rows of `width` bytes starting at each `pos`, as an (n, width) uint8 array."""
    n = len(pos)
    out = np.empty((n, width), dtype=np.uint8)
    if n == 0 or width == 0:
        return out
    step = max(1, _GATHER_BLOCK // (8 * width))
    cols = np.arange(width, dtype=np.int64)
    for a in range(0, n, step):
        idx = pos[a : a + step, None] + cols
        np.take(buf, idx, out=out[a : a + step])
    return out


def read_scalars(buf: np.ndarray, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """One value of `dtype` at each position, native byte order."""
    size = dtype.itemsize
    if size == 1:
        return buf[pos].view(dtype.newbyteorder("="))
    if len(pos) and not np.any(pos % size):
        usable = len(buf) - len(buf) % size
        values = buf[:usable].view(dtype)[pos // size]
    else:
        values = _gather(buf, pos, size).view(dtype).reshape(len(pos))
    return values.astype(dtype.newbyteorder("="), copy=False)


def _bitfield(buf: np.ndarray, pos: np.ndarray, e: Element, code: str) -> np.ndarray:
    bitpos = e.bitpos or 0
    nbytes = (bitpos + e.numbits + 7) // 8
    raw = _gather(buf, pos, nbytes).astype(np.uint64)
    weights = np.uint64(256) ** np.arange(nbytes, dtype=np.uint64)
    if e.byteorder == ">":
        weights = weights[::-1]
    word = (raw * weights).sum(axis=1, dtype=np.uint64) >> np.uint64(bitpos)
    word &= np.uint64((1 << e.numbits) - 1)
    out = word.astype(np.dtype(code))
    if code[0] == "i":
        sign = np.uint64(1 << (e.numbits - 1))
        out = np.where(word & sign, word.astype(np.int64) - (1 << e.numbits), out).astype(code)
    return out


class _Decoder:
    def __init__(self, ddl: DDL, buf: np.ndarray, layout: Layout, path: str | None) -> None:
        self.ddl = ddl
        self.buf = buf
        self.layout = layout
        self.path = path

    def fail(self, message: str, pos: np.ndarray, bad: np.ndarray) -> DDLError:
        first = int(np.flatnonzero(bad)[0])
        return DDLError(message, path=self.path, offset=int(pos[first]))

    def struct(
        self, name: str, base: np.ndarray, limit: np.ndarray
    ) -> tuple[list[tuple[pa.Field, pa.Array]], np.ndarray]:
        """Decode struct `name` at every row start `base`; returns columns and row ends."""
        st = self.ddl.struct(name)
        serialized = self.layout == "serialized"
        columns: list[tuple[pa.Field, pa.Array]] = []
        ints: dict[str, np.ndarray] = {}
        cursor: int | np.ndarray = 0
        end: int | np.ndarray = 0
        dynamic = False
        for e in st.elements:
            if serialized:
                rel = e.bytepos if e.bytepos is not None and not dynamic else cursor
            else:
                rel = align(cursor, e.alignment)
            pos = base + rel
            code = self.ddl.numpy_code(e.type)
            count = ints[e.arraysize] if isinstance(e.arraysize, str) else e.arraysize
            if isinstance(count, np.ndarray):
                dynamic = True
                if np.any(count < 0):
                    raise self.fail(f"{name}.{e.name}: negative array count", pos, count < 0)
                count = count.astype(np.int64)
            if code is None:
                array, width = self._struct_element(e, pos, count, limit)
            else:
                array, width, values = self._base_element(e, code, pos, count, limit)
                if values is not None and code[0] in "iu":
                    ints[e.name] = values
            meta = {}
            if e.type in self.ddl.enums:
                meta[b"ddl_enum"] = e.type.encode()
            if e.value is not None:
                meta[b"ddl_value"] = e.value.encode()
            columns.append((pa.field(e.name, array.type, metadata=meta or None), array))
            cursor = rel + width
            end = np.maximum(end, cursor) if serialized else cursor
        if not serialized:
            end = align(end, st.alignment)
        return columns, base + end

    def _check(self, what: str, pos: np.ndarray, width, limit: np.ndarray) -> None:
        bad = pos + width > limit
        if np.any(bad):
            raise self.fail(f"{what} runs past the end of its sample", pos, bad)

    def _base_element(self, e: Element, code: str, pos, count, limit):
        dtype = np.dtype(code).newbyteorder(e.byteorder if self.layout == "serialized" else "=")
        size = dtype.itemsize
        what = f"element {e.name}"
        if self.layout == "serialized" and is_bitfield(self.ddl, e):
            width = ((e.bitpos or 0) + e.numbits + 7) // 8
            self._check(what, pos, width, limit)
            values = _bitfield(self.buf, pos, e, code)
            return self._arrow(e, values), width, values
        if isinstance(count, np.ndarray):
            width = count * size
            self._check(what, pos, width, limit)
            starts = np.cumsum(count) - count
            flat = np.repeat(pos - starts * size, count) + np.arange(int(count.sum())) * size
            values = read_scalars(self.buf, flat, dtype)
            offsets = np.concatenate([[0], np.cumsum(count)])
            return pa.LargeListArray.from_arrays(offsets, self._arrow(e, values)), width, None
        width = count * size
        self._check(what, pos, width, limit)
        if count == 1:
            values = read_scalars(self.buf, pos, dtype)
            return self._arrow(e, values), width, values
        flat = (pos[:, None] + np.arange(count, dtype=np.int64) * size).reshape(-1)
        values = read_scalars(self.buf, flat, dtype)
        return pa.FixedSizeListArray.from_arrays(self._arrow(e, values), count), width, None

    def _arrow(self, e: Element, values: np.ndarray) -> pa.Array:
        if e.type == "tBool" or self.ddl.enums.get(e.type, Enum("", "", {})).type == "tBool":
            return pa.array(values != 0)
        return pa.array(values)

    def _struct_element(self, e: Element, pos, count, limit):
        size = static_size(self.ddl, e.type, self.layout)
        if isinstance(count, int) and count == 1:
            cols, ends = self.struct(e.type, pos, limit)
            return _struct_array(cols), ends - pos
        if size is None:
            raise DDLError(
                f"element {e.name}: arrays of the variable-size struct {e.type} are not "
                "decodable in one pass",
                path=self.path,
            )
        step = (
            align(size, self.ddl.struct(e.type).alignment) if self.layout != "serialized" else size
        )
        if isinstance(count, np.ndarray):
            width = count * step
            self._check(f"element {e.name}", pos, width, limit)
            starts = np.cumsum(count) - count
            flat = np.repeat(pos - starts * step, count) + np.arange(int(count.sum())) * step
            cols, _ = self.struct(e.type, flat, np.repeat(limit, count))
            offsets = np.concatenate([[0], np.cumsum(count)])
            return pa.LargeListArray.from_arrays(offsets, _struct_array(cols)), width
        width = count * step
        self._check(f"element {e.name}", pos, width, limit)
        flat = (pos[:, None] + np.arange(count, dtype=np.int64) * step).reshape(-1)
        cols, _ = self.struct(e.type, flat, np.repeat(limit, count))
        return pa.FixedSizeListArray.from_arrays(_struct_array(cols), count), width


def _struct_array(columns: list[tuple[pa.Field, pa.Array]]) -> pa.StructArray:
    if not columns:
        return pa.StructArray.from_arrays([], fields=[])
    return pa.StructArray.from_arrays([a for _, a in columns], fields=[f for f, _ in columns])


def decode(
    ddl: DDL,
    struct_name: str,
    buf: np.ndarray | bytes | memoryview,
    offsets: np.ndarray,
    lengths: np.ndarray,
    *,
    layout: Layout = "serialized",
    path: str | None = None,
) -> pa.Table:
    """Decode one struct per (offset, length) sample of `buf` into an Arrow table.

    `buf` is typically the whole memory-mapped file and `offsets` the samples' buffer
    positions in it, so nothing is copied before the per-element gathers. Every element is
    bounds-checked against its own sample; a violation is a `DDLError` at the byte offset.
    """
    data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    base = np.asarray(offsets, dtype=np.int64)
    limit = base + np.asarray(lengths, dtype=np.int64)
    if len(base) and (base.min() < 0 or limit.max() > len(data)):
        raise DDLError("sample offsets lie outside the buffer", path=path)
    columns, _ = _Decoder(ddl, data, layout, path).struct(struct_name, base, limit)
    return pa.Table.from_arrays([a for _, a in columns], schema=pa.schema([f for f, _ in columns]))

"""Vectorized DDL decoding: many samples of one struct to an Arrow table in one pass.

The per-row start offsets are a numpy array, so neither rows nor points (of a dynamic array)
ever become Python objects: every element is one gather over all rows, with its own bounds
check against each row's sample size, so a lying count cannot read outside its sample or
allocate more than the samples hold.

Three paths, all giving the same table:
- a struct of fixed size (no dynamic array anywhere, no bit field) is read with one row
  gather into a numpy structured array whose fields are the elements (byte order and
  offsets included), then each field is one strided copy;
- otherwise element by element in declaration order, positions as numpy arrays per row
  (serialized positions after a variable-size element are sequential, spec §10.2); a
  dynamic array of a fixed-size struct with many instances a row (lidar points) is one run
  of bytes per row: the runs are copied one after the other and split as above;
- an array of a variable-size struct is decoded in rounds: round k decodes instance k of
  every row that has more than k instances, at that row's cursor; the rounds are then put
  back into row order. The number of rounds is the largest count, which the bounds check
  limits to the bytes of the sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bridge_lake.formats.adtf.ddl import (
    DDL,
    Element,
    Enum,
    Layout,
    align,
    array_count,
    element_offset,
    is_bitfield,
    is_variable,
    static_size,
)
from bridge_lake.formats.adtf.errors import DDLError

_GATHER_BLOCK = 1 << 22
"""Bytes of gather index built at once: bounds the temporary memory of a decode."""
RUN_ITEMS = 128
"""Mean instances per row from which a dynamic array of a fixed-size struct (lidar points)
is copied row by row, each row's instances being one run of bytes, instead of gathered
instance by instance: a Python step per row (~1 µs) against ~8 ns per instance."""

Columns = list[tuple[pa.Field, pa.Array]]


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


def gather_records(buf: np.ndarray, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """One record of `dtype` (any itemsize, unaligned) at each position: a single take over a
    byte-strided view of the buffer. The caller guarantees pos + itemsize <= len(buf)."""
    if len(buf) < dtype.itemsize or not len(pos):
        return np.empty(len(pos), dtype=dtype)
    raw = np.dtype((np.void, dtype.itemsize))
    view = np.ndarray((len(buf) - dtype.itemsize + 1,), dtype=raw, buffer=buf, strides=(1,))
    return view[pos].view(dtype)  # fancy indexing of void rows: a memcpy each (take is slow)


def read_scalars(buf: np.ndarray, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """One value of `dtype` at each position, native byte order."""
    size = dtype.itemsize
    if size == 1:
        return buf[pos].view(dtype.newbyteorder("="))
    if len(pos) and not np.any(pos % size):
        usable = len(buf) - len(buf) % size
        values = buf[:usable].view(dtype)[pos // size]
    else:
        values = gather_records(buf, pos, dtype)
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


@dataclass(frozen=True)
class _Plan:
    """A fixed-size struct as a numpy structured dtype (field i is element i)."""

    dtype: np.dtype
    elements: tuple[Element, ...]
    children: tuple[_Plan | None, ...]
    """The plan of each struct-typed element (None for base types)."""


class _Decoder:
    def __init__(self, ddl: DDL, buf: np.ndarray, layout: Layout, path: str | None) -> None:
        self.ddl = ddl
        self.buf = buf
        self.layout = layout
        self.path = path
        self._plans: dict[str, _Plan | None] = {}
        self._min_sizes: dict[str, int] = {}
        self._variable: dict[str, tuple[bool, ...]] = {}
        self._sizes: dict[str, int | None] = {}

    def static_size(self, name: str) -> int | None:
        if name not in self._sizes:
            self._sizes[name] = static_size(self.ddl, name, self.layout)
        return self._sizes[name]

    def variable(self, name: str) -> tuple[bool, ...]:
        """Per element of struct `name`: does its size depend on the data?"""
        if name not in self._variable:
            elements = self.ddl.struct(name).elements
            self._variable[name] = tuple(is_variable(self.ddl, e) for e in elements)
        return self._variable[name]

    def fail(self, message: str, pos: np.ndarray, bad: np.ndarray) -> DDLError:
        first = int(np.flatnonzero(bad)[0])
        return DDLError(message, path=self.path, offset=int(pos[first]))

    # -- fixed-size structs: one gather ------------------------------------------------------

    def plan(self, name: str) -> _Plan | None:
        """The structured dtype of a fixed-size struct, or None where the element-wise path
        is needed (dynamic arrays, bit fields, empty arrays, names numpy refuses)."""
        if name in self._plans:
            return self._plans[name]
        self._plans[name] = None  # guards recursion; cycles are refused by the parser anyway
        st = self.ddl.struct(name)
        serialized = self.layout == "serialized"
        names, formats, offsets, children = [], [], [], []
        cursor = 0
        plan: _Plan | None = None
        ok = bool(st.elements)
        for i, e in enumerate(st.elements):
            if isinstance(e.arraysize, str) or e.arraysize < 1:
                ok = False
                break
            code = self.ddl.numpy_code(e.type)
            if code is None:
                child = self.plan(e.type)
                size = static_size(self.ddl, e.type, self.layout)
                if child is None or size is None:
                    ok = False
                    break
                if size != child.dtype.itemsize:  # trailing padding of a deserialized struct
                    child = _Plan(_resized(child.dtype, size), child.elements, child.children)
                fmt: np.dtype = child.dtype
            else:
                if serialized and is_bitfield(self.ddl, e):
                    ok = False
                    break
                child = None
                size = int(code[1])
                fmt = np.dtype(code).newbyteorder(e.byteorder if serialized else "=")
            if serialized:
                rel = e.bytepos if e.bytepos is not None else cursor
            else:
                rel = align(cursor, e.alignment)
            names.append(f"f{i}")
            formats.append(fmt if e.arraysize == 1 else (fmt, (e.arraysize,)))
            offsets.append(rel)
            children.append(child)
            cursor = rel + size * e.arraysize
        if ok:
            try:
                dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets})
            except (ValueError, TypeError):
                dtype = None
            if dtype is not None and dtype.itemsize:
                plan = _Plan(dtype, st.elements, tuple(children))
        self._plans[name] = plan
        return plan

    def fast(self, plan: _Plan, records: np.ndarray) -> tuple[Columns, dict[str, np.ndarray]]:
        """Columns (and integer scalars, for dynamic counts) of 1-D structured `records`."""
        columns: Columns = []
        ints: dict[str, np.ndarray] = {}
        for i, (e, child) in enumerate(zip(plan.elements, plan.children, strict=True)):
            sub = records[f"f{i}"]
            if child is not None:
                cols, sub_ints = self.fast(child, sub.reshape(-1))
                array = _struct_array(cols, len(sub.reshape(-1)))
                if e.arraysize == 1:
                    ints.update({f"{e.name}.{k}": v for k, v in sub_ints.items()})
            else:
                native = sub.dtype.base.newbyteorder("=")
                values = (
                    np.ascontiguousarray(sub) if sub.dtype.base == native else sub.astype(native)
                ).reshape(-1)
                array = self._arrow(e, values)
                if e.arraysize == 1 and values.dtype.kind in "iu":
                    ints[e.name] = values
            if e.arraysize != 1:
                array = pa.FixedSizeListArray.from_arrays(array, e.arraysize)
            columns.append((self._field(e, array), array))
        return columns, ints

    # -- any struct ----------------------------------------------------------------------------

    def struct(
        self, name: str, base: np.ndarray, limit: np.ndarray
    ) -> tuple[Columns, np.ndarray, dict[str, np.ndarray]]:
        """Decode struct `name` at every row start `base`; returns columns, row ends and the
        integer scalars by (dotted) name, for dynamic counts further on."""
        st = self.ddl.struct(name)
        plan = self.plan(name)
        if plan is not None:
            size = plan.dtype.itemsize
            if not len(base) or (
                int((limit - base).min()) >= size and int(base.max()) + size <= len(self.buf)
            ):
                columns, ints = self.fast(plan, gather_records(self.buf, base, plan.dtype))
                return columns, base + self.static_size(name), ints
            # some row is too short: the element-wise path names the element and offset
        serialized = self.layout == "serialized"
        columns: Columns = []
        ints: dict[str, np.ndarray] = {}
        cursor: int | np.ndarray = 0
        end: int | np.ndarray = 0
        after_variable = False
        for e, variable in zip(st.elements, self.variable(name), strict=True):
            rel = element_offset(self.layout, e, cursor, after_variable)
            pos = base + rel
            code = self.ddl.numpy_code(e.type)
            if isinstance(e.arraysize, str):
                raw = array_count(ints, name, e, "decoded", path=self.path)
                unit = int(code[1]) if code is not None else self.min_size(e.type)
                count: int | np.ndarray = self.counts(f"{name}.{e.name}", raw, pos, limit, unit)
            else:
                count = e.arraysize
            if code is None:
                array, width, sub_ints = self._struct_element(e, pos, count, limit)
                if isinstance(count, int) and count == 1:
                    ints.update({f"{e.name}.{k}": v for k, v in sub_ints.items()})
            else:
                array, width, values = self._base_element(e, code, pos, count, limit)
                if values is not None and code[0] in "iu":
                    ints[e.name] = values
            columns.append((self._field(e, array), array))
            after_variable = after_variable or variable
            cursor = rel + width
            end = np.maximum(end, cursor) if serialized else cursor
        if not serialized:
            end = align(end, st.alignment)
        return columns, base + end, ints

    def min_size(self, name: str) -> int:
        """A lower bound (>= 1) of one instance's bytes: the fixed part of the struct before
        its first variable-size element. Bounds data-driven counts before any allocation."""
        if name not in self._min_sizes:
            size = static_size(self.ddl, name, self.layout)
            if size is None:
                size = cursor = 0
                for e in self.ddl.struct(name).elements:
                    if is_variable(self.ddl, e):
                        break
                    code = self.ddl.numpy_code(e.type)
                    elem = int(code[1]) if code else static_size(self.ddl, e.type, self.layout)
                    if self.layout == "serialized":
                        rel = e.bytepos if e.bytepos is not None else cursor
                        if is_bitfield(self.ddl, e):
                            cursor = rel + ((e.bitpos or 0) + e.numbits + 7) // 8
                        else:
                            cursor = rel + elem * e.arraysize
                        size = max(size, cursor)
                    else:
                        cursor = size = align(cursor, e.alignment) + elem * e.arraysize
            self._min_sizes[name] = max(1, size)
        return self._min_sizes[name]

    def counts(
        self, what: str, raw: np.ndarray, pos: np.ndarray, limit: np.ndarray, unit: int
    ) -> np.ndarray:
        """Validated dynamic array counts: never negative, never more items than the bytes
        left in the row could hold (so nothing is allocated from an unchecked size)."""
        if raw.dtype.kind == "i":
            negative = raw < 0
            if negative.any():
                value = int(raw[int(np.flatnonzero(negative)[0])])
                raise self.fail(f"{what}: negative array count {value}", pos, negative)
        room = np.maximum(limit - pos, 0)
        bad = raw.astype(np.float64) * max(unit, 1) > room
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise self.fail(
                f"{what}: array count {int(raw[first])} runs past the end of its sample "
                f"({int(room[first])} bytes left)",
                pos,
                bad,
            )
        return raw.astype(np.int64)

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

    def _field(self, e: Element, array: pa.Array) -> pa.Field:
        meta = {}
        if e.type in self.ddl.enums:
            meta[b"ddl_enum"] = e.type.encode()
        if e.value is not None:
            meta[b"ddl_value"] = e.value.encode()
        return pa.field(e.name, array.type, metadata=meta or None)

    def _struct_element(self, e: Element, pos, count, limit):
        what = f"element {e.name}"
        if isinstance(count, int) and count == 1:
            cols, ends, ints = self.struct(e.type, pos, limit)
            return _struct_array(cols, len(pos)), ends - pos, ints
        size = self.static_size(e.type)
        if size is None:
            if isinstance(count, int):  # a fixed count of a variable-size struct
                count = self.counts(
                    what, np.full(len(pos), count, np.int64), pos, limit, self.min_size(e.type)
                )
                values, ends = self._rounds(e.type, pos, count, limit)
                return pa.FixedSizeListArray.from_arrays(values, e.arraysize), ends - pos, {}
            values, ends = self._rounds(e.type, pos, count, limit)
            offsets = np.concatenate([[0], np.cumsum(count)])
            return pa.LargeListArray.from_arrays(offsets, values), ends - pos, {}
        step = (
            align(size, self.ddl.struct(e.type).alignment) if self.layout != "serialized" else size
        )
        if isinstance(count, np.ndarray):
            width = count * step
            self._check(what, pos, width, limit)
            total = int(count.sum())
            plan = self.plan(e.type)
            if plan is not None and step >= plan.dtype.itemsize and total >= RUN_ITEMS * len(pos):
                records = _runs(self.buf, pos, width).view(_resized(plan.dtype, step))
                cols, _ = self.fast(plan, records)
            else:
                starts = np.cumsum(count) - count
                flat = np.repeat(pos - starts * step, count) + np.arange(total) * step
                cols, _, _ = self.struct(e.type, flat, np.repeat(limit, count))
            offsets = np.concatenate([[0], np.cumsum(count)])
            return (
                pa.LargeListArray.from_arrays(offsets, _struct_array(cols, total)),
                width,
                {},
            )
        width = count * step
        self._check(what, pos, width, limit)
        flat = (pos[:, None] + np.arange(count, dtype=np.int64) * step).reshape(-1)
        cols, _, _ = self.struct(e.type, flat, np.repeat(limit, count))
        return pa.FixedSizeListArray.from_arrays(_struct_array(cols, len(flat)), count), width, {}

    def _rounds(
        self, name: str, pos: np.ndarray, count: np.ndarray, limit: np.ndarray
    ) -> tuple[pa.Array, np.ndarray]:
        """`count[i]` consecutive instances of the variable-size struct `name` from `pos[i]`:
        the instances in row order (a flat struct array) and each row's end position."""
        order = np.argsort(-count, kind="stable")
        desc = -count[order]
        cursor = pos.copy()
        starts = np.cumsum(count) - count
        pieces: list[pa.Array] = []
        dest: list[np.ndarray] = []
        rounds = int(count.max()) if len(count) else 0
        for k in range(rounds):
            rows = order[: int(np.searchsorted(desc, -k, side="left"))]
            cols, ends, _ = self.struct(name, cursor[rows], limit[rows])
            cursor[rows] = ends
            pieces.append(_struct_array(cols, len(rows)))
            dest.append(starts[rows] + k)
        if not pieces:  # no instance anywhere: the (empty) type still has to be right
            cols, _, _ = self.struct(name, pos[:0], limit[:0])
            return _struct_array(cols, 0), cursor
        flat = pa.concat_arrays(pieces)
        where = np.empty(len(flat), dtype=np.int64)
        where[np.concatenate(dest)] = np.arange(len(flat), dtype=np.int64)
        return flat.take(pa.array(where)), cursor


def _runs(buf: np.ndarray, pos: np.ndarray, width: np.ndarray) -> np.ndarray:
    """The bytes buf[pos[i] : pos[i] + width[i]] of every row, one after the other: one copy
    per row instead of one gather per instance (the caller checked the bounds)."""
    out = np.empty(int(width.sum()), np.uint8)
    at = 0
    for p, w in zip(pos.tolist(), width.tolist(), strict=True):
        out[at : at + w] = buf[p : p + w]
        at += w
    return out


def _resized(dtype: np.dtype, itemsize: int) -> np.dtype:
    fields = dtype.fields or {}
    names = list(dtype.names or ())
    return np.dtype(
        {
            "names": names,
            "formats": [fields[n][0] for n in names],
            "offsets": [fields[n][1] for n in names],
            "itemsize": itemsize,
        }
    )


def _struct_array(columns: Columns, length: int) -> pa.StructArray:
    if not columns:
        return pa.array([{}] * length, type=pa.struct([]))
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
    positions in it, so nothing is copied before the gathers. Every element is bounds-checked
    against its own sample; a violation (a size element pointing past the end, a negative or
    huge count) is a `DDLError` at the byte offset, raised before anything is allocated from
    that size.
    """
    data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    base = np.asarray(offsets, dtype=np.int64)
    limit = base + np.asarray(lengths, dtype=np.int64)
    if len(base) and (base.min() < 0 or limit.max() > len(data)):
        raise DDLError("sample offsets lie outside the buffer", path=path)
    columns, _, _ = _Decoder(ddl, data, layout, path).struct(struct_name, base, limit)
    return pa.Table.from_arrays([a for _, a in columns], schema=pa.schema([f for f, _ in columns]))

"""A generic table's rows as the value tree of a generated message (`ddl_types.RosStruct`):
numpy arrays per leaf, no Python object per row.

The lake flattens nested (non-array) structs into dotted columns (`pos.x`) and keeps arrays
of structs as Arrow lists of structs; the serializers want one shape for both. A `Values`
holds, for k instances of one struct, per field either

- a numpy array: (k,) for a scalar, (k, N) for a fixed array;
- `Ragged(values, offsets)`: a variable-length array, instance i = values[offsets[i]:
  offsets[i + 1]];
- a `Values` of k instances (nested struct), or of k * N instances (fixed array of structs,
  instance i's j-th at i * N + j), or `RaggedStructs` (variable-length array of structs).

Nulls (a part written before a column existed) become zeros, as the message has no null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake.export.messages.ddl_types import RosField, RosStruct


@dataclass(frozen=True)
class Ragged:
    values: np.ndarray
    offsets: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def take(self, index: np.ndarray) -> Ragged:
        counts = self.counts[index]
        offsets = np.zeros(len(index) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        starts = self.offsets[:-1][index]
        flat = np.repeat(starts - offsets[:-1], counts) + np.arange(int(offsets[-1]))
        return Ragged(self.values[flat], offsets)


@dataclass(frozen=True)
class RaggedStructs:
    values: Values
    offsets: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)


@dataclass(frozen=True)
class Values:
    """Field values of `k` instances of one struct, by ROS field name."""

    k: int
    fields: dict[str, object]

    def take(self, index: np.ndarray) -> Values:
        """Instances at `index`, in that order."""
        out: dict[str, object] = {}
        for name, v in self.fields.items():
            if isinstance(v, np.ndarray | Ragged):
                out[name] = v[index] if isinstance(v, np.ndarray) else v.take(index)
            elif isinstance(v, Values):
                out[name] = v.take(index) if v.k == self.k else _take_fixed(v, index, self.k)
            else:
                assert isinstance(v, RaggedStructs)
                counts = v.counts[index]
                offsets = np.zeros(len(index) + 1, np.int64)
                np.cumsum(counts, out=offsets[1:])
                starts = v.offsets[:-1][index]
                flat = np.repeat(starts - offsets[:-1], counts) + np.arange(int(offsets[-1]))
                out[name] = RaggedStructs(v.values.take(flat), offsets)
        return Values(len(index), out)

    def every(self, j: int, n: int) -> Values:
        """Instances j, j + n, j + 2n, ...: the j-th of each fixed array of n structs."""
        return self.take(np.arange(j, self.k, n, dtype=np.int64))


def _take_fixed(v: Values, index: np.ndarray, k: int) -> Values:
    n = v.k // k if k else 0
    flat = (index[:, None] * n + np.arange(n)).reshape(-1)
    return v.take(flat)


def _numpy(array: pa.Array, dtype: str) -> np.ndarray:
    if array.null_count:
        array = array.fill_null(False if pa.types.is_boolean(array.type) else 0)
    values = array.to_numpy(zero_copy_only=False)
    return values.astype(np.dtype(dtype), copy=False)


def _list_parts(array: pa.Array) -> tuple[pa.Array, np.ndarray | int]:
    """(flat values, offsets) of a variable list, (flat values, N) of a fixed-size list."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:  # a null list is an empty one (fixed: zeros)
        if pa.types.is_fixed_size_list(array.type):
            n = array.type.list_size
            zeros = pa.array(np.zeros(len(array) * n, np.int8)).cast(array.type.value_type)
            array = pc.if_else(array.is_null(), pa.FixedSizeListArray.from_arrays(zeros, n), array)
        else:
            array = pc.if_else(array.is_null(), pa.scalar([], array.type), array)
    if pa.types.is_fixed_size_list(array.type):
        return array.flatten(), array.type.list_size
    offsets = np.asarray(array.offsets, np.int64)
    return array.flatten(), offsets - offsets[0]


def _struct_children(array: pa.Array) -> Callable[[str], pa.Array]:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    children = dict(zip([f.name for f in array.type], array.flatten(), strict=True))
    return children.__getitem__


def values_of(st: RosStruct, get: Callable[[str], pa.Array], k: int) -> Values:
    """The value tree of k instances of `st`, each field's Arrow array from `get(column)`."""
    out: dict[str, object] = {}
    for f in st.fields:
        out[f.name] = _field_values(f, get, k)
    return Values(k, out)


def _field_values(f: RosField, get: Callable[[str], pa.Array], k: int) -> object:
    if f.struct is None:
        array = get(f.column)
        if f.array is None:
            return _numpy(array, f.dtype)
        flat, offsets = _list_parts(array)
        values = _numpy(flat, f.dtype)
        if isinstance(offsets, int):
            return values.reshape(k, offsets)
        return Ragged(values, offsets)
    if f.array is None:
        try:
            nested = _struct_children(get(f.column))
        except KeyError:  # top level: flattened into dotted columns
            nested = _dotted(get, f.column)
        return values_of(f.struct, nested, k)
    flat, offsets = _list_parts(get(f.column))
    inner = values_of(f.struct, _struct_children(flat), len(flat))
    if isinstance(offsets, int):
        return inner
    return RaggedStructs(inner, offsets)


def _dotted(get: Callable[[str], pa.Array], prefix: str) -> Callable[[str], pa.Array]:
    return lambda name: get(f"{prefix}.{name}")


def table_getter(table: pa.Table) -> Callable[[str], pa.Array]:
    """Columns of a generic table by name (`KeyError` for a missing one)."""
    names = set(table.column_names)

    def get(name: str) -> pa.Array:
        if name not in names:
            raise KeyError(name)
        return table.column(name).combine_chunks()

    return get


def lake_columns(st: RosStruct, prefix: str = "") -> list[str]:
    """The generic table columns a message of `st` reads (top level, dotted)."""
    out = []
    for f in st.fields:
        if f.struct is not None and f.array is None:
            out += lake_columns(f.struct, f"{prefix}{f.column}.")
        else:
            out.append(f"{prefix}{f.column}")
    return out


__all__ = ["Ragged", "RaggedStructs", "Values", "lake_columns", "table_getter", "values_of"]

"""Parquet encodings per column, chosen by what the data is (a sample of the part's rows).

Sensor values come in two kinds that want opposite encodings. Quantized values (NCLT
Velodyne coordinates are 5 mm steps of a uint16 code, intensities 8-bit counts) come from a
small alphabet: a dictionary turns each float32 into a 15-bit index and beats
byte-stream-split by a third. Measured values (IMU, rotated points, ADTF lidar floats) are
nearly all distinct: a dictionary overflows its page and falls back to plain after costing
the hashing, so byte-stream-split (zstd then finds the repeated exponent bytes) is right.
A sample of the first rows of each part says which kind a column is; each part file
records its own encodings, so readers need nothing.

Narrow integers split the same way by their runs: a lidar point's time offset repeats for
every point of a packet (a dictionary's run-length indices make it vanish), while a ring
number changes every point among 32 values (delta: 0.38 bytes a point, a dictionary 0.42).
Byte-stream-split would take rings to 0.31, but on integers it is Parquet 2.11 and DuckDB
reads it only since mid-2026 (duckdb/duckdb#24175): the lake stays readable by older ones.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

SAMPLE_ROWS = 1 << 18
"""Rows of a part looked at to choose encodings: hashing them costs a few ms a column."""
QUICK_SAMPLE_ROWS = 1 << 16
"""A float column whose first this many rows already show few distinct values is taken as
quantized without hashing the whole sample (a quarter of the cost: NCLT points, 10 ms a 2 Mi
part, 4% of its encoding). More rows of a quantized column only lower the share (5 mm codes
of a drive: 14% of 64 Ki points, 5% of 256 Ki), so the choice stays; only columns above
the threshold here (measured values) are counted again on SAMPLE_ROWS."""
DICTIONARY_MAX_DISTINCT = 0.25
"""A float column whose sample has at most this share of distinct values is quantized."""
DICTIONARY_MAX_CHANGES = 0.125
"""A narrow integer column whose value changes at most on this share of rows is runs."""


def parquet_encodings(schema: pa.Schema, sample: pa.Table | None = None) -> dict[str, Any]:
    """ParquetWriter keywords for `schema`: dictionaries for text (stream, frame ids), delta
    for int64 (times, ids: small steps); floats get a dictionary or byte-stream-split and
    narrow integers a dictionary or delta, as the `sample` (the first rows to be written)
    shows (without one, the second). Other types (bool, binary, lists) stay plain."""
    dictionary: list[str] = []
    encodings: dict[str, str] = {}
    rows = None if sample is None else sample.slice(0, SAMPLE_ROWS)
    for f in schema:
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            dictionary.append(f.name)
        elif pa.types.is_int64(f.type):
            encodings[f.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(f.type) or _is_narrow_integer(f.type):
            floating = pa.types.is_floating(f.type)
            column = None if rows is None else rows.column(f.name)
            if column is not None and _few_values(column, floating):
                dictionary.append(f.name)
            else:
                encodings[f.name] = "BYTE_STREAM_SPLIT" if floating else "DELTA_BINARY_PACKED"
    return {"use_dictionary": dictionary, "column_encoding": encodings}


def _is_narrow_integer(t: pa.DataType) -> bool:
    """Integers Parquet stores as INT32 (int64 is always delta: times and ids)."""
    return pa.types.is_integer(t) and t.bit_width <= 32


def _few_values(column: pa.ChunkedArray, floating: bool) -> bool:
    n = len(column) - column.null_count
    if n == 0:
        return True  # all null: a dictionary of nothing
    if floating:
        if len(column) > QUICK_SAMPLE_ROWS and _few_distinct(column.slice(0, QUICK_SAMPLE_ROWS)):
            return True
        return _few_distinct(column)
    changes = pc.sum(pc.not_equal(column.slice(1), column.slice(0, len(column) - 1))).as_py()
    return (changes or 0) <= DICTIONARY_MAX_CHANGES * n


def _few_distinct(column: pa.ChunkedArray) -> bool:
    """At most DICTIONARY_MAX_DISTINCT of the non-null values distinct (none: not shown)."""
    n = len(column) - column.null_count
    return n > 0 and pc.count_distinct(column).as_py() <= DICTIONARY_MAX_DISTINCT * n

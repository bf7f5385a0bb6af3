"""Per-column Parquet encodings chosen from the data: what each kind of column gets, that a
part's own first rows decide, and that independent readers (DuckDB, polars) read it all."""

from __future__ import annotations

import os

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from bridge_lake.formats.nclt.constants import CODE_LUT
from bridge_lake.lake import Lake
from bridge_lake.lake.encodings import QUICK_SAMPLE_ROWS, parquet_encodings

N = 50_000


def _points(rng: np.random.Generator, quantized: bool) -> pa.Table:
    """Lidar-like rows: quantized (NCLT: 5 mm codes, 8-bit intensity) or measured floats."""
    if quantized:
        codes = rng.integers(18_000, 22_000, size=(3, N)).astype(np.uint16)
        x, y, z = (CODE_LUT[c] for c in codes)
        intensity = rng.integers(0, 256, N).astype(np.float32)
    else:
        x, y, z = rng.normal(0, 20, size=(3, N)).astype(np.float32)
        intensity = rng.random(N).astype(np.float32)
    return pa.table(
        {
            "scan_id": pa.array(np.repeat(np.arange(N // 1000), 1000), pa.int64()),
            "x": x,
            "y": y,
            "z": z,
            "intensity": intensity,
            "ring": pa.array(rng.integers(0, 32, N), pa.int16()),  # changes every row
            "time_offset_ns": pa.array(np.repeat(np.arange(N // 200), 200) * 553_000, pa.int32()),
            "stream": pa.array(["velodyne_hits"] * N),
        }
    )


def _encodings(path: str) -> dict[str, set[str]]:
    meta = pq.ParquetFile(path).metadata
    out: dict[str, set[str]] = {}
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c)
            out.setdefault(col.path_in_schema, set()).update(col.encodings)
    return out


def test_encodings_follow_the_data():
    rng = np.random.default_rng(3)
    quantized = parquet_encodings(_points(rng, True).schema, _points(rng, True))
    measured = parquet_encodings(_points(rng, False).schema, _points(rng, False))
    assert sorted(quantized["use_dictionary"]) == [
        "intensity", "stream", "time_offset_ns", "x", "y", "z",
    ]  # fmt: skip
    assert quantized["column_encoding"] == {
        "scan_id": "DELTA_BINARY_PACKED",
        "ring": "DELTA_BINARY_PACKED",
    }
    assert sorted(measured["use_dictionary"]) == ["stream", "time_offset_ns"]
    assert {k: v for k, v in measured["column_encoding"].items() if k in "xyz"} == {
        "x": "BYTE_STREAM_SPLIT",
        "y": "BYTE_STREAM_SPLIT",
        "z": "BYTE_STREAM_SPLIT",
    }
    # without a sample (an empty partition): no dictionary on numbers
    bare = parquet_encodings(_points(rng, True).schema)
    assert bare["use_dictionary"] == ["stream"]
    assert bare["column_encoding"]["x"] == "BYTE_STREAM_SPLIT"
    assert bare["column_encoding"]["ring"] == "DELTA_BINARY_PACKED"


def test_each_part_chooses_from_its_own_rows_and_readers_agree(tmp_path):
    """Part 0 holds quantized points, part 1 measured ones: each file gets its own
    encodings, the quantized part is smaller than byte-stream-split would make it, and
    DuckDB and polars read back exactly what was written."""
    rng = np.random.default_rng(5)
    data = pa.concat_tables([_points(rng, True), _points(rng, False)])
    lake = Lake(str(tmp_path / "lake"))
    for threads in (1, 2):
        files = lake.write_partition(
            "normalized", "lidar_points", f"d{threads}", data, rows_per_part=N,
            row_group_rows=N, encode_threads=threads,
        )  # fmt: skip
        assert len(files) == 2
        first, second = (_encodings(f) for f in files)
        assert "RLE_DICTIONARY" in first["x"] and "BYTE_STREAM_SPLIT" not in first["x"]
        assert "BYTE_STREAM_SPLIT" in second["x"] and "RLE_DICTIONARY" not in second["x"]
        assert "DELTA_BINARY_PACKED" in first["ring"]
        sql = f"select * from read_parquet({files!r}, hive_partitioning = false)"
        back = duckdb.sql(sql).arrow().read_all()
        assert back.cast(data.schema).equals(data)
        assert pl.read_parquet(files).to_arrow().cast(data.schema).equals(data)
    bss = tmp_path / "bss.parquet"
    pq.write_table(
        data.slice(0, N), bss, compression="zstd", use_dictionary=["stream"],
        column_encoding={c: "BYTE_STREAM_SPLIT" for c in ("x", "y", "z", "intensity")},
    )  # fmt: skip
    assert os.path.getsize(files[0]) < 0.8 * bss.stat().st_size


def test_quick_sample_decides_only_for_few_values():
    """A float column whose first QUICK_SAMPLE_ROWS show few values gets its dictionary
    from them; measured values, and a column whose first rows are all null, are judged on
    the whole sample as before."""
    n = QUICK_SAMPLE_ROWS * 2
    rng = np.random.default_rng(11)
    quantized = CODE_LUT[rng.integers(18_000, 22_000, n).astype(np.uint16)]
    measured = rng.normal(0, 20, n).astype(np.float32)
    nulls_first = np.zeros(n, dtype=bool)
    nulls_first[:QUICK_SAMPLE_ROWS] = True
    table = pa.table(
        {
            "q": quantized,
            "m": measured,
            "late_m": pa.array(measured, mask=nulls_first),
            "late_q": pa.array(quantized, mask=nulls_first),
        }
    )
    chosen = parquet_encodings(table.schema, table)
    assert sorted(chosen["use_dictionary"]) == ["late_q", "q"]
    assert chosen["column_encoding"] == {"m": "BYTE_STREAM_SPLIT", "late_m": "BYTE_STREAM_SPLIT"}


def test_page_rows_cap_the_pages_and_readers_agree(tmp_path):
    """page_rows makes the writer cut pages every that many rows (each page has a header:
    the file grows with their number), and DuckDB and polars read the same values."""
    rng = np.random.default_rng(7)
    data = _points(rng, True)
    lake = Lake(str(tmp_path / "lake"))
    sizes = {}
    for page_rows in (None, 500, 1 << 18):
        (path,) = lake.write_partition(
            "normalized", "lidar_points", f"p{page_rows}", data, rows_per_part=N,
            row_group_rows=N, page_rows=page_rows,
        )  # fmt: skip
        sizes[page_rows] = os.path.getsize(path)
        assert pq.ParquetFile(path).read().equals(data)
        sql = f"select * from read_parquet('{path}', hive_partitioning = false)"
        assert duckdb.sql(sql).arrow().read_all().cast(data.schema).equals(data)
        back = pl.read_parquet(path, hive_partitioning=False).to_arrow()
        assert back.cast(data.schema).equals(data)
    # 50,000 rows: 3 pages a column at Arrow's 20,000, 100 at 500, 1 at 256 Ki
    assert sizes[500] > sizes[None] + 8 * 90 * 20  # 8 columns x 97 more page headers
    assert sizes[1 << 18] < sizes[None]

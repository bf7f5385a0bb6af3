import duckdb
import polars as pl
import pyarrow as pa

from bridge_lake.lake import Lake
from bridge_lake.lake.docs import render_tables_md
from bridge_lake.lake.query import connect, scan
from bridge_lake.lake.schemas import GNSS, RAW_DRIVES, RAW_MANIFEST, TABLES
from bridge_lake.lake.views import render_views_sql
from bridge_lake_tests.conftest import REPO


def test_tables_md_is_generated_from_schemas():
    assert (REPO / "docs" / "tables.md").read_text() == render_tables_md()
    for spec in TABLES:
        assert f"## {spec.layer}/{spec.name}" in render_tables_md()


def _raw_lake(lake):
    for drive, n in (("0001", 3), ("b", 2)):
        files = pa.table(
            {
                "path": [f"f{i}" for i in range(n)],
                "size_bytes": [1] * n,
                "sha256": ["x"] * n,
                "format": ["nclt"] * (n - 1) + ["adtf"],
                "format_version": [None] * n,
                "kind": [None] * n,
                "readable": [True] * n,
                "problem": [None] * n,
            },
            schema=RAW_MANIFEST.schema,
        )
        lake.write_partition("raw", "manifest", drive, files)
        row = {c.name: [None] for c in RAW_DRIVES.columns}
        row |= {"tags": [[]], "file_count": [n], "total_bytes": [n], "recording_count": [n]}
        lake.write_partition("raw", "drives", drive, pa.table(row, schema=RAW_DRIVES.schema))


def test_views_sql_is_generated_and_reads_the_lake(tmp_path):
    assert (REPO / "sql" / "views.sql").read_text() == render_views_sql()
    for spec in TABLES:
        assert f"CREATE OR REPLACE VIEW {spec.layer}_{spec.name} AS" in render_views_sql()
    lake = Lake(str(tmp_path))
    _raw_lake(lake)
    for spec in TABLES[2:]:  # the static file needs every table to exist
        lake.write_partition(spec.layer, spec.name, "b", spec.schema.empty_table())
    con = duckdb.connect()
    con.execute(f"SET VARIABLE lake = '{tmp_path}'")
    con.execute((REPO / "sql" / "views.sql").read_text())
    got = con.sql("select drive, adtf_files, nclt_files, file_count from drive_summary").fetchall()
    assert got == [("0001", 1, 2, 3), ("b", 1, 1, 2)]


def test_connect_gives_empty_views_for_tables_without_data(tmp_path):
    lake = Lake(str(tmp_path))
    _raw_lake(lake)
    con = connect(lake)
    assert con.sql("select count(*) from normalized_imu").fetchall() == [(0,)]
    cols = [c[0] for c in con.sql("describe normalized_gnss").fetchall()]
    assert cols == [*GNSS.schema.names, "drive", "time_utc"]  # as the views over data have
    assert con.sql("select count(*) from raw_manifest").fetchall() == [(5,)]
    assert con.sql("select * from sensor_rates").fetchall() == []


def test_views_carry_the_master_time_as_utc_timestamps(tmp_path):
    from bridge_lake.normalize.sink import conform

    lake = Lake(str(tmp_path))
    _raw_lake(lake)
    rows = pa.table({"time_ns": [1_700_000_000_123_456_789], "frame_id": ["gps"]})
    lake.write_partition("normalized", "gnss", "b", conform(rows, GNSS.schema, stream="gps"))
    got = connect(lake).sql(
        "select strftime(time_utc, '%Y-%m-%d %H:%M:%S.%n') from normalized_gnss"
    )
    assert got.fetchall() == [("2023-11-14 22:13:20.123456789",)]


def test_scan_prunes_by_drive_and_agrees_with_duckdb(tmp_path):
    lake = Lake(str(tmp_path))
    _raw_lake(lake)
    lf = scan("manifest", lake=lake, layer="raw", drives=["0001"])
    assert lf.select(pl.len()).collect().item() == 3
    assert "drive=b" not in lf.explain()
    counts = scan("manifest", lake=str(tmp_path), layer="raw").group_by("drive").len()
    duck = connect(lake).sql("select drive, count(*) from raw_manifest group by all").fetchall()
    assert sorted(counts.collect().rows()) == sorted(duck)


def test_duckdb_views_over_s3(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    _raw_lake(lake)
    con = connect(lake)
    assert con.sql("select drive, file_count from drive_summary").fetchall() == [
        ("0001", 3),
        ("b", 2),
    ]
    assert scan("manifest", lake=lake, layer="raw").select(pl.len()).collect().item() == 5

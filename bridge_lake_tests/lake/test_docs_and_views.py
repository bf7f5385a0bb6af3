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
    assert cols == ["drive", "time_utc", *GNSS.schema.names]  # as the views over data have
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


def _every_view(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """Every view a user sees (not the `_empty_*` tables registered under the empty ones)."""
    rows = con.sql("select view_name from duckdb_views() where not internal").fetchall()
    names = [r[0] for r in rows if not r[0].startswith("_empty_")]
    return {n: [(c[0], c[1]) for c in con.sql(f"describe {n}").fetchall()] for n in names}


def test_every_view_starts_with_drive_then_time_utc(tmp_path):
    """Issue 32: `select *` at any width shows the drive and the time first (they came last)."""
    lake = Lake(str(tmp_path))
    _raw_lake(lake)
    views = _every_view(connect(lake))
    assert len(views) >= len(TABLES) + 4
    for name, cols in views.items():
        names = [c for c, _ in cols]
        assert names[0] == "drive", (name, names)
        if "time_ns" in names:
            assert names[1] == "time_utc", (name, names)
    timed = {s.layer + "_" + s.name for s in TABLES if "time_ns" in s.schema.names}
    assert {
        n
        for n, cols in views.items()
        if ("time_utc", "TIMESTAMP WITH TIME ZONE") in cols
        or ("time_utc", "TIMESTAMPTZ_NS") in cols
    } >= timed | {"lidar_points_timed"}


def test_time_utc_is_utc_aware_in_duckdb_polars_and_the_plain_views_file(tmp_path):
    """Issue 32: time_utc carries its zone: +00 from a plain DuckDB session reading
    sql/views.sql (even one set to another zone first), a UTC Datetime in polars, and the
    same instant as time_ns."""
    from bridge_lake.normalize.sink import conform

    lake = Lake(str(tmp_path))
    _raw_lake(lake)
    t = 1_700_000_000_123_456_789
    rows = pa.table({"time_ns": [t], "frame_id": ["gps"]})
    lake.write_partition("normalized", "gnss", "b", conform(rows, GNSS.schema, stream="gps"))
    for spec in TABLES[2:]:
        if (spec.layer, spec.name) != ("normalized", "gnss"):
            lake.write_partition(spec.layer, spec.name, "b", spec.schema.empty_table())
    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/Detroit'")
    con.execute(f"SET VARIABLE lake = '{tmp_path}'")
    con.execute((REPO / "sql" / "views.sql").read_text())
    [(shown, same)] = con.sql(
        "select time_utc::VARCHAR, epoch_ns(time_utc) = time_ns from normalized_gnss"
    ).fetchall()
    assert shown == "2023-11-14 22:13:20.123456789+00" and same
    frame = connect(lake).sql("select time_utc from normalized_gnss").pl()
    assert frame.schema["time_utc"] == pl.Datetime("ns", "UTC")
    scanned = scan("gnss", lake=lake).collect()
    assert scanned.columns[:2] == ["drive", "time_utc"]
    assert scanned.schema["time_utc"] == pl.Datetime("ns", "UTC")
    assert scanned["time_utc"].dt.epoch("ns").to_list() == [t]
    assert scan("manifest", lake=lake, layer="raw").collect_schema().names()[0] == "drive"


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

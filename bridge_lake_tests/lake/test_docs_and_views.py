import duckdb
import pyarrow as pa

from bridge_lake.lake import Lake
from bridge_lake.lake.docs import render_tables_md
from bridge_lake.lake.schemas import RAW_DRIVES, RAW_MANIFEST, TABLES
from bridge_lake_tests.conftest import REPO


def test_tables_md_is_generated_from_schemas():
    assert (REPO / "docs" / "tables.md").read_text() == render_tables_md()
    for spec in TABLES:
        assert f"## {spec.layer}/{spec.name}" in render_tables_md()


def test_views_sql_reads_the_lake(tmp_path):
    lake = Lake(str(tmp_path))
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
    con = duckdb.connect()
    con.execute(f"SET VARIABLE lake = '{tmp_path}'")
    con.execute((REPO / "sql" / "views.sql").read_text())
    got = con.sql("select drive, adtf_files, nclt_files, file_count from drive_summary").fetchall()
    assert got == [("0001", 1, 2, 3), ("b", 1, 1, 2)]

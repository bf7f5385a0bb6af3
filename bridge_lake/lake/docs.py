"""docs/tables.md, generated from bridge_lake.lake.schemas so the two cannot disagree.

Regenerate with `python -m bridge_lake.lake.docs > docs/tables.md`; a test fails when the
committed file is stale.
"""

from __future__ import annotations

from bridge_lake.lake.schemas import GENERIC_PREFIX, TABLES


def render_tables_md() -> str:
    lines = [
        "# Lake tables",
        "",
        "Generated from `bridge_lake/lake/schemas/` by `python -m bridge_lake.lake.docs`; "
        "do not edit by hand.",
        "",
        "Every table lives at `<lake>/<layer>/<table>/drive=<drive_id>/part-<n>.parquet`; "
        "`drive` is the Hive partition column, not stored inside the files.",
        "",
        *ONE_ROW_PER_MEASUREMENT,
        *VIEW_COLUMNS,
    ]
    for spec in TABLES:
        lines += [f"## {spec.layer}/{spec.name}", "", spec.description, ""]
        lines += ["| column | type | nullable | meaning |", "|---|---|---|---|"]
        for c in spec.columns:
            lines.append(
                f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {c.description} |"
            )
        lines.append("")
        if spec.name == "adtf_payloads":
            lines += GENERIC_TABLES
        if spec.name == "deskewed_points":
            lines += BASE_LINK_VIEW
    return "\n".join(lines)


ONE_ROW_PER_MEASUREMENT = [
    "Every normalized sensor table has one row per measurement, so a count over a table is "
    "that sensor's rate. Values a dataset logs in two files at the same instant go into one "
    "row: the side file's records are counted in `normalized_streams.records_joined` "
    "(records_read = rows_written + records_joined + rows_quarantined), and one with no row "
    "of its primary at its time is quarantined (`no_<primary>_row_at_utime`, "
    "`ambiguous_utime`). A partial stream that stands on its own has its own table "
    "(`ground_truth_nodes`). A stream left out by choice is listed in normalized_streams with "
    "`skipped` saying why. The asset checks `one_row_per_instant`, `one_stream_per_lidar`, "
    "`scan_end` and `null_pose` watch these rules.",
    "",
]
VIEW_COLUMNS = [
    "The DuckDB views (sql/views.sql, `bridge-lake query`) and "
    "`bridge_lake.lake.query.scan()` show each table with `drive` first, then `time_utc` "
    "where the table has `time_ns`, then the columns listed below. `time_utc` is `time_ns` "
    "as a time-zone-aware UTC timestamp: TIMESTAMPTZ_NS in DuckDB 2 (TIMESTAMPTZ, whole "
    "microseconds, in DuckDB 1.x), `Datetime('ns', 'UTC')` in polars. It is computed by the "
    "view, not stored (`time_ns` is the exact value; a second time column in every file would "
    "only repeat it). DuckDB shows a TIMESTAMPTZ in the session's time zone, so sql/views.sql "
    "and `bridge-lake query` set `TimeZone` to UTC and the times read `+00`; a session in "
    "another zone shows the same instants with its offset.",
    "",
]
GENERIC_TABLES = [
    f"## normalized/{GENERIC_PREFIX}<struct>",
    "",
    "One table per DDL struct of ADTF streams that no mapping rule takes (name lower-cased, "
    "other characters as `_`: `tVehicleStatus` → `ddl_tvehiclestatus`, view "
    "`normalized_ddl_tvehiclestatus`). Its schema comes from the recording's DDL: the columns "
    "below, then one column per element: nested structs flattened with dotted names "
    "(`pos.x`), fixed arrays as fixed-size lists, dynamic arrays as lists, arrays of structs "
    "as lists of structs, enums as their integer values (`streams.ddl` holds the DDL that names "
    "them). An element named like a column below gets a trailing `_`. The view unions drives "
    "by column name, so struct versions with more elements give nulls elsewhere.",
    "",
    "| column | type | nullable | meaning |",
    "|---|---|---|---|",
    "| `time_ns` | int64 | no | master clock, ns since the Unix epoch |",
    "| `sample_time_ns` | int64 | yes | the sample's own ADTF time stamp, ns |",
    "| `stream` | string | no | ADTF stream name (`stream/substream` for substreams) |",
    "",
]
"""docs for the generic tables, which have no TableSpec (their schemas come from recordings)."""

BASE_LINK_VIEW = [
    "## calibrated_lidar_points (a view, not a table)",
    "",
    "Every lidar point in base_link (REP-103), with ring, intensity and per-point time: the "
    "normalized/lidar_points rows moved by their scan's calibrated/lidar_transforms row in "
    "float32, plus the stored calibrated/deskewed_points of deskewed drives. No second copy "
    "of the points is stored. DuckDB: the view `calibrated_lidar_points` of sql/views.sql; "
    'polars: `bridge_lake.lake.query.scan("lidar_points", layer="calibrated")`; exports: '
    "`options: {points: base_link}` on a PointCloud2 rule. Its columns are those of "
    "calibrated/deskewed_points above, after `drive` (bridge_lake/lake/base_link.py).",
    "",
]
"""docs for the base_link view, made from two tables (bridge_lake.lake.base_link)."""


if __name__ == "__main__":
    print(render_tables_md(), end="")

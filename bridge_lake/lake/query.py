"""Analyst access: polars LazyFrames and DuckDB SQL over the lake, local or on S3.

DuckDB reads S3 through the same fsspec filesystem the lake writes with (registered on the
connection), so no DuckDB extension has to be downloaded and the same credentials and
endpoint apply. On an object store both read the part files the partitions' manifests name
(`Lake.table_files`), never a glob, so a partition being re-published is seen whole: the old
set or the new one. A connection's views hold the files published when it was made.
"""

from __future__ import annotations

import os

import duckdb
import polars as pl
import pyarrow as pa

from bridge_lake import settings
from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import base_link
from bridge_lake.lake.paths import LAYERS, validate_drive_id
from bridge_lake.lake.schemas import GENERIC_PREFIX, TABLES
from bridge_lake.lake.storage import Lake
from bridge_lake.lake.views import (
    SESSION,
    TIME_COLUMN,
    files_variable,
    generic_view_sql,
    select_list,
    summaries_sql,
    table_view_sql,
    view_name,
)


def open_lake(lake: Lake | str | os.PathLike[str]) -> Lake:
    """A Lake as given, or one for a path or URL with the environment's storage options
    (`BRIDGE_LAKE_S3_ENDPOINT` for an `s3://` URL on MinIO, Ceph or another S3 API), as every
    command of the package opens it."""
    if isinstance(lake, Lake):
        return lake
    root = os.fspath(lake)
    return Lake(root, settings.storage_options(root))


def scan(
    table: str,
    *,
    lake: Lake | str | os.PathLike[str],
    layer: str = "normalized",
    drives: list[str] | None = None,
) -> pl.LazyFrame:
    """A LazyFrame over one table with `drive` as a text column (leading zeros kept), with
    the columns of its DuckDB view: `drive` first, then `time_utc` (time_ns as a UTC-aware
    Datetime in ns) where the table has a master time, then the table's own columns.

    Filters on `drive` (or the `drives` argument) prune partitions: polars skips the other
    folders' files without opening them. `scan("lidar_points", layer="calibrated")` is the
    base_link view of bridge_lake.lake.base_link (made from the normalized points).
    `lake`: a Lake, or its path or URL (`open_lake`).
    """
    lake = open_lake(lake)
    if layer not in LAYERS:
        raise ValueError(f"unknown layer {layer!r}")
    if (layer, table) == ("calibrated", "lidar_points"):
        return base_link.frame(
            scan("lidar_points", lake=lake, drives=drives),
            scan("lidar_transforms", lake=lake, layer="calibrated", drives=drives),
            scan("deskewed_points", lake=lake, layer="calibrated", drives=drives),
        )
    wanted = None if drives is None else [validate_drive_id(d) for d in drives]
    if lake.is_local:
        source: str | list[str] = f"{lake.table_dir(layer, table)}/"
    else:  # the published sets only, and only the wanted drives' parts
        published = lake.table_files(layer, table)
        source = [
            lake.url(f)
            for drive, files in published.items()
            if wanted is None or drive in wanted
            for f in files
        ]
        if not source:
            return _empty_frame(layer, table, lake)
    frame = pl.scan_parquet(
        source,
        hive_partitioning=True,
        hive_schema={"drive": pl.String},
        storage_options=polars_storage_options(lake) or None,
    )
    if wanted is not None:
        frame = frame.filter(pl.col("drive").is_in(wanted))
    return _leading_columns(frame)


def _leading_columns(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The view's order (bridge_lake.lake.views.select_list): drive, time_utc, the rest."""
    names = frame.collect_schema().names()
    first = [pl.col("drive")]
    if "time_ns" in names:
        utc = pl.from_epoch(pl.col("time_ns"), time_unit="ns").dt.replace_time_zone("UTC")
        first.append(utc.alias(TIME_COLUMN))
    return frame.select(*first, pl.exclude("drive"))


def _empty_frame(layer: str, table: str, lake: Lake) -> pl.LazyFrame:
    """No partition (of the wanted drives): the table's columns without rows, where the
    schema is known (generic tables have none until a drive brings one)."""
    spec = next((s for s in TABLES if (s.layer, s.name) == (layer, table)), None)
    if spec is None:
        raise BridgeLakeError(f"no partition of {layer}/{table} in {lake.root}")
    empty = pl.from_arrow(spec.schema.empty_table())
    assert isinstance(empty, pl.DataFrame)
    return _leading_columns(empty.with_columns(drive=pl.lit(None, pl.String)).lazy())


def polars_storage_options(lake: Lake) -> dict[str, str]:
    """The lake's fsspec/s3fs options in the names polars' object store expects."""
    opts = dict(lake.storage_options)
    out: dict[str, str] = {}
    endpoint = opts.get("client_kwargs", {}).get("endpoint_url") or opts.get("endpoint_url")
    if endpoint:
        out["aws_endpoint_url"] = endpoint
        if endpoint.startswith("http://"):
            out["aws_allow_http"] = "true"
    for src, dst in (
        ("key", "aws_access_key_id"),
        ("secret", "aws_secret_access_key"),
        ("token", "aws_session_token"),
    ):
        if opts.get(src):
            out[dst] = opts[src]
    region = opts.get("client_kwargs", {}).get("region_name")
    if region:
        out["aws_region"] = region
    return out


def connect(lake: Lake | str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every view of sql/views.sql over `lake` (a Lake,
    or its path or URL: `open_lake`), plus one view per generic ADTF table the lake holds
    (`normalized_ddl_<struct>`).

    Views over tables that have no partition yet fail when queried, not here.
    """
    lake = open_lake(lake)
    con = duckdb.connect()
    con.execute(SESSION)
    if lake.is_local:
        root = lake.base
    else:
        con.register_filesystem(lake.fs)
        root = lake.url(lake.base)
    con.execute("SET VARIABLE lake = ?", [root])
    for spec in TABLES:
        found, files = _parts(con, lake, spec.layer, spec.name)
        if found:
            con.execute(table_view_sql(spec, files=files))
        else:  # an empty view with the table's columns, so joins and counts still work
            empty = spec.schema.empty_table().append_column("drive", pa.array([], pa.string()))
            con.register(f"_empty_{view_name(spec.layer, spec.name)}", empty)
            name = view_name(spec.layer, spec.name)  # schema constants, not input
            sql = f"CREATE OR REPLACE VIEW {name} AS SELECT {select_list(spec)} FROM _empty_{name}"  # noqa: S608
            con.execute(sql)
    for table in lake.tables("normalized"):
        if table.startswith(GENERIC_PREFIX):  # name checked by lake.tables: [a-z0-9_]
            found, files = _parts(con, lake, "normalized", table)
            if found:
                con.execute(generic_view_sql(table, files=files))
    con.execute(summaries_sql())
    return con


def _parts(
    con: duckdb.DuckDBPyConnection, lake: Lake, layer: str, table: str
) -> tuple[bool, str | None]:
    """Whether the table has published parts, and how its view finds them: None for the glob
    under `lake` (local lakes), else the variable set here to the published files."""
    if lake.is_local:
        return bool(lake.fs.glob(f"{lake.table_dir(layer, table)}/drive=*/*.parquet")), None
    files = [lake.url(f) for parts in lake.table_files(layer, table).values() for f in parts]
    if not files:
        return False, None
    name = files_variable(layer, table)  # from schema names: [a-z0-9_]
    con.execute(f"SET VARIABLE {name} = ?", [files])
    return True, name

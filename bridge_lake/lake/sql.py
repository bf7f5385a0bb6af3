"""An analyst's SQL on a `connect()` connection, with errors that say what to type instead.

The views are named `<layer>_<table>` (normalized_imu, calibrated_poses) while
`scan("imu")` takes the bare table name, so `select * from imu` is the first thing people
type. DuckDB's own hint for it is the closest name by spelling (`drive_summary` for imu,
`pg_views` for poses); UnknownTableError names the views of that table instead.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Iterator

import duckdb

from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake.paths import LAYERS

MISSING_TABLE = re.compile(r'Table with name "?([^"!]+?)"? does not exist')
"""DuckDB's Catalog Error for a FROM name that is no table or view."""


class QueryError(BridgeLakeError):
    """SQL DuckDB refused or could not run (parser, binder, catalog, I/O): its message."""


class UnknownTableError(QueryError):
    """A query names a table or view the connection does not have; `suggestions` are the
    views it most likely means (empty when none is close)."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        hint = f"did you mean {' or '.join(suggestions)}? " if suggestions else ""
        super().__init__(
            f"query failed: no table or view named {name}; {hint}"
            "(`show tables` lists every view; they are named <layer>_<table>)"
        )


def run(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.DuckDBPyRelation | None:
    """`con.sql(sql)` with typed errors: the relation of a query (run when it is read), or
    None for a statement without a result (SET, CREATE VIEW …)."""
    with query_errors(con):
        return con.sql(sql)


@contextlib.contextmanager
def query_errors(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB errors raised inside as QueryError (UnknownTableError for a missing table)."""
    try:
        yield
    except duckdb.CatalogException as exc:
        m = MISSING_TABLE.search(str(exc))
        if m:
            raise UnknownTableError(m.group(1), suggest_views(con, m.group(1))) from exc
        raise QueryError(f"query failed: {exc}") from exc
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {exc}") from exc


def user_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The views of the lake on `con` (not DuckDB's own, nor the tables behind empty views)."""
    rows = con.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return sorted(r[0] for r in rows if not r[0].startswith("_"))


def suggest_views(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """The views `name` most likely means: `<layer>_<name>` for a bare table name (imu →
    normalized_imu), else views ending in `_<name>`, else the closest name by spelling,
    bare table names included (imus → normalized_imu)."""
    views = user_views(con)
    wanted = name.lower()
    exact = [v for v in views if any(v == f"{layer}_{wanted}" for layer in LAYERS)]
    if exact:
        return exact
    ending = [v for v in views if v.endswith(f"_{wanted}")]
    if ending:
        return ending
    bare: dict[str, list[str]] = {}
    for v in views:
        layer, _, table = v.partition("_")
        if layer in LAYERS and table:
            bare.setdefault(table, []).append(v)
    close = difflib.get_close_matches(wanted, [*views, *bare], n=1, cutoff=0.75)
    return list(dict.fromkeys(v for c in close for v in bare.get(c, [c])))

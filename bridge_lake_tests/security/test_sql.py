"""SQL parameters are bound, never string-built: the scene rules of sql/scenes run with their
drive and parameter values as prepared-statement parameters, so a hostile value (quotes,
a second statement, a comment) is only ever compared as data."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from bridge_lake.scenes.catalog import drive_extent
from bridge_lake.scenes.rules import (
    PARAMS_FILE,
    RULES_DIR,
    SceneRuleError,
    load_params,
    load_rule,
    run_rule,
)

INJECTIONS = [
    "a' OR drive <> '",
    "a' OR 1=1 --",
    "a'; DROP TABLE canary; --",
    'a"; DROP TABLE canary; --',
    "$drive",
]


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    """Poses of drives a and b, each braking hard at 8 m/s^2 after 2 s; a canary table."""
    con = duckdb.connect()
    t = np.arange(0, 6_000_000_000, 50_000_000, dtype=np.int64)
    speed = np.where(t < 2e9, 20.0, np.maximum(20.0 - 8.0 * (t - 2e9) / 1e9, 0.0))
    con.execute("CREATE TABLE calibrated_poses (drive VARCHAR, time_ns BIGINT, speed_mps DOUBLE)")
    rows = [(d, int(a), float(b)) for d in "ab" for a, b in zip(t, speed, strict=True)]
    con.executemany("INSERT INTO calibrated_poses VALUES (?, ?, ?)", rows)
    con.execute(
        "CREATE TABLE normalized_streams AS"
        " SELECT 'a' AS drive, 1 AS first_time_ns, 2 AS last_time_ns"
    )
    con.execute("CREATE TABLE canary AS SELECT 42 AS x")
    return con


def _canary_alive(con) -> bool:
    return con.execute("SELECT x FROM canary").fetchall() == [(42,)]


def test_the_shipped_rule_finds_the_planted_brake(con):
    """The control: with an honest drive id the rule returns its hit (so zero rows below
    means the hostile value stayed a value)."""
    rule = load_rule(RULES_DIR / "hard_brake.sql")
    values = load_params(PARAMS_FILE).for_rule("hard_brake", None)
    hits = run_rule(con, rule, "a", values).hits
    assert hits.num_rows == 1 and hits.column("drive").to_pylist() == ["a"]


@pytest.mark.parametrize("drive", INJECTIONS)
def test_a_hostile_drive_value_is_data(con, drive):
    rule = load_rule(RULES_DIR / "hard_brake.sql")
    values = load_params(PARAMS_FILE).for_rule("hard_brake", None)
    assert run_rule(con, rule, drive, values).hits.num_rows == 0  # no drive has that name
    assert _canary_alive(con)
    assert drive_extent(con, "a") == (1, 2)
    assert drive_extent(con, drive) is None
    assert _canary_alive(con)


@pytest.mark.parametrize("value", INJECTIONS)
def test_a_hostile_parameter_value_is_data(con, value, tmp_path):
    path = tmp_path / "echo.sql"
    path.write_text(
        "SELECT $drive AS drive, 0::BIGINT AS t_start_ns, 1::BIGINT AS t_end_ns,"
        " $tag AS tag, 1.0 AS score FROM canary WHERE $tag = $tag"
    )
    hits = run_rule(con, load_rule(path), "a", {"tag": value}).hits
    assert hits.column("tag").to_pylist() == [value]  # returned verbatim, never executed
    assert _canary_alive(con)


def test_a_hostile_numeric_parameter_fails_as_a_typed_error(con):
    rule = load_rule(RULES_DIR / "hard_brake.sql")
    values = load_params(PARAMS_FILE).for_rule("hard_brake", None)
    values["decel_mps2"] = "1; DROP TABLE canary; --"
    with pytest.raises(SceneRuleError, match="failed"):
        run_rule(con, rule, "a", values)
    assert _canary_alive(con)

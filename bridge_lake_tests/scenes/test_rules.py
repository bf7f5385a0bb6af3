"""Scene rules: every planted event of the synthetic drives found with its window and nothing
on calm segments; the rules the generators plant nothing for checked on crafted tables;
parameters bound as values; broken rules and parameter files failing with the file named."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pyarrow as pa
import pytest

from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import Lake
from bridge_lake.lake.query import connect
from bridge_lake.lake.schemas import CAN_FRAMES
from bridge_lake.lake.schemas.calibrated import POSES
from bridge_lake.lake.schemas.scenes import CAMERA_STATS
from bridge_lake.scenes.rules import (
    SceneParams,
    SceneRuleError,
    check_rules,
    load_params,
    load_rule,
    load_rules,
    run_rule,
    run_rules,
)

KINDS = ("hard_brake", "sharp_turn", "gnss_degraded", "lidar_dropout", "camera_black")
TOLERANCE_S = {"gnss_degraded": 0.5}
"""The GNSS window starts at the last fix before the outage: up to one period of the slowest
receiver (NCLT RTK, 2.5 Hz) early. Every other window is within 0.3 s of the truth."""
NS = 1_000_000_000


def _union(hits: pa.Table, tag: str) -> list[tuple[int, int]]:
    rows = sorted((r["t_start_ns"], r["t_end_ns"]) for r in hits.to_pylist() if r["tag"] == tag)
    out: list[list[int]] = []
    for start, end in rows:
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


# --- planted events ------------------------------------------------------------------------


@pytest.mark.parametrize("drive", ["adtf-s7", "nclt-s21"])
@pytest.mark.parametrize("kind", KINDS)
def test_planted_event_found_with_its_window(event_lake, scene_results, drive, kind):
    (event,) = [e for e in event_lake.planted[drive] if e.kind == kind]
    found = _union(scene_results[drive].hits, kind)
    assert len(found) == 1, f"{kind}: {found}"  # the planted one, and nowhere else
    start, end = found[0]
    tolerance = TOLERANCE_S.get(kind, 0.3) * NS
    assert abs(start - event.start_ns) <= tolerance, (start - event.start_ns) / NS
    assert abs(end - event.end_ns) <= tolerance, (end - event.end_ns) / NS


@pytest.mark.parametrize("drive", ["adtf-s7", "nclt-s21"])
def test_each_planted_event_is_one_scene_and_calm_segments_stay_calm(
    event_lake, scene_results, drive
):
    result = scene_results[drive]
    planted = sorted(event_lake.planted[drive], key=lambda e: e.start_ns)
    assert [e.kind for e in planted] == [
        "hard_brake",
        "sharp_turn",
        "gnss_degraded",
        "lidar_dropout",
        "camera_black",
    ]
    # every hit of any rule lies on a planted event: nothing on the calm segments between
    for hit in result.hits.to_pylist():
        assert any(
            hit["t_start_ns"] < e.end_ns + NS and hit["t_end_ns"] > e.start_ns - NS for e in planted
        ), hit
    # the GNSS outage is also a sync outlier of the key frames, within its window
    for start, end in _union(result.hits, "sensor_desync"):
        (gnss,) = [e for e in planted if e.kind == "gnss_degraded"]
        assert gnss.start_ns - NS < start and end < gnss.end_ns + NS
    scenes = result.catalog.to_pylist()
    assert len(scenes) == len(planted)
    for scene, event in zip(scenes, planted, strict=True):
        assert event.kind in scene["tags"]
        assert scene["t_start_ns"] <= event.start_ns and scene["t_end_ns"] >= event.end_ns
        assert scene["scene_id"].startswith(f"{drive}-")
    # the stretches between the events (beyond the 2 s padding): no scene on them
    margin = result.pad_ns + NS
    calm = [(a.end_ns + margin, b.start_ns - margin) for a, b in itertools.pairwise(planted)]
    calm += [(result.extent[0], planted[0].start_ns - margin)]
    calm += [(planted[-1].end_ns + margin, result.extent[1])]
    assert sum(b - a for a, b in calm) > 25 * NS
    for lo, hi in calm:
        assert not [s for s in scenes if s["t_start_ns"] < hi and s["t_end_ns"] > lo]


def test_a_calm_drive_has_no_hit(event_lake, scene_results):
    result = scene_results[event_lake.calm]
    assert result.extent[1] - result.extent[0] > 10 * NS
    assert result.hits.num_rows == 0 and result.catalog.num_rows == 0
    assert len(result.camera.time_ns) > 150 and result.camera.undecoded == 0


def test_rules_are_fast_and_read_only_their_drive(scene_results):
    for result in scene_results.values():
        assert result.seconds["rules"] < 5
        assert set(result.hits.column("drive").to_pylist()) <= {result.drive}


# --- rules without planted events, on crafted tables ----------------------------------------


def _poses(t_s: np.ndarray, speed: np.ndarray, yaw: np.ndarray | None = None) -> pa.Table:
    n = len(t_s)
    zeros = np.zeros(n)
    cols = {
        "time_ns": (t_s * NS).astype(np.int64),
        "frame_id": ["map"] * n,
        "child_frame_id": ["base_link"] * n,
        **dict.fromkeys(("x_m", "y_m", "z_m", "qx", "qy", "qz"), zeros),
        "qw": np.ones(n),
        "speed_mps": speed,
        "yaw_rad": zeros if yaw is None else yaw,
        "source": ["test"] * n,
    }
    return pa.table(cols, schema=POSES.schema)


def _run(lake: Lake, name: str, source: str = "adtf") -> list[tuple[float, float]]:
    (rule,) = [r for r in load_rules() if r.name == name]
    con = connect(lake)
    run = run_rule(con, rule, "d1", load_params().for_rule(name, source))
    return [(r["t_start_ns"] / NS, r["t_end_ns"] / NS) for r in run.hits.to_pylist()]


def test_stop_and_go_needs_three_stops_within_the_window(tmp_path):
    t = np.arange(0, 600, 0.1)
    speed = np.full(len(t), 10.0)
    speed[t < 5] = 0.0  # parked at the start: not a stop
    for at in (20, 50, 80, 400):  # three stops within 120 s, then one alone
        speed[(t >= at) & (t < at + 3)] = 0.0
    lake = Lake(str(tmp_path))
    lake.write_partition("calibrated", "poses", "d1", _poses(t, speed))
    hits = _run(lake, "stop_and_go")
    assert hits and min(a for a, _ in hits) == pytest.approx(20, abs=0.11)
    assert max(b for _, b in hits) == pytest.approx(82.9, abs=0.11)
    assert all(b < 100 for _, b in hits)


def test_sharp_turn_and_hard_brake_on_a_crafted_track(tmp_path):
    t = np.arange(0, 60, 0.01)
    speed = np.clip(15 - np.clip(t - 10, 0, None) * 5, 5, 15)  # 15 → 5 m/s at 5 m/s² from 10 s
    rate = np.where((t >= 30) & (t < 36), 0.6, 0.1)  # 0.6 rad/s for 6 s, else a gentle curve
    yaw = np.angle(np.exp(1j * np.cumsum(rate) * 0.01))  # wrapped, as poses store it
    lake = Lake(str(tmp_path))
    lake.write_partition("calibrated", "poses", "d1", _poses(t, speed, yaw))
    ((a, b),) = _run(lake, "hard_brake")
    assert a == pytest.approx(10, abs=0.3) and b == pytest.approx(12, abs=0.3)
    ((a, b),) = _run(lake, "sharp_turn")
    assert a == pytest.approx(30, abs=0.3) and b == pytest.approx(36, abs=0.3)


def test_camera_frozen_but_not_black_and_not_short(tmp_path):
    t = np.arange(0, 60, 1 / 15)
    n = len(t)
    mean, diff = np.full(n, 120.0), np.full(n, 2.0)
    diff[(t >= 10) & (t < 14)] = 0.0  # frozen 4 s
    diff[(t >= 20) & (t < 22)] = 0.0  # frozen 2 s: below min_duration_s
    black = (t >= 30) & (t < 36)
    mean[black], diff[black] = 3.0, 0.0  # black frames do not change either
    stats = pa.table(
        {
            "time_ns": (t * NS).astype(np.int64),
            "stream": ["cam"] * n,
            "camera": ["cam"] * n,
            "mean_luma": mean,
            "luma_std": np.where(black, 0.5, 40.0),
            "diff_prev": diff,
        },
        schema=CAMERA_STATS.schema,
    )
    lake = Lake(str(tmp_path))
    lake.write_partition("scenes", "camera_stats", "d1", stats)
    ((a, b),) = _run(lake, "camera_frozen")
    assert a == pytest.approx(10 - 1 / 15, abs=0.01) and b == pytest.approx(14 - 1 / 15, abs=0.01)
    ((a, b),) = _run(lake, "camera_black")
    assert a == pytest.approx(30, abs=0.07) and b == pytest.approx(36 - 1 / 15, abs=0.07)


def test_can_bus_load_burst(tmp_path):
    base = np.arange(0, 30, 1 / 500)  # 500 frames/s: ~13 % of 500 kbit/s
    burst = np.arange(10, 13, 1 / 4000)  # 4000 more frames/s for 3 s: over 100 %
    t = np.sort(np.concatenate([base, burst]))
    n = len(t)
    frames = pa.table(
        {
            "time_ns": (t * NS).astype(np.int64),
            "sensor_time_ns": pa.nulls(n, pa.int64()),
            "stream": ["can"] * n,
            "frame_id": ["can"] * n,
            "channel": np.zeros(n, np.int16),
            "can_id": np.full(n, 0x100),
            "is_extended": np.zeros(n, bool),
            "is_remote": np.zeros(n, bool),
            "dlc": np.full(n, 8, np.int16),
            "data": [b"\0" * 8] * n,
        },
        schema=CAN_FRAMES.schema,
    )
    lake = Lake(str(tmp_path))
    lake.write_partition("normalized", "can_frames", "d1", frames)
    assert _run(lake, "can_bus_load") == [(10.0, 13.0)]


def test_rules_on_a_lake_without_tables_find_nothing(tmp_path):
    con = connect(Lake(str(tmp_path)))
    runs = run_rules(con, "d1", load_rules(), load_params(), None)
    assert [r.hits.num_rows for r in runs] == [0] * len(runs)


# --- parameters -----------------------------------------------------------------------------

ECHO = (
    "SELECT $drive AS drive, 0::BIGINT AS t_start_ns, 1::BIGINT AS t_end_ns, "
    "$label AS tag, 1.0 AS score\n"
)
INJECTION = "x' AS tag, 1.0 AS score; DROP VIEW calibrated_poses; --"


def test_sql_text_in_a_parameter_is_bound_as_a_value(event_lake, tmp_path):
    (tmp_path / "echo.sql").write_text(ECHO)
    rules = load_rules(tmp_path)
    params = SceneParams(tmp_path / "params.yaml", {"echo": {"label": INJECTION}})
    con = connect(event_lake.lake)
    (run,) = run_rules(con, "adtf-s7", rules, params, "adtf")
    assert run.hits.column("tag").to_pylist() == [INJECTION]
    count = con.execute("SELECT count(*) FROM calibrated_poses WHERE drive = 'adtf-s7'")
    assert count.fetchall()[0][0] > 0  # the view is still there


def test_sql_text_in_a_threshold_is_not_sql(event_lake):
    """Pasted, `decel >= 0 OR true` would make every pose a hard brake; bound, the text is
    not a number and the rule fails, naming its file."""
    params = load_params()
    brake = {**params.rules["hard_brake"], "decel_mps2": "0 OR true"}
    params = dataclasses.replace(params, rules={**params.rules, "hard_brake": brake})
    (rule,) = [r for r in load_rules() if r.name == "hard_brake"]
    with pytest.raises(SceneRuleError) as err:
        run_rule(connect(event_lake.lake), rule, "adtf-s7", params.for_rule("hard_brake", "adtf"))
    assert str(err.value).startswith(str(rule.path))
    assert "0 OR true" in str(err.value)


def test_source_overrides_apply_to_their_source_only():
    params = load_params()
    assert params.for_rule("hard_brake", "nclt")["decel_mps2"] < 4
    assert params.for_rule("hard_brake", "adtf") == params.rules["hard_brake"]
    assert params.for_rule("hard_brake", None) == params.rules["hard_brake"]


def test_shipped_rules_and_parameters_agree():
    rules = load_rules()
    assert {r.name for r in rules} == {
        "hard_brake",
        "sharp_turn",
        "stop_and_go",
        "gnss_degraded",
        "lidar_dropout",
        "camera_black",
        "camera_frozen",
        "can_bus_load",
        "sensor_desync",
    }
    check_rules(rules, load_params())
    assert all(r.reads and len(r.sha256) == 64 for r in rules)


# --- broken rules and parameter files --------------------------------------------------------

GOOD_TAIL = "0::BIGINT AS t_start_ns, 1::BIGINT AS t_end_ns, 'x' AS tag, 1.0 AS score"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC 1", "not valid SQL"),
        ("SELECT 1; SELECT 2", "one SELECT statement"),
        ("DROP VIEW calibrated_poses", "one SELECT statement"),
        ("-- only a comment\n", "one SELECT statement"),
        ("SELECT $drive AS drive, 1 AS t0", "returns columns"),
        (f"SELECT $drive AS drive, {GOOD_TAIL} FROM no_such_view", "the rule failed"),
        (
            "SELECT $drive AS drive, NULL::BIGINT AS t_start_ns, 1::BIGINT AS t_end_ns, "
            "'x' AS tag, 1.0 AS score",
            "returns nulls in ['t_start_ns']",
        ),
        (f"SELECT 'other' AS drive, {GOOD_TAIL} WHERE $drive <> ''", "rows of other drives"),
        (f"SELECT 'd1' AS drive, {GOOD_TAIL}", "a rule selects its drive with $drive"),
        (
            "SELECT $drive AS drive, 5::BIGINT AS t_start_ns, 1::BIGINT AS t_end_ns, "
            "'x' AS tag, 1.0 AS score",
            "ends before it starts",
        ),
        (f"SELECT $drive AS drive, {GOOD_TAIL} WHERE $nope", "have no value in"),
    ],
)
def test_bad_rule_gives_typed_error_naming_the_file(tmp_path, sql, message):
    path = tmp_path / "rules" / "bad.sql"
    path.parent.mkdir()
    path.write_text(sql)
    con = connect(Lake(str(tmp_path / "lake")))
    with pytest.raises(SceneRuleError) as err:
        run_rules(con, "d1", load_rules(path.parent), SceneParams(tmp_path / "p.yaml", {}), None)
    assert isinstance(err.value, BridgeLakeError)
    assert str(err.value).startswith(str(path)) and err.value.path == path
    assert message in str(err.value)


def test_unreadable_and_missing_rule_files(tmp_path):
    path = tmp_path / "latin1.sql"
    path.write_bytes(b"SELECT '\xe9'")
    with pytest.raises(SceneRuleError, match="not UTF-8") as err:
        load_rule(path)
    assert err.value.path == path
    with pytest.raises(SceneRuleError, match="cannot read"):
        load_rule(tmp_path / "absent.sql")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SceneRuleError, match="no rule"):
        load_rules(tmp_path / "empty")
    with pytest.raises(SceneRuleError, match="no such rules folder"):
        load_rules(tmp_path / "absent")


@pytest.mark.parametrize(
    ("yaml_text", "message", "names_rule"),
    [
        ("rules:\n  echo: {label: a, extra: 1}\n", "sets ['extra']", True),
        ("rules:\n  echo: {label: a}\n  ghost: {x: 1}\n", "no rule ghost.sql", False),
        ("rules:\n  echo: {label: a}\nsources:\n  nclt:\n    echo: {typo: 1}\n", "typo", True),
        ("rules:\n  echo: {label: [1, 2]}\n", "must be a number, text or boolean", False),
        ("rules: [\n", "not valid YAML", False),
        ("colour: red\n", "unknown sections", False),
        ("catalog: {pad_s: -1}\n", "pad_s must be a number ≥ 0", False),
        ("rules:\n  echo: !!python/object:os.system {}\n", "not valid YAML", False),
    ],
)
def test_bad_parameters_give_typed_errors(tmp_path, yaml_text, message, names_rule):
    (tmp_path / "echo.sql").write_text(ECHO)
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml_text)
    with pytest.raises(SceneRuleError) as err:
        check_rules(load_rules(tmp_path), load_params(params_path))
    assert message in str(err.value)
    named = tmp_path / "echo.sql" if names_rule else params_path
    assert str(err.value).startswith(str(named))

"""The scene catalog of a drive: every rule hit widened by a margin, overlapping ones merged
into one scene, clipped to the drive.

Padding first and merging after means two hits closer than twice the margin become one scene:
a person looking at a hard brake wants the sharp turn two seconds later in the same clip.
Merging is one sort and a running maximum over the hits (numpy), so its cost does not depend
on how many rules hit. A drive without hits gets an empty catalog: finding nothing is a result.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from bridge_lake.findings import Finding
from bridge_lake.lake import Lake
from bridge_lake.lake.query import connect
from bridge_lake.lake.schemas.scenes import CATALOG
from bridge_lake.scenes.camera_stats import CameraStats, write_camera_stats
from bridge_lake.scenes.rules import (
    RuleRun,
    check_rules,
    hits_table,
    load_params,
    load_rules,
    run_rules,
)


def merge_hits(
    drive: str, hits: pa.Table, pad_ns: int, extent: tuple[int, int] | None = None
) -> pa.Table:
    """The catalog rows (CATALOG schema) of `hits` (HITS schema): each hit padded by `pad_ns`
    on both sides, hits that then overlap or touch merged, the scenes clipped to `extent`
    (first, last time of the drive; None: no clipping) and those left empty dropped.

    A scene's tags, rules and rule hashes are the sorted union of its hits'; its score and
    the tag in its id are the strongest hit's (ties: the first tag by name)."""
    if pad_ns < 0:
        raise ValueError("pad_ns must be ≥ 0")
    if hits.num_rows == 0:
        return CATALOG.schema.empty_table()
    start = hits.column("t_start_ns").to_numpy() - pad_ns
    end = hits.column("t_end_ns").to_numpy() + pad_ns
    order = np.lexsort((end, start))
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    opens = np.ones(len(start), dtype=bool)
    opens[1:] = start[1:] > reach[:-1]
    frame = pl.from_arrow(hits.select(["tag", "score", "rule", "rule_hash"]).take(order))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns(
        scene=pl.Series(np.cumsum(opens) - 1), start=pl.Series(start), end=pl.Series(end)
    )
    scenes = (
        frame.sort(["scene", "score", "tag"], descending=[False, True, False])
        .group_by("scene", maintain_order=True)
        .agg(
            pl.col("start").min(),
            pl.col("end").max(),
            pl.col("tag").first().alias("primary"),
            pl.col("score").first(),
            pl.col("tag").unique().sort().alias("tags"),
            pl.col("rule").unique().sort().alias("rules"),
        )
    )
    if extent is not None:
        scenes = scenes.with_columns(
            pl.col("start").clip(lower_bound=extent[0]), pl.col("end").clip(upper_bound=extent[1])
        ).filter(pl.col("start") <= pl.col("end"))
    hashes = dict(zip(frame["rule"].to_list(), frame["rule_hash"].to_list(), strict=True))
    rules = scenes["rules"].to_list()
    starts = scenes["start"].to_list()
    return pa.table(
        {
            "scene_id": [
                f"{drive}-{tag}-{t}" for tag, t in zip(scenes["primary"], starts, strict=True)
            ],
            "t_start_ns": starts,
            "t_end_ns": scenes["end"].to_list(),
            "tags": scenes["tags"].to_list(),
            "score": scenes["score"].to_list(),
            "rules": rules,
            "rule_hashes": [[hashes[r] for r in rs] for rs in rules],
        },
        schema=CATALOG.schema,
    )


def drive_extent(con: duckdb.DuckDBPyConnection, drive: str) -> tuple[int, int] | None:
    """First and last master time of any stream of the drive (normalized/streams)."""
    first, last = con.execute(
        "SELECT min(first_time_ns), max(last_time_ns) FROM normalized_streams WHERE drive = $d",
        {"d": drive},
    ).fetchall()[0]
    return None if first is None or last is None else (int(first), int(last))


def drive_source(lake: Lake, drive: str) -> str | None:
    """The drive's source (raw/drives, from drive.yaml), which picks its parameter overrides."""
    if not lake.has_partition("raw", "drives", drive):
        return None
    sources = lake.read_partition("raw", "drives", drive, columns=["source"]).column("source")
    return sources[0].as_py() if len(sources) else None


@dataclass(frozen=True)
class SceneResult:
    """One drive's scene catalog and how it was made."""

    drive: str
    source: str | None
    catalog: pa.Table
    hits: pa.Table
    runs: list[RuleRun]
    camera: CameraStats
    extent: tuple[int, int] | None
    pad_ns: int
    seconds: dict[str, float]
    """camera_stats, rules, catalog: wall time of each step"""
    files: list[str]


def build_scene_catalog(
    lake: Lake,
    drive: str,
    *,
    rules_dir: str | Path | None = None,
    params_file: str | Path | None = None,
) -> SceneResult:
    """Camera statistics, then every rule, then the merged catalog of one drive, written to
    scenes/camera_stats and scenes/catalog. Rules and parameters are loaded and checked first,
    so a broken rule fails before anything is computed."""
    rules = load_rules(rules_dir)
    params = load_params(params_file)
    source = drive_source(lake, drive)
    check_rules(rules, params)
    t0 = time.perf_counter()
    camera = write_camera_stats(lake, drive, params.max_rate_hz)
    t1 = time.perf_counter()
    con = connect(lake)  # after the camera stats: a view sees the partitions present now
    try:
        runs = run_rules(con, drive, rules, params, source)
        extent = drive_extent(con, drive)
    finally:
        con.close()
    t2 = time.perf_counter()
    hits = hits_table(runs)
    catalog = merge_hits(drive, hits, params.pad_ns, extent)
    files = lake.write_partition("scenes", CATALOG.name, drive, catalog)
    seconds = {"camera_stats": t1 - t0, "rules": t2 - t1, "catalog": time.perf_counter() - t2}
    return SceneResult(
        drive, source, catalog, hits, runs, camera, extent, params.pad_ns, seconds, files
    )


CHECKS: dict[str, tuple[str, bool]] = {
    "catalog_valid": (
        "scene ids unique, every scene starts before it ends, inside the drive, scenes in time "
        "order without overlap, each with its tags, rules and rule hashes",
        True,
    ),
    "inputs_present": (
        "every table a rule reads has a partition for the drive (else its rule saw nothing)",
        False,
    ),
    "camera_frames_measured": (
        "every camera frame decoded for the camera rules (brightness, change)",
        False,
    ),
}
"""name → (description, ERROR): the scene_catalog asset's checks."""


def findings(result: SceneResult, lake: Lake) -> list[Finding]:
    """The CHECKS of one drive's scene catalog, as data (the Dagster layer reports them)."""
    return [_valid(result), _inputs(result, lake), _camera(result)]


def _finding(name: str, problems: list[str], ok: str, **metadata: object) -> Finding:
    return Finding(
        CATALOG.name,
        name,
        not problems,
        CHECKS[name][1],
        {"problems": problems[:50], **metadata},
        "; ".join(problems[:3]) if problems else ok,
    )


def _valid(result: SceneResult) -> Finding:
    cat = result.catalog
    start, end = cat.column("t_start_ns").to_numpy(), cat.column("t_end_ns").to_numpy()
    ids = cat.column("scene_id").to_pylist()
    problems = []
    if len(set(ids)) != len(ids):
        problems.append("scene ids repeat")
    if (end < start).any():
        problems.append(f"{int((end < start).sum())} scenes end before they start")
    if len(start) > 1 and (start[1:] <= end[:-1]).any():
        problems.append("scenes overlap or are out of order")
    if result.extent is not None and len(start):
        lo, hi = result.extent
        if start.min() < lo or end.max() > hi:
            problems.append("scenes reach outside the drive")
    for row in cat.select(["scene_id", "tags", "rules", "rule_hashes"]).to_pylist():
        if not row["tags"] or not row["rules"] or len(row["rules"]) != len(row["rule_hashes"]):
            problems.append(f"{row['scene_id']}: tags, rules or rule hashes missing")
    counts = dict(Counter(t for tags in cat.column("tags").to_pylist() for t in tags))
    ok = f"{cat.num_rows} scenes from {result.hits.num_rows} hits" + (
        f": {', '.join(f'{k} {v}' for k, v in counts.items())}" if counts else " (a calm drive)"
    )
    return _finding("catalog_valid", problems, ok, scenes=cat.num_rows, tags=counts)


def _inputs(result: SceneResult, lake: Lake) -> Finding:
    readers: dict[tuple[str, str], list[str]] = {}
    for run in result.runs:
        for table in run.rule.reads:
            readers.setdefault(table, []).append(run.rule.name)
    missing = [
        f"{layer}/{table} ({', '.join(rules)})"
        for (layer, table), rules in sorted(readers.items())
        if not lake.has_partition(layer, table, result.drive)
    ]
    problems = [f"no partition of {m}" for m in missing]
    return _finding("inputs_present", problems, f"all {len(readers)} tables the rules read exist")


def _camera(result: SceneResult) -> Finding:
    cam = result.camera
    problems = []
    if cam.undecoded:
        problems.append(f"{cam.undecoded} of {cam.frames} camera frames did not decode")
    if cam.unsupported:
        problems.append(f"{cam.unsupported} camera frames in an encoding that is not decoded")
    rows = len(cam.time_ns)
    ok = f"{rows} of {cam.frames} camera frames measured" if cam.frames else "no camera frames"
    return _finding("camera_frames_measured", problems, ok, frames=cam.frames, measured=rows)

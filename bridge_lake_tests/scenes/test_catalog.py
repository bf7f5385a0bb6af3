"""The catalog: hits padded, overlapping ones merged, clipped to the drive; a drive without
hits is an empty catalog, not a failure."""

from __future__ import annotations

import pyarrow as pa
import pytest

from bridge_lake.lake import Lake
from bridge_lake.lake.query import connect
from bridge_lake.lake.schemas.scenes import CATALOG
from bridge_lake.scenes.catalog import build_scene_catalog, findings, merge_hits
from bridge_lake.scenes.rules import HITS

S = 1_000_000_000


def hits(*rows: tuple[float, float, str, float]) -> pa.Table:
    """(start s, end s, tag, score) → a HITS table; the rule is the tag, its hash 'h-<tag>'."""
    return pa.table(
        {
            "drive": ["d1"] * len(rows),
            "t_start_ns": [round(a * S) for a, _, _, _ in rows],
            "t_end_ns": [round(b * S) for _, b, _, _ in rows],
            "tag": [t for _, _, t, _ in rows],
            "score": [float(s) for _, _, _, s in rows],
            "rule": [t for _, _, t, _ in rows],
            "rule_hash": [f"h-{t}" for _, _, t, _ in rows],
        },
        schema=HITS,
    )


def windows(catalog: pa.Table) -> list[tuple[float, float]]:
    return [(r["t_start_ns"] / S, r["t_end_ns"] / S) for r in catalog.to_pylist()]


def test_padding_merges_hits_closer_than_twice_the_margin():
    h = hits((10, 11, "a", 1), (13, 14, "b", 1), (20, 21, "c", 1))
    assert windows(merge_hits("d1", h, pad_ns=1 * S)) == [(9, 15), (19, 22)]
    assert windows(merge_hits("d1", h, pad_ns=0)) == [(10, 11), (13, 14), (20, 21)]
    assert windows(merge_hits("d1", h, pad_ns=3 * S)) == [(7, 24)]


def test_touching_and_nested_hits_merge():
    h = hits((0, 10, "a", 1), (2, 3, "b", 1), (10, 12, "c", 1))
    assert windows(merge_hits("d1", h, pad_ns=0)) == [(0, 12)]


def test_scenes_are_clipped_to_the_drive_and_outside_ones_dropped():
    h = hits((0.5, 1, "a", 1), (50, 60, "b", 1), (99.5, 100, "c", 1), (200, 210, "d", 1))
    catalog = merge_hits("d1", h, pad_ns=2 * S, extent=(0, 100 * S))
    assert windows(catalog) == [(0, 3), (48, 62), (97.5, 100)]
    assert "d" not in {t for tags in catalog.column("tags").to_pylist() for t in tags}


def test_merged_scene_keeps_every_tag_rule_and_hash_and_the_strongest_score():
    h = hits((10, 12, "sharp_turn", 1.3), (11, 13, "hard_brake", 2.5), (12, 14, "sharp_turn", 4))
    (scene,) = merge_hits("d1", h, pad_ns=0).to_pylist()
    assert scene["tags"] == ["hard_brake", "sharp_turn"]
    assert scene["rules"] == ["hard_brake", "sharp_turn"]
    assert scene["rule_hashes"] == ["h-hard_brake", "h-sharp_turn"]
    assert scene["score"] == 4
    assert scene["scene_id"] == f"d1-sharp_turn-{10 * S}"


def test_scene_id_is_deterministic_whatever_the_hit_order():
    rows = [(10, 12, "b_tag", 2.0), (11, 13, "a_tag", 2.0), (30, 31, "c_tag", 1.0)]
    first = merge_hits("d1", hits(*rows), pad_ns=S)
    again = merge_hits("d1", hits(*reversed(rows)), pad_ns=S)
    assert first.equals(again)
    assert first.column("scene_id").to_pylist() == [f"d1-a_tag-{9 * S}", f"d1-c_tag-{29 * S}"]


def test_no_hits_is_an_empty_catalog():
    catalog = merge_hits("d1", HITS.empty_table(), pad_ns=2 * S, extent=(0, S))
    assert catalog.num_rows == 0 and catalog.schema.equals(CATALOG.schema)
    with pytest.raises(ValueError, match="pad_ns"):
        merge_hits("d1", HITS.empty_table(), pad_ns=-1)


def test_a_drive_with_nothing_in_the_lake_gets_an_empty_catalog(tmp_path):
    lake = Lake(str(tmp_path))
    result = build_scene_catalog(lake, "quiet-drive")
    assert result.catalog.num_rows == 0 and result.hits.num_rows == 0
    assert lake.has_partition("scenes", "catalog", "quiet-drive")
    assert lake.has_partition("scenes", "camera_stats", "quiet-drive")
    count = connect(lake).execute("SELECT count(*) FROM scenes_catalog WHERE drive = 'quiet-drive'")
    assert count.fetchall() == [(0,)]
    checks = {f.check: f for f in findings(result, lake)}
    assert checks["catalog_valid"].passed and "calm drive" in checks["catalog_valid"].summary
    assert checks["camera_frames_measured"].passed
    missing = checks["inputs_present"]  # the rules saw nothing: a warning, not a failure
    assert not missing.passed and not missing.error
    assert "calibrated/poses (hard_brake, sharp_turn, stop_and_go)" in missing.summary


def test_the_event_drives_catalogs_in_the_lake(event_lake, scene_results):
    con = connect(event_lake.lake)
    for drive, result in scene_results.items():
        stored = con.execute(
            "SELECT scene_id, t_start_ns, t_end_ns, tags, score, rules, rule_hashes "
            "FROM scenes_catalog WHERE drive = $d ORDER BY t_start_ns",
            {"d": drive},
        ).fetchall()
        assert [r[0] for r in stored] == result.catalog.column("scene_id").to_pylist()
        assert all(f.passed for f in findings(result, event_lake.lake)), drive
        lo, hi = result.extent
        assert all(lo <= r[1] < r[2] <= hi for r in stored)

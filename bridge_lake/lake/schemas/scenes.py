"""Scenes layer: what the scene rules (sql/scenes/) found in a drive, and the frame statistics
they need that no earlier layer records.

Scene sets (trimmed exports) are cut from `scenes/catalog`; its column names are the contract.
"""

from __future__ import annotations

import pyarrow as pa

from bridge_lake.lake.schemas.base import F32, F64, Column, TableSpec

CAMERA_STATS = TableSpec(
    "scenes",
    "camera_stats",
    "Brightness and change of camera frames (decoded at a reduced size, every frame or at most "
    "`camera_stats.max_rate_hz`), for the camera rules: black frames have a low mean and "
    "spread, frozen ones no change.",
    (
        Column("time_ns", pa.int64(), "master clock, ns since the Unix epoch", nullable=False),
        Column("stream", pa.string(), "source stream", nullable=False),
        Column("camera", pa.string(), "camera name", nullable=False),
        Column("mean_luma", F32, "mean luma, full range 0-255 (null: the frame did not decode)"),
        Column("luma_std", F32, "standard deviation of the luma"),
        Column(
            "diff_prev",
            F32,
            "mean absolute luma difference to the camera's previous row (null for the first)",
        ),
    ),
)

CATALOG = TableSpec(
    "scenes",
    "catalog",
    "One row per scene of the drive: the hits of every scene rule, padded by a margin, "
    "overlapping ones merged, clipped to the drive. An empty partition means nothing was found.",
    (
        Column(
            "scene_id",
            pa.string(),
            "<drive>-<tag>-<t_start_ns>, tag of the strongest hit (deterministic)",
            nullable=False,
        ),
        Column("t_start_ns", pa.int64(), "scene start, master clock [ns]", nullable=False),
        Column("t_end_ns", pa.int64(), "scene end, master clock [ns]", nullable=False),
        Column("tags", pa.list_(pa.string()), "tags of the merged hits, sorted", nullable=False),
        Column(
            "score",
            F64,
            "strongest hit: its measure over the rule's threshold (≥ 1 is a hit)",
            nullable=False,
        ),
        Column("rules", pa.list_(pa.string()), "rules (sql/scenes/<rule>.sql) that hit, sorted"),
        Column("rule_hashes", pa.list_(pa.string()), "sha256 of each rule's SQL, as `rules`"),
    ),
)

SCENES: dict[str, TableSpec] = {t.name: t for t in (CAMERA_STATS, CATALOG)}

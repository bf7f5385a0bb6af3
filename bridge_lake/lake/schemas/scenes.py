"""Scenes layer: what the scene rules (sql/scenes/) found in a drive, and the frame statistics
they need that no earlier layer records.

Scene sets (trimmed exports) are cut from `scenes/catalog`; its column names are the contract.
"""

from __future__ import annotations

from bridge_lake.lake.schemas.base import TIME_NS, TableSpec, columns

CAMERA_STATS = TableSpec(
    "scenes",
    "camera_stats",
    "Brightness and change of camera frames (decoded at a reduced size, every frame or at most "
    "`camera_stats.max_rate_hz`), for the camera rules: black frames have a low mean and "
    "spread, frozen ones no change.",
    columns(
        (TIME_NS,),
        """
        stream     string!  source stream
        camera     string!  camera name
        mean_luma  float32  mean luma, full range 0-255 (null: the frame did not decode)
        luma_std   float32  standard deviation of the luma
        diff_prev  float32  mean absolute luma difference to the camera's previous row (null
            for the first)
        """,
    ),
)

CATALOG = TableSpec(
    "scenes",
    "catalog",
    "One row per scene of the drive: the hits of every scene rule, padded by a margin, "
    "overlapping ones merged, clipped to the drive. An empty partition means nothing was found.",
    columns(
        """
        scene_id     string!        <drive>-<tag>-<t_start_ns>, tag of the strongest hit
            (deterministic)
        t_start_ns   int64!         scene start, master clock [ns]
        t_end_ns     int64!         scene end, master clock [ns]
        tags         list<string>!  tags of the merged hits, sorted
        score        float64!       strongest hit: its measure over the rule's threshold (≥ 1
            is a hit)
        rules        list<string>   rules (sql/scenes/<rule>.sql) that hit, sorted
        rule_hashes  list<string>   sha256 of each rule's SQL, as `rules`
        """
    ),
)

SCENES: dict[str, TableSpec] = {t.name: t for t in (CAMERA_STATS, CATALOG)}

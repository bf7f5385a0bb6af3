"""Lidar points in base_link, made where they are read: calibrated_lidar_points.

The lake keeps each point once, in its sensor frame (normalized/lidar_points). Its base_link
place is p' = R p + t with its scan's rigid transform (calibrated/lidar_transforms), the
arithmetic of `geometry.transform_points`: float32, ((x r0 + y r1) + z r2) + t per row of R,
so the SQL view, the polars frame and the exporters give the same float32 values as the
calibrated layer computes when it checks them. A deskewed drive moved each point by its own
time: its points are stored (calibrated/deskewed_points, `stored` on its transforms) and
taken as they are.

This module is the one place of that rule, in both query languages.
"""

from __future__ import annotations

import polars as pl

POINT_COLUMNS = ("scan_id", "x", "y", "z", "intensity", "ring", "time_offset_ns")
"""The columns of a base_link point row, as calibrated/deskewed_points stores them."""
VIEW = "calibrated_lidar_points"


def _axis(i: int, term) -> list:
    """The three products and the translation of output axis i, in the order they are summed."""
    return [term("x", f"r{i}0"), term("y", f"r{i}1"), term("z", f"r{i}2"), f"t{'xyz'[i]}"]


def view_sql() -> str:
    """The DuckDB view over the normalized points, the transforms and the stored points."""
    moved = []
    for i, axis in enumerate("xyz"):
        a, b, c, t = _axis(i, lambda p, r: f"p.{p} * t.{r}")
        moved.append(f"(({a} + {b}) + {c}) + t.{t} AS {axis}")
    moved_list = ",\n       ".join(moved)
    rest = ", ".join(f"p.{c}" for c in POINT_COLUMNS[4:])
    stored = ", ".join(POINT_COLUMNS)
    # every name here is a constant of this module, nothing from input
    return f"""\
-- Lidar points in base_link: each normalized point moved by its scan's transform (float32, as
-- the exporters compute it), and the stored points of deskewed drives (bridge_lake.lake.base_link).
CREATE OR REPLACE VIEW {VIEW} AS
SELECT p.drive, p.scan_id,
       {moved_list},
       {rest}
FROM normalized_lidar_points p
JOIN calibrated_lidar_transforms t USING (drive, scan_id)
WHERE NOT t.stored
UNION ALL
SELECT drive, {stored} FROM calibrated_deskewed_points;
"""  # noqa: S608


def frame(points: pl.LazyFrame, transforms: pl.LazyFrame, stored: pl.LazyFrame) -> pl.LazyFrame:
    """The same rows as the view: `points` (normalized/lidar_points), `transforms`
    (calibrated/lidar_transforms) and `stored` (calibrated/deskewed_points), each with its
    `drive` column (first, as in every view); the moved points keep the order of `points`."""
    moved = points.join(
        transforms.filter(~pl.col("stored")),
        on=["drive", "scan_id"],
        how="inner",
        maintain_order="left",
    ).select(
        "drive",
        "scan_id",
        *(
            (((a + b) + c) + pl.col(t)).alias(axis)
            for axis, (a, b, c, t) in (
                (axis, _axis(i, lambda p, r: pl.col(p) * pl.col(r))) for i, axis in enumerate("xyz")
            )
        ),
        *POINT_COLUMNS[4:],
    )
    return pl.concat([moved, stored.select("drive", *POINT_COLUMNS)], how="vertical_relaxed")

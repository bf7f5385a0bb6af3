"""The checklist a waypoint file must pass before anyone drives it.

Each item is a Finding (bridge_lake.findings): the asset reports them as asset checks, the
CLI prints them. ERROR items are defects of the processing (wrong count, uneven spacing,
impossible velocities, missing end flags); WARN items are properties of the drive a person
should look at before a replay (a turn sharper than the yaw step allows, a lap that crosses
itself, a reversal).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from bridge_lake.findings import Finding
from bridge_lake.geometry import wrap_angle
from bridge_lake.waypoints.csv import KMH_PER_MPS
from bridge_lake.waypoints.path import Waypoints

TABLE = "waypoints"
SPACING_TOLERANCE = 0.05
"""Every interval within 5% of the spacing."""
MIN_VELOCITY_SPREAD_MPS = 0.1
"""A profile whose max - min is below this counts as constant."""

CHECKS: dict[str, tuple[str, bool]] = {
    "point_count": ("number of waypoints = path length / spacing + 1 (within one)", True),
    "spacing": ("every waypoint interval within 5% of the spacing (spread reported)", True),
    "velocity": ("velocity finite, within [0, v_max] and not constant", True),
    "flags": ("change_flag 1 on the first and last waypoint, only 0 or 1 elsewhere", True),
    "yaw_steps": ("no yaw change above max_yaw_step_rad (0.2 rad) between waypoints", False),
    "path_simple": ("no self-intersection and no backwards segment (turn over 90°)", False),
}
"""check name → (one-line description, ERROR)."""


def check_waypoints(wp: Waypoints) -> list[Finding]:
    """Every checklist item of `wp`, in CHECKS order."""
    return [
        _point_count(wp),
        _spacing(wp),
        _velocity(wp),
        _flags(wp),
        _yaw_steps(wp),
        _path_simple(wp),
    ]


def render_checklist(findings: list[Finding]) -> str:
    """One line per item for a terminal: mark, name, summary."""
    marks = {True: "ok  ", False: "FAIL"}
    return "\n".join(
        f"  {marks[f.passed] if f.passed or f.error else 'warn'} {f.check:12} {f.summary}"
        for f in findings
    )


def _finding(name: str, passed: bool, summary: str, **metadata: object) -> Finding:
    return Finding(TABLE, name, bool(passed), CHECKS[name][1], metadata, summary)


def _intervals(wp: Waypoints) -> np.ndarray:
    return np.hypot(np.diff(wp.x), np.diff(wp.y))


def _point_count(wp: Waypoints) -> Finding:
    length = float(_intervals(wp).sum())
    expected = round(length / wp.params.spacing_m) + 1
    ok = abs(len(wp) - expected) <= 1 and len(wp) >= 2
    return _finding(
        "point_count",
        ok,
        f"{len(wp)} waypoints over {length:.1f} m at {wp.params.spacing_m:g} m spacing "
        f"(expected {expected})",
        points=len(wp),
        expected_points=expected,
        length_m=round(length, 3),
    )


def _spacing(wp: Waypoints) -> Finding:
    d = _intervals(wp)
    nominal = wp.params.spacing_m
    worst = float(np.abs(d - nominal).max() / nominal) if len(d) else 1.0
    return _finding(
        "spacing",
        worst <= SPACING_TOLERANCE,
        f"intervals {d.min():.3f}-{d.max():.3f} m (std {d.std():.4f} m), worst "
        f"{100 * worst:.1f}% off {nominal:g} m",
        min_m=round(float(d.min()), 4),
        max_m=round(float(d.max()), 4),
        std_m=round(float(d.std()), 5),
        variance_m2=float(d.var()),
        worst_relative=round(worst, 4),
    )


def _velocity(wp: Waypoints) -> Finding:
    v = wp.velocity_mps
    vmax = wp.params.v_max_mps
    finite = bool(np.isfinite(v).all())
    lo, hi = (float(np.nanmin(v)), float(np.nanmax(v))) if finite else (np.nan, np.nan)
    ok = finite and lo >= 0 and hi <= vmax + 1e-9 and hi - lo >= MIN_VELOCITY_SPREAD_MPS
    return _finding(
        "velocity",
        ok,
        f"{lo * KMH_PER_MPS:.1f}-{hi * KMH_PER_MPS:.1f} km/h (cap {vmax * KMH_PER_MPS:.1f} "
        f"km/h), mean {np.nanmean(v) * KMH_PER_MPS:.1f} km/h"
        + ("" if finite else ", NOT FINITE")
        + (" — constant" if finite and hi - lo < MIN_VELOCITY_SPREAD_MPS else ""),
        min_kmh=round(lo * KMH_PER_MPS, 3),
        max_kmh=round(hi * KMH_PER_MPS, 3),
        mean_kmh=round(float(np.nanmean(v)) * KMH_PER_MPS, 3),
        v_max_kmh=round(vmax * KMH_PER_MPS, 3),
    )


def _flags(wp: Waypoints) -> Finding:
    f = wp.change_flag
    ok = bool(f[0] == 1 and f[-1] == 1 and np.isin(f, (0, 1)).all())
    return _finding(
        "flags",
        ok,
        f"first {int(f[0])}, last {int(f[-1])}; {int((f == 1).sum())} flagged waypoints, "
        f"{len(wp.stops)} stop(s) inside the drive",
        flagged=int((f == 1).sum()),
        stops=len(wp.stops),
        stop_indices=[int(i) for i in wp.stops],
    )


def _yaw_steps(wp: Waypoints) -> Finding:
    steps = np.abs(wrap_angle(np.diff(wp.yaw)))
    worst = float(steps.max()) if len(steps) else 0.0
    limit = wp.params.max_yaw_step_rad
    above = int((steps > limit).sum())
    where = f" at s = {wp.s[int(np.argmax(steps)) + 1]:.0f} m" if above else ""
    return _finding(
        "yaw_steps",
        above == 0,
        f"largest yaw step {worst:.3f} rad (limit {limit:g}); {above} above{where}",
        max_step_rad=round(worst, 4),
        steps_above=above,
    )


def _path_simple(wp: Waypoints) -> Finding:
    crossings = self_intersections(wp.x, wp.y)
    d = np.column_stack([np.diff(wp.x), np.diff(wp.y)])
    backwards = int((np.einsum("ij,ij->i", d[:-1], d[1:]) <= 0).sum())
    first = f" (first near s = {wp.s[crossings[0, 0]]:.0f} m)" if len(crossings) else ""
    return _finding(
        "path_simple",
        not len(crossings) and not backwards,
        f"{len(crossings)} self-intersection(s){first}, {backwards} backwards segment(s)",
        self_intersections=len(crossings),
        backwards_segments=backwards,
    )


def self_intersections(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pairs (i, j), i < j - 1, of polyline segments (p_i, p_i+1) and (p_j, p_j+1) that cross.

    Candidates are segments whose midpoints lie within the longest segment of each other
    (a k-d tree, not all n² pairs), then the exact orientation test on the candidates.
    """
    p = np.column_stack([x, y])
    if len(p) < 4:
        return np.empty((0, 2), dtype=np.int64)
    a, b = p[:-1], p[1:]
    reach = float(np.hypot(*(b - a).T).max()) * (1 + 1e-9)
    pairs = cKDTree((a + b) / 2).query_pairs(reach, output_type="ndarray")
    pairs = np.sort(pairs, axis=1)
    pairs = pairs[pairs[:, 1] - pairs[:, 0] > 1]
    if not len(pairs):
        return np.empty((0, 2), dtype=np.int64)
    i, j = pairs[:, 0], pairs[:, 1]

    def orient(o: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
        return (s[:, 0] - o[:, 0]) * (q[:, 1] - o[:, 1]) - (s[:, 1] - o[:, 1]) * (q[:, 0] - o[:, 0])

    cross = (orient(a[i], b[i], a[j]) * orient(a[i], b[i], b[j]) < 0) & (
        orient(a[j], b[j], a[i]) * orient(a[j], b[j], b[i]) < 0
    )
    hit = pairs[cross]
    return hit[np.lexsort((hit[:, 1], hit[:, 0]))]

"""The per-drive HTML report of the calibrated layer: trajectory, transform tree, sync.

Self-contained HTML with inline SVG, like the normalized report beside it in the lake.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bridge_lake.calibrate.drive import CalibrateResult
from bridge_lake.findings import Finding
from bridge_lake.normalize.report import CSS
from bridge_lake.report_page import esc

MAX_TRACK_POINTS = 3000
SIZE = 520


def _scale_bar(extent_m: float) -> float:
    """A round length (1, 2, 5 x 10^k m) of about a fifth of the plot."""
    target = extent_m / 5
    base = 10 ** np.floor(np.log10(max(target, 1e-3)))
    return float(min((m * base for m in (1, 2, 5, 10)), key=lambda v: abs(v - target)))


def trajectory_svg(x: np.ndarray, y: np.ndarray, speed: np.ndarray) -> str:
    """Top-down map-frame track (x east, y north), coloured by speed, with a scale bar and
    the start (circle) and end (square) marked."""
    if len(x) < 2:
        return "<p>No trajectory.</p>"
    step = max(1, len(x) // MAX_TRACK_POINTS)
    x, y, speed = x[::step], y[::step], speed[::step]
    x0, y0 = x.min(), y.min()
    extent = max(x.max() - x0, y.max() - y0, 1.0)
    px = 20 + (x - x0) / extent * (SIZE - 40)
    py = SIZE - 20 - (y - y0) / extent * (SIZE - 40)
    top = max(float(np.nanmax(speed)), 1e-6)
    parts = [f'<svg id="trajectory" width="{SIZE}" height="{SIZE}" style="border:1px solid #ddd">']
    for i in range(len(px) - 1):
        r = int(255 * min(speed[i] / top, 1.0))
        parts.append(
            f'<line x1="{px[i]:.1f}" y1="{py[i]:.1f}" x2="{px[i + 1]:.1f}" y2="{py[i + 1]:.1f}" '
            f'stroke="rgb({r},80,{255 - r})" stroke-width="2"/>'
        )
    parts.append(f'<circle cx="{px[0]:.1f}" cy="{py[0]:.1f}" r="5" fill="#59a14f"/>')
    parts.append(f'<rect x="{px[-1] - 4:.1f}" y="{py[-1] - 4:.1f}" width="8" height="8"/>')
    bar = _scale_bar(extent)
    w = bar / extent * (SIZE - 40)
    parts.append(
        f'<line x1="20" y1="{SIZE - 8}" x2="{20 + w:.1f}" y2="{SIZE - 8}" stroke="#222" '
        f'stroke-width="3"/><text x="{25 + w:.1f}" y="{SIZE - 4}">{bar:g} m</text></svg>'
    )
    return "".join(parts)


def render_calibrated_report(result: CalibrateResult, findings: Sequence[Finding]) -> str:
    failed = [f for f in findings if not f.passed]
    checks = (
        "".join(
            f'<li class="bad">{esc(f.table)}: {esc(f.check)}'
            f"{'' if f.error else ' (warning)'}: {esc(f.summary)}</li>"
            for f in failed
        )
        or "<li>all checks passed</li>"
    )
    track = result.track
    if track is not None and len(track):
        traj = trajectory_svg(track.position[:, 0], track.position[:, 1], track.speed_mps)
        lat, lon, alt = track.origin
        span = (track.time_ns[-1] - track.time_ns[0]) / 1e9
        length = float(np.linalg.norm(np.diff(track.position[:, :2], axis=0), axis=1).sum())
        traj += (
            f"<p>{len(track)} poses over {span:.1f} s, {length:.0f} m driven; source "
            f"{esc(track.source)} ({esc(track.estimator)}); map origin {lat:.7f}°, "
            f"{lon:.7f}°, {alt:.2f} m ({esc(track.origin_source)}). Colour: speed, blue slow "
            f"→ red {float(np.nanmax(track.speed_mps)):.1f} m/s.</p>"
        )
    else:
        traj = f"<p>No poses: {esc(result.pose_problem or result.rig_problem)}</p>"
    tf_rows = ""
    if result.rig is not None:
        for f in result.rig.frames.values():
            t = f.transform.translation
            tf_rows += (
                f"<tr><td>{esc(f.parent)}</td><td>{esc(f.name)}</td><td>{esc(f.kind)}</td>"
                f'<td class="num">{t[0]:.3f}, {t[1]:.3f}, {t[2]:.3f}</td></tr>'
            )
    sync_rows = "".join(
        f"<tr><td>{esc(p.lidar)}</td><td>{esc(p.sensor)}</td><td>{esc(p.table)}</td>"
        f'<td class="num">{p.p50_ms:.2f}</td><td class="num">{p.p99_ms:.2f}</td>'
        f'<td class="num">{p.max_ms:.2f}</td><td class="num">{p.tolerance_ms:.2f}</td>'
        f'<td class="num{" bad" if p.outside else ""}">{p.outside}</td></tr>'
        for p in (result.frames.pairs if result.frames else [])
    )
    rig = (
        f"{esc(result.rig.vehicle)}, valid from {result.rig.valid_from} ({esc(result.rig.path)})"
        if result.rig
        else esc(result.rig_problem)
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bridge_lake: drive {esc(result.drive)} calibrated</title><style>{CSS}</style></head>
<body>
<h1>Drive {esc(result.drive)}: calibrated layer</h1>
<p>Rig: {rig}. Drive date {result.drive_date}. Deskew: {"on" if result.deskew else "off"}.</p>
<h2>Checks that did not pass</h2><ul id="checks">{checks}</ul>
<h2>Trajectory (map frame, ENU)</h2>{traj}
<h2>Static transforms (base_link tree)</h2>
<table id="tf"><tr><th>parent</th><th>child</th><th>kind</th><th>translation m</th></tr>
{tf_rows}</table>
<h2>Key-frame sync (|time difference| to the nearest sample, ms)</h2>
<table id="sync"><tr><th>lidar</th><th>sensor</th><th>table</th><th>p50</th><th>p99</th>
<th>max</th><th>tolerance</th><th>frames outside</th></tr>{sync_rows}</table>
</body></html>
"""

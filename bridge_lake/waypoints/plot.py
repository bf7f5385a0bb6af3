"""Pictures of a waypoint path: inline SVG, no plotting library.

`waypoints_svg` is the top-down path coloured by the waypoint velocity, with the start,
the end, the stops and the flagged waypoints marked; written beside the CSV. `render_report`
is the drive's waypoint page (reports/drive=<id>/waypoints.html): the plot, the velocity
profile along the path (recorded speed and the limited profile) and the checklist.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bridge_lake.findings import Finding
from bridge_lake.report_page import BASE_CSS, esc
from bridge_lake.waypoints.csv import KMH_PER_MPS
from bridge_lake.waypoints.path import Waypoints

SIZE = 560
MARGIN = 24
COLOURS = np.array(
    [[49, 54, 149], [69, 117, 180], [116, 173, 209], [254, 224, 144], [244, 109, 67], [165, 0, 38]],
    dtype=np.float64,
)
"""Slow (blue) to fast (red)."""
BINS = 24
"""Colour steps of the velocity; one SVG polyline per run of equal colour."""
MAX_LINE_POINTS = 4000
"""Longer routes are drawn through every k-th waypoint (stops and flags are all drawn)."""
CSS = BASE_CSS + (
    ".bad { color: #b00; font-weight: 600; } .warn { color: #a60; } "
    "svg text { font: 11px sans-serif; }\n"
)


def _colour(fraction: np.ndarray) -> list[str]:
    pos = np.clip(fraction, 0, 1) * (len(COLOURS) - 1)
    lo = np.minimum(pos.astype(np.int64), len(COLOURS) - 2)
    rgb = COLOURS[lo] + (COLOURS[lo + 1] - COLOURS[lo]) * (pos - lo)[:, None]
    return [f"rgb({r:.0f},{g:.0f},{b:.0f})" for r, g, b in rgb]


def _thin(n: int) -> np.ndarray:
    """Indices of every k-th of n points (and the last), at most about MAX_LINE_POINTS."""
    return np.unique(np.append(np.arange(0, n, max(1, n // MAX_LINE_POINTS)), n - 1))


def _points(px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """ "x,y" strings of SVG coordinates, formatted by numpy."""
    return np.char.add(np.char.add(np.char.mod("%.1f", px), ","), np.char.mod("%.1f", py))


def _scale_bar(extent_m: float) -> float:
    """A round length (1, 2, 5 x 10^k m) of about a fifth of the plot."""
    target = extent_m / 5
    base = 10 ** np.floor(np.log10(max(target, 1e-3)))
    return float(min((m * base for m in (1, 2, 5, 10)), key=lambda v: abs(v - target)))


def waypoints_svg(wp: Waypoints, title: str = "") -> str:
    """Top-down path (x east / right, y north / up, equal scale) coloured by velocity."""
    x0, y0 = float(wp.x.min()), float(wp.y.min())
    extent = max(float(wp.x.max()) - x0, float(wp.y.max()) - y0, 1.0)
    scale = (SIZE - 2 * MARGIN) / extent
    width = int(2 * MARGIN + (float(wp.x.max()) - x0) * scale)
    height = int(2 * MARGIN + (float(wp.y.max()) - y0) * scale) + 40
    px = MARGIN + (wp.x - x0) * scale
    py = height - 40 - MARGIN - (wp.y - y0) * scale
    top = max(float(wp.velocity_mps.max()), 1e-6)
    # long routes: every k-th waypoint for the line (a plot, not the data)
    keep = _thin(len(px))
    lx, ly, lv = px[keep], py[keep], wp.velocity_mps[keep]
    # colour of each interval from its mean velocity; runs of one colour share a polyline
    bins = np.minimum(((lv[:-1] + lv[1:]) / 2 / top * BINS).astype(int), BINS - 1)
    starts = np.flatnonzero(np.concatenate([[True], np.diff(bins) != 0]))
    ends = np.concatenate([starts[1:], [len(bins)]])
    colours = _colour((np.arange(BINS) + 0.5) / BINS)
    pts = _points(lx, ly)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="waypoints" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" style="border:1px solid #ddd">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{MARGIN}" y="16">{esc(title)}</text>' if title else "",
    ]
    parts += [
        f'<polyline points="{" ".join(pts[a : b + 1])}" fill="none" '
        f'stroke="{colours[bins[a]]}" stroke-width="3" stroke-linejoin="round"/>'
        for a, b in zip(starts, ends, strict=True)
    ]
    flagged = np.flatnonzero(wp.change_flag == 1)
    parts += [
        f'<circle cx="{px[i]:.1f}" cy="{py[i]:.1f}" r="2" fill="#333"><title>change_flag 1, '
        f"s = {wp.s[i]:.0f} m</title></circle>"
        for i in flagged
    ]
    parts += [
        f'<polygon points="{_octagon(px[i], py[i], 7)}" fill="#d62728" stroke="white">'
        f"<title>stop at s = {wp.s[i]:.0f} m</title></polygon>"
        for i in wp.stops
    ]
    parts.append(
        f'<circle cx="{px[0]:.1f}" cy="{py[0]:.1f}" r="6" fill="#2ca02c"><title>start</title>'
        f'</circle><rect x="{px[-1] - 5:.1f}" y="{py[-1] - 5:.1f}" width="10" height="10" '
        'fill="#111"><title>end</title></rect>'
    )
    parts.append(_legend(width, height, top, extent, scale))
    parts.append("</svg>")
    return "".join(parts)


def _octagon(cx: float, cy: float, r: float) -> str:
    a = np.pi / 8 + np.arange(8) * np.pi / 4
    return " ".join(f"{cx + r * np.cos(t):.1f},{cy + r * np.sin(t):.1f}" for t in a)


def _legend(width: int, height: int, top_mps: float, extent: float, scale: float) -> str:
    y = height - 22
    n = 40
    w = min(200, width - 2 * MARGIN - 120)
    cols = _colour((np.arange(n) + 0.5) / n)
    ramp = "".join(
        f'<rect x="{MARGIN + i * w / n:.1f}" y="{y}" width="{w / n + 0.5:.1f}" height="8" '
        f'fill="{c}"/>'
        for i, c in enumerate(cols)
    )
    bar = _scale_bar(extent)
    bx = width - MARGIN - bar * scale
    return (
        f'{ramp}<text x="{MARGIN}" y="{y + 20}">0</text>'
        f'<text x="{MARGIN + w:.0f}" y="{y + 20}" text-anchor="end">'
        f"{top_mps * KMH_PER_MPS:.0f} km/h</text>"
        f'<line x1="{bx:.1f}" y1="{y + 4}" x2="{width - MARGIN}" y2="{y + 4}" stroke="#222" '
        f'stroke-width="3"/><text x="{width - MARGIN}" y="{y + 20}" text-anchor="end">'
        f"{bar:g} m</text>"
    )


def profile_svg(wp: Waypoints, width: int = 720, height: int = 200) -> str:
    """Velocity along the path: recorded speed (grey) and the waypoint velocity (blue), in
    km/h, stops as red lines."""
    left, bottom = 44, 24
    length = max(wp.length_m, 1e-6)
    top = max(float(wp.recorded_speed_mps.max()), float(wp.velocity_mps.max()), 0.1) * KMH_PER_MPS
    keep = _thin(len(wp))
    sx = left + wp.s / length * (width - left - 10)

    def line(v_mps: np.ndarray, colour: str) -> str:
        sy = height - bottom - v_mps * KMH_PER_MPS / top * (height - bottom - 10)
        pts = " ".join(_points(sx[keep], sy[keep]))
        return f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>'

    stops = "".join(
        f'<line x1="{sx[i]:.1f}" y1="10" x2="{sx[i]:.1f}" y2="{height - bottom}" '
        'stroke="#d62728" stroke-dasharray="3,2"/>'
        for i in wp.stops
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="profile" width="{width}" '
        f'height="{height}" style="border:1px solid #ddd">'
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" '
        f'stroke="#888"/><line x1="{left}" y1="10" x2="{left}" y2="{height - bottom}" '
        f'stroke="#888"/><text x="4" y="18">{top:.0f} km/h</text>'
        f'<text x="4" y="{height - bottom}">0</text>'
        f'<text x="{width - 10}" y="{height - 6}" text-anchor="end">{length:.0f} m</text>'
        f"{stops}{line(wp.recorded_speed_mps, '#999')}{line(wp.velocity_mps, '#1f77b4')}</svg>"
    )


def render_report(
    drive: str, wp: Waypoints, findings: Sequence[Finding], csv_url: str, svg: str
) -> str:
    """The drive's waypoint page: plot, velocity profile, checklist and parameters."""
    status = {(True, True): ("", "ok"), (True, False): ("", "ok")}
    status |= {(False, True): ("bad", "FAILED"), (False, False): ("warn", "warning")}
    rows = "".join(
        f'<tr><td>{esc(f.check)}</td><td class="{status[f.passed, f.error][0]}">'
        f"{status[f.passed, f.error][1]}</td><td>{esc(f.summary)}</td></tr>"
        for f in findings
    )
    params = "".join(
        f'<tr><td>{esc(k)}</td><td class="num">{v:g}</td></tr>'
        for k, v in wp.params.to_dict().items()
    )
    st = wp.stats
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bridge_lake: drive {esc(drive)} waypoints</title><style>{CSS}</style></head>
<body>
<h1>Drive {esc(drive)}: Autoware waypoints</h1>
<p>{len(wp)} waypoints over {wp.length_m:.1f} m ({wp.spacing_m:.3f} m apart), {len(wp.stops)}
stop(s); from {esc(wp.source)}: {st.get("poses_used", "?")} of {st.get("poses", "?")} poses
after dropping {st.get("trimmed_start_s", 0)} s standing at the start and
{st.get("trimmed_end_s", 0)} s at the end. CSV (x, y, z in the drive's map frame, yaw rad,
velocity km/h, change_flag): <a href="{esc(csv_url)}">{esc(csv_url)}</a></p>
<h2>Path (map frame; colour: velocity; red octagons: stops; dots: change_flag 1)</h2>{svg}
<h2>Velocity along the path (grey recorded, blue waypoints, km/h)</h2>{profile_svg(wp)}
<h2>Checklist</h2>
<table id="checklist"><tr><th>check</th><th>result</th><th>finding</th></tr>{rows}</table>
<h2>Parameters</h2><table id="params">{params}</table>
</body></html>"""


def render_no_route(drive: str, reason: str) -> str:
    """The waypoint page of a drive that has no route to write."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bridge_lake: drive {esc(drive)} waypoints</title><style>{CSS}</style></head>
<body>
<h1>Drive {esc(drive)}: Autoware waypoints</h1>
<p class="warn" id="no-route">No waypoints: {esc(reason)}</p>
</body></html>"""

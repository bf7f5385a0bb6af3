"""The per-drive HTML report of the normalized layer: timeline, rates, gaps, GNSS, clocks,
camera thumbnails and one lidar scan from above.

Self-contained HTML with inline SVG and small JPEG/PNG data URIs (no JavaScript, no plotting
dependency), so it opens from the lake in any browser, offline, and is small enough to keep
beside the tables (the pictures are bounded in number and size, see previews.py).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Mapping, Sequence

import numpy as np

from bridge_lake import clock
from bridge_lake.normalize.previews import (
    COLORMAP,
    LIDAR_SIZE,
    CameraPreview,
    LidarPreview,
    Thumbnail,
    nice_floor,
)
from bridge_lake.normalize.sink import StreamStats
from bridge_lake.report_page import BASE_CSS, esc

WIDTH = 900
ROW = 22
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
MAX_TRACK_POINTS = 2000
UNPUBLISHED = "<p>Not shown: blocking checks failed, so this run published no tables.</p>"
EARTH_RADIUS_M = 6_371_008.8
"""Mean Earth radius: metres per radian for the track's scale bar (0.5 % is plenty)."""

CSS = (
    BASE_CSS
    + """.bad { color: #b00; font-weight: 600; } svg text { font: 11px system-ui, sans-serif; }
.strip { display: flex; gap: 6px; flex-wrap: wrap; align-items: flex-end; }
figure { margin: 0; } figcaption { font-size: 11px; color: #555; }
.camera h3 { font-size: 13px; margin: 12px 0 4px; } #lidar img, #lidar svg { display: block; }
"""
)


def segments(times: np.ndarray, threshold_ns: int | None) -> list[tuple[int, int]]:
    """Covered intervals of a stream: consecutive records closer than the gap threshold."""
    if times.size == 0:
        return []
    t = np.sort(times)
    if threshold_ns is None or t.size < 2:
        return [(int(t[0]), int(t[-1]))]
    cuts = np.flatnonzero(np.diff(t) > threshold_ns)
    starts = np.concatenate([[0], cuts + 1])
    ends = np.concatenate([cuts, [t.size - 1]])
    return [(int(t[a]), int(t[b])) for a, b in zip(starts, ends, strict=True)]


def _timeline(streams: Sequence[StreamStats]) -> str:
    timed = [s for s in streams if s.times]
    if not timed:
        return "<p>No timed streams.</p>"
    t0 = min(int(s.times[0].min()) for s in timed)
    t1 = max(int(s.times[0].max()) for s in timed)
    span = max(t1 - t0, 1)
    label_w, plot_w = 230, WIDTH - 240
    height = ROW * len(timed) + 30
    parts = [f'<svg id="timeline" width="{WIDTH}" height="{height}" role="img">']
    for i, s in enumerate(timed):
        y = 10 + i * ROW
        threshold = s.order.gap_threshold_ns if s.order else None
        name = f"{s.info.table}/{s.info.stream}"
        parts.append(f'<text x="0" y="{y + 13}">{esc(name)}</text>')
        for a, b in segments(s.times[0], threshold):
            x = label_w + (a - t0) / span * plot_w
            w = max((b - a) / span * plot_w, 1.5)
            color = PALETTE[i % len(PALETTE)]
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" fill="{color}"/>')
    axis_y = 10 + len(timed) * ROW + 12
    parts.append(f'<text x="{label_w}" y="{axis_y}">0 s</text>')
    parts.append(f'<text x="{WIDTH - 60}" y="{axis_y}">{span / clock.NS_PER_S:.1f} s</text></svg>')
    return "".join(parts)


def _bars(
    values: list[tuple[str, float, float | None]], unit: str, svg_id: str, *, log: bool = False
) -> str:
    """Horizontal bars (observed) with a tick for the nominal value when there is one; `log`
    scales them logarithmically, so a 1 Hz stream stays visible beside a 10 kHz one."""
    if not values:
        return "<p>None.</p>"

    def scale(v: float) -> float:
        return float(np.log10(1.0 + abs(v))) if log else abs(v)

    top = max(max(scale(v), scale(e or 0)) for _, v, e in values) or 1.0
    label_w, plot_w = 230, WIDTH - 340
    height = ROW * len(values) + 10
    parts = [f'<svg id="{svg_id}" width="{WIDTH}" height="{height}" role="img">']
    for i, (name, v, expected) in enumerate(values):
        y = 5 + i * ROW
        w = scale(v) / top * plot_w
        parts.append(f'<text x="0" y="{y + 13}">{esc(name)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="16" fill="#4e79a7"/>')
        if expected:
            xe = label_w + scale(expected) / top * plot_w
            parts.append(
                f'<line x1="{xe:.1f}" x2="{xe:.1f}" y1="{y - 2}" y2="{y + 18}" '
                'stroke="#e15759" stroke-width="2"/>'
            )
        parts.append(f'<text x="{label_w + plot_w + 8}" y="{y + 13}">{v:.3g} {unit}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _signed_bars(values: list[tuple[str, float]], unit: str, svg_id: str) -> str:
    """Horizontal bars from a zero line: negative values to its left, positive to its right
    (clock drift: a device clock running slow or fast)."""
    if not values:
        return "<p>None.</p>"
    lo = min(0.0, *(v for _, v in values))
    hi = max(0.0, *(v for _, v in values))
    span = (hi - lo) or 1.0
    label_w, plot_w = 230, WIDTH - 340
    zero = label_w + (0.0 - lo) / span * plot_w
    height = ROW * len(values) + 24
    parts = [f'<svg id="{svg_id}" width="{WIDTH}" height="{height}" role="img">']
    for i, (name, v) in enumerate(values):
        y = 5 + i * ROW
        x = label_w + (v - lo) / span * plot_w
        left, w = min(x, zero), max(abs(x - zero), 1.0)
        color = "#e15759" if v < 0 else "#4e79a7"
        parts.append(f'<text x="0" y="{y + 13}">{esc(name)}</text>')
        parts.append(
            f'<rect x="{left:.1f}" y="{y}" width="{w:.1f}" height="16" fill="{color}" '
            f'data-value="{v:.6g}"/>'
        )
        parts.append(f'<text x="{label_w + plot_w + 8}" y="{y + 13}">{v:+.3g} {unit}</text>')
    axis_y = 5 + len(values) * ROW
    parts.append(
        f'<line class="zero" x1="{zero:.1f}" x2="{zero:.1f}" y1="0" y2="{axis_y}" '
        'stroke="#222" stroke-width="1"/>'
        f'<text x="{zero - 3:.1f}" y="{axis_y + 14}">0</text>'
    )
    if lo < 0:
        parts.append(f'<text x="{label_w}" y="{axis_y + 14}">{lo:+.3g}</text>')
    if hi > 0:
        parts.append(f'<text x="{label_w + plot_w - 40}" y="{axis_y + 14}">{hi:+.3g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _scale_bar(x: float, y: float, metres: float, px: float, svg_id: str) -> str:
    """A scale bar of `px` pixels standing for `metres`, left end at (x, y)."""
    label = f"{metres / 1000:g} km" if metres >= 1000 else f"{metres:g} m"
    return (
        f'<g id="{svg_id}" data-metres="{metres:g}" data-px="{px:.2f}">'
        f'<path d="M{x:.1f},{y - 4:.1f}v4h{px:.1f}v-4" fill="none" stroke="#222" '
        f'stroke-width="1.5"/><text x="{x + px + 6:.1f}" y="{y + 1:.1f}">{label}</text></g>'
    )


def _track(lat: np.ndarray, lon: np.ndarray) -> str:
    ok = ~(np.isnan(lat) | np.isnan(lon))
    lat, lon = lat[ok], lon[ok]
    if lat.size < 2:
        return "<p>No GNSS fixes.</p>"
    step = max(1, lat.size // MAX_TRACK_POINTS)
    lat, lon = lat[::step], lon[::step]
    scale_x = np.cos(np.radians(lat.mean()))  # equirectangular: metres-true locally
    x, y = (lon - lon.min()) * scale_x, lat - lat.min()
    extent = max(x.max(), y.max()) or 1.0
    size = 420
    px = 10 + x / extent * (size - 20)
    py = size - 10 - y / extent * (size - 20)
    points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py, strict=True))
    extent_m = np.radians(extent) * EARTH_RADIUS_M  # degrees of latitude (lon scaled) → m
    bar_m = nice_floor(0.3 * extent_m)
    bar = _scale_bar(10, size + 16, bar_m, bar_m / extent_m * (size - 20), "gnss-scale")
    return (
        f'<svg id="gnss-track" width="{size}" height="{size + 24}" role="img">'
        f'<rect x="0.5" y="0.5" width="{size - 1}" height="{size - 1}" fill="none" '
        f'stroke="#ddd"/><polyline points="{points}" fill="none" '
        f'stroke="#4e79a7" stroke-width="2"/>{bar}</svg>'
        f"<p>{lat.size * step} fixes, lat {lat.min():.6f}…{lat.max():.6f}°, "
        f"lon {lon.min():.6f}…{lon.max():.6f}°</p>"
    )


def _data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _thumb(t: Thumbnail, t0: int | None) -> str:
    rel = f"{(t.time_ns - t0) / clock.NS_PER_S:+.1f} s" if t0 is not None else ""
    if t.jpeg is None:
        return (
            f'<figure class="undecoded"><div>not decoded: {esc(t.problem)}</div>'
            f"<figcaption>{rel}</figcaption></figure>"
        )
    return (
        f'<figure><img class="thumb" src="{_data_uri("image/jpeg", t.jpeg)}" '
        f'width="{t.width}" height="{t.height}" alt="{esc(t.camera)} {rel}" '
        f'title="{_utc(t.time_ns)}"><figcaption>{rel}</figcaption></figure>'
    )


def _cameras(preview: CameraPreview | None, t0: int | None) -> str:
    if preview is None or not preview.cameras:
        return '<p id="cameras">No camera frames.</p>'
    by_camera: dict[str, list[Thumbnail]] = {}
    for t in preview.thumbnails:
        by_camera.setdefault(t.camera, []).append(t)
    blocks = [
        f'<div class="camera"><h3>{esc(c)}</h3><div class="strip">'
        + "".join(_thumb(t, t0) for t in thumbs)
        + "</div></div>"
        for c, thumbs in by_camera.items()
    ]
    left = [c for c in preview.cameras if c not in by_camera]
    note = f"<p>No thumbnails for: {esc(', '.join(left))}.</p>" if left else ""
    return (
        f'<div id="cameras">{"".join(blocks)}</div>{note}'
        f"<p>{len(preview.thumbnails)} frames of {len(preview.cameras)} cameras, upright, "
        f"time from the drive's start; {preview.bytes_read / 1e6:.1f} MB of frames read.</p>"
    )


def _metres(v: float) -> str:
    """One decimal, never "-0.0"."""
    return f"{round(v, 1) + 0.0:.1f} m"


def _lidar(preview: LidarPreview | None, t0: int | None) -> str:
    if preview is None:
        return '<p id="lidar">No lidar scans.</p>'
    px_per_m = (LIDAR_SIZE - 2) / (2 * preview.half_extent_m)
    bar_m = nice_floor(0.5 * preview.half_extent_m)
    stops = "".join(
        f'<stop offset="{i / (len(COLORMAP) - 1):.2f}" stop-color="rgb({r:.0f},{g:.0f},{b:.0f})"/>'
        for i, (r, g, b) in enumerate(COLORMAP)
    )
    legend = (
        f'<svg id="lidar-legend" width="{LIDAR_SIZE}" height="46" role="img">'
        f'<defs><linearGradient id="height-colours">{stops}</linearGradient></defs>'
        f"{_scale_bar(4, 16, bar_m, bar_m * px_per_m, 'lidar-scale')}"
        f'<rect x="4" y="26" width="{LIDAR_SIZE - 8}" height="8" fill="url(#height-colours)"/>'
        f'<text x="4" y="45">z {_metres(preview.z_low_m)}</text>'
        f'<text x="{LIDAR_SIZE - 70}" y="45">z {_metres(preview.z_high_m)}</text></svg>'
    )
    rel = f" ({(preview.time_ns - t0) / clock.NS_PER_S:+.1f} s)" if t0 is not None else ""
    return (
        f'<figure id="lidar"><img id="lidar-preview" '
        f'src="{_data_uri("image/png", preview.png)}" width="{LIDAR_SIZE}" '
        f'height="{LIDAR_SIZE}" alt="lidar scan {preview.scan_id} from above">{legend}'
        f"<figcaption>{esc(preview.stream)} scan {preview.scan_id} at "
        f"{_utc(preview.time_ns)}{rel}: {preview.points:,} points, {preview.shown:,} inside "
        f"±{preview.half_extent_m:g} m; in {esc(preview.frame)}, x up, y to the left, the "
        f"red cross at the origin; colour: height z, low dark blue to high yellow."
        f"</figcaption></figure>"
    )


def _utc(ns: int | None) -> str:
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _reason(finding: object) -> str:
    """Why a check failed, in one line: its summary, else its figures."""
    summary = getattr(finding, "summary", "")
    if summary:
        return summary
    meta = getattr(finding, "metadata", {}) or {}
    figures = {k: v for k, v in meta.items() if v not in (None, {}, [], 0)}
    return json.dumps(figures, default=str)[:400]


def render_report(
    drive_id: str,
    streams: Sequence[StreamStats],
    *,
    lat_deg: np.ndarray,
    lon_deg: np.ndarray,
    findings: Sequence[object] = (),
    meta: Mapping[str, object] | None = None,
    files: Sequence[Mapping[str, object]] = (),
    quarantine_reasons: Mapping[str, int] | None = None,
    cameras: CameraPreview | None = None,
    lidar: LidarPreview | None = None,
    published: bool = True,
) -> str:
    """The report as one HTML document (UTF-8). `meta` is the drive's drive.yaml facts,
    `files` its raw manifest rows (path, size_bytes, format), `quarantine_reasons` the
    quarantined records counted by reason, `cameras` and `lidar` the pictures read back
    from the published partitions (previews.py); without `published` (blocking checks
    rejected the drive) the lake holds no pictures of this run to show."""
    rows = []
    order = {"mapped": 0, "generic": 1, "payload": 2, "quarantine": 3, "skipped": 4}
    for s in sorted(streams, key=lambda s: (order[s.info.target], s.info.table, s.info.stream)):
        o = s.order
        cls = "" if s.conserved else ' class="bad"'
        rows.append(
            f"<tr><td>{esc(s.info.target)}</td><td>{esc(s.info.table)}</td>"
            f"<td>{esc(s.info.stream)}</td><td>{esc(s.info.mapping or s.info.skipped or '')}</td>"
            f'<td class="num">{s.records_read}</td><td class="num">{s.rows_written}</td>'
            f'<td class="num">{s.records_joined}</td>'
            f'<td class="num"{cls}>{s.rows_quarantined}</td>'
            f'<td class="num">{(s.mean_rate_hz or 0):.2f}</td>'
            f'<td class="num">{o.gaps if o else ""}</td>'
            f'<td class="num">{(o.longest_gap_ns / 1e9 if o else 0):.3f}</td>'
            f'<td class="num">{s.reordered}</td>'
            f'<td class="num">{f"{s.fit.drift_ppm:.2f}" if s.fit else ""}</td></tr>'
        )
    failed = [f for f in findings if not getattr(f, "passed", True)]
    checks = (
        "".join(
            f'<li class="bad">{esc(f.table)}: {esc(f.check)}'
            f"{'' if getattr(f, 'error', True) else ' (warning)'}: {esc(_reason(f))}</li>"
            for f in failed
        )
        or "<li>all checks passed</li>"
    )
    rates = [
        (f"{s.info.table}/{s.info.stream}", s.mean_rate_hz, s.info.expected_rate_hz)
        for s in streams
        if s.mean_rate_hz
    ]
    drift = [(f"{s.info.table}/{s.info.stream}", s.fit.drift_ppm) for s in streams if s.fit]
    firsts = [s.first_time_ns for s in streams if s.first_time_ns is not None]
    lasts = [s.last_time_ns for s in streams if s.last_time_ns is not None]
    t0 = min(firsts) if firsts else None
    facts = {k: v for k, v in (meta or {}).items() if v not in (None, "", [], ())}
    facts_html = "".join(
        f"<tr><th>{esc(k)}</th><td>{esc(', '.join(v) if isinstance(v, list) else v)}</td></tr>"
        for k, v in facts.items()
    )
    facts_html += (
        f"<tr><th>start (UTC)</th><td>{_utc(min(firsts) if firsts else None)}</td></tr>"
        f"<tr><th>end (UTC)</th><td>{_utc(max(lasts) if lasts else None)}</td></tr>"
    )
    file_rows = "".join(
        f'<tr><td>{esc(f.get("path"))}</td><td class="num">{int(f.get("size_bytes") or 0):,}'
        f"</td><td>{esc(f.get('format'))}</td><td>{esc(f.get('problem') or '')}</td></tr>"
        for f in files
    )
    clocks = {
        (s.info.source_file, s.info.recording_offset_ns, s.info.recording_clock)
        for s in streams
        if s.info.recording_clock
    }
    clock_rows = "".join(
        f'<tr><td>{esc(f)}</td><td class="num">{o / 1e9:.6f}</td><td>{esc(m)}</td></tr>'
        for f, o, m in sorted(clocks, key=lambda c: c[0])
    )
    reasons = "".join(
        f'<tr><td>{esc(r)}</td><td class="num">{n}</td></tr>'
        for r, n in sorted((quarantine_reasons or {}).items(), key=lambda x: -x[1])
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bridge_lake: drive {esc(drive_id)}</title><style>{CSS}</style></head>
<body>
<h1>Drive {esc(drive_id)}: normalized layer</h1>
<table id="facts">{facts_html}</table>
<h2>Checks that did not pass</h2><ul id="checks">{checks}</ul>
<h2>Stream timeline</h2>{_timeline(streams)}
<h2>Rates (log scale; bar: observed, red tick: nominal)</h2>{_bars(rates, "Hz", "rates", log=True)}
<h2>Streams</h2>
<p>Target: <b>mapped</b> = a sensor table through a mapping rule, <b>generic</b> = every DDL
element in a <code>ddl_&lt;struct&gt;</code> table, <b>payload</b> = the bytes in
<code>adtf_payloads</code> (no DDL), <b>quarantine</b> = nothing could be read. Map a stream
with <code>bridge-lake mapping suggest FILE.dat</code>.</p>
<table id="streams"><tr><th>target</th><th>table</th><th>stream</th><th>how</th>
<th>read</th><th>written</th><th>joined</th>
<th>quarantined</th><th>rate Hz</th><th>gaps</th><th>longest gap s</th><th>reordered</th>
<th>drift ppm</th></tr>{"".join(rows)}</table>
<h2>Recordings on the master clock</h2>
<table id="recordings"><tr><th>recording</th><th>offset s</th><th>how</th></tr>{
        clock_rows or '<tr><td colspan="3">times as recorded</td></tr>'
    }</table>
<h2>Quarantine by reason</h2>
<table id="quarantine"><tr><th>reason</th><th>records</th></tr>{
        reasons or '<tr><td colspan="2">nothing quarantined</td></tr>'
    }</table>
<h2>GNSS track</h2>{_track(lat_deg, lon_deg)}
<h2>Cameras</h2>{_cameras(cameras, t0) if published else UNPUBLISHED}
<h2>Lidar: one scan from above</h2>{_lidar(lidar, t0) if published else UNPUBLISHED}
<h2>Device clock drift against the master clock (+: the device clock runs slow, -: fast)</h2>
{_signed_bars(drift, "ppm", "drift")}
<h2>Files</h2>
<table id="files"><tr><th>file</th><th>bytes</th><th>format</th><th>problem</th></tr>
{file_rows}</table>
</body></html>
"""

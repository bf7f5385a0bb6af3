"""What the HTML reports share: the base style sheet, escaping and timeline bars.

The normalized, calibrated and waypoint pages are written by their own layers; they all
start from BASE_CSS so the pages look alike, and add their own rules after it."""

from __future__ import annotations

import html

import numpy as np

BASE_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; } td, th { padding: 3px 8px; border-bottom: 1px solid #ddd; }
th { text-align: left; background: #f4f4f4; } td.num { text-align: right; }
"""


def esc(value: object) -> str:
    """Any value as HTML text, quotes included (safe inside attribute values)."""
    return html.escape(str(value), quote=True)


def density_bars(
    times: np.ndarray,
    t0: int,
    span: int,
    x0: float,
    y: float,
    width: float,
    bins: int,
    height: float,
    style: str = "",
) -> list[str]:
    """A timeline row's message density: `bins` SVG bars from x0 over `width` for
    [t0, t0 + span), each 4 px plus up to `height` px by its count (empty bins drawn not)."""
    counts, _ = np.histogram(times, bins=bins, range=(t0, t0 + span))
    top, w = max(int(counts.max()), 1), width / bins
    bars = []
    for k, c in enumerate(counts.tolist()):
        if c:
            h = 4 + height * c / top
            bars.append(
                f'<rect x="{x0 + k * w:.1f}" y="{y + 20 - h:.1f}" width="{w:.1f}" '
                f'height="{h:.1f}" fill="#4e79a7"{style}/>'
            )
    return bars

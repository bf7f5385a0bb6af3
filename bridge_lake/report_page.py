"""What the per-drive HTML reports share: the base style sheet and escaping.

The normalized, calibrated and waypoint pages are written by their own layers; they all
start from BASE_CSS so the pages look alike, and add their own rules after it."""

from __future__ import annotations

import html

BASE_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; } td, th { padding: 3px 8px; border-bottom: 1px solid #ddd; }
th { text-align: left; background: #f4f4f4; } td.num { text-align: right; }
"""


def esc(value: object) -> str:
    """Any value as HTML text, quotes included (safe inside attribute values)."""
    return html.escape(str(value), quote=True)

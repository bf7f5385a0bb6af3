"""Benchmark figures as machine-readable lines, for run_all.py's one table.

A benchmark prints its own report as before and, for each headline figure, one line

    BENCH-FIGURE {"figure": ..., "ours": ..., "baseline": ..., "unit": ..., "ratio": ...}

where `ratio` says how many times better ours is than the baseline it was measured beside
(ours / baseline when more is better, baseline / ours when less is), and `peak_rss_mb` is
the peak RSS of the process that produced `ours`, when the benchmark measured it apart.
"""

from __future__ import annotations

import json
import math

PREFIX = "BENCH-FIGURE "


def figure(
    name: str,
    ours: float,
    baseline: float | None,
    unit: str,
    *,
    more_is_better: bool = True,
    baseline_name: str = "",
    peak_rss_mb: float | None = None,
) -> None:
    """Print one figure line (see the module docstring); `baseline` None: no baseline."""
    ratio = None
    if baseline is not None and ours > 0 and baseline > 0:
        ratio = ours / baseline if more_is_better else baseline / ours
    row = {
        "figure": name,
        "ours": _num(ours),
        "baseline": _num(baseline),
        "baseline_name": baseline_name,
        "unit": unit,
        "ratio": _num(ratio),
        "peak_rss_mb": _num(peak_rss_mb),
    }
    print(PREFIX + json.dumps(row), flush=True)


def _num(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


def parse(text: str) -> list[dict]:
    """The figure lines of a benchmark's output, in order."""
    return [json.loads(ln[len(PREFIX) :]) for ln in text.splitlines() if ln.startswith(PREFIX)]

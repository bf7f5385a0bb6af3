"""The replay check's report as a terminal table, a JSON document and an HTML timeline
(`bridge-lake replay-check`); the check itself is scenes/replay.py."""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path

from bridge_lake.report_page import density_bars
from bridge_lake.scenes.replay import LEVELS, MAX_FINDINGS_LISTED, Finding, ReplayReport


def render_table(r: ReplayReport) -> str:
    lines = [
        f"replay-check {r.path}",
        f"  manifest {r.manifest} (variant {r.variant}); source: {r.reference}",
    ]
    for level in LEVELS:
        checks = [c for c in r.checks if c.level == level]
        status = "PASS" if r.level_ok(level) else "FAIL"
        lines.append(f"  {level:8} {status}")
        for c in checks:
            mark = "ok  " if c.ok and not c.warning else "WARN" if c.ok else "FAIL"
            lines.append(f"    {mark} {c.name:14} {c.detail}")
    lines.append(
        f"  {'topic':40} {'msgs':>7} {'manif.':>7} {'dec.err':>7} {'st.back':>7} {'gaps':>5} "
        f"{'faults':>9} {'unexp.':>6}"
    )
    for name in sorted(r.topics):
        t = r.topics[name]
        lines.append(
            f"  {name:40} {t.messages:7d} {'' if t.expected is None else t.expected:>7} "
            f"{t.decode_errors:7d} {t.stamps_backwards:7d} {t.gaps:5d} "
            f"{f'{t.found}/{t.listed}':>9} {t.unexpected:6d}"
        )
    bad = [f for f in r.findings if f.status != "found"]
    for f in bad[:20]:
        lines.append(
            f"  {f.status.upper()}: {f.kind} on {f.topic} #{f.index} "
            f"(source {f.orig_ns}, expected {f.expected_ns}, observed {f.observed_ns}) {f.detail}"
        )
    if len(bad) > 20:
        lines.append(f"  ... {len(bad) - 20} more")
    lines.append(f"  RESULT: {'PASS' if r.ok else 'FAIL'}")
    return "\n".join(lines)


COLORS = {"found": "#59a14f", "not found": "#f28e2b", "unexpected": "#e15759"}


def render_html(r: ReplayReport, bins: int = 200) -> str:
    """The levels, a timeline per topic (message density, faults marked by status) and the
    findings."""
    t0, t1 = r.window
    for times in r.times.values():
        if len(times):
            t0, t1 = min(t0, int(times.min())), max(t1, int(times.max()))
    span = max(t1 - t0, 1)
    width, label, row = 1000, 280, 26
    topics = sorted(r.times)
    svg = [f'<svg id="timeline" width="{width}" height="{row * len(topics) + 30}">']
    by_topic: dict[str, list[Finding]] = defaultdict(list)
    for f in r.findings:
        by_topic[f.topic].append(f)
    scale = (width - label) / span
    for i, topic in enumerate(topics):
        y = 5 + i * row
        times = r.times[topic]
        svg.append(f'<text x="0" y="{y + 15}">{html.escape(topic)}</text>')
        if len(times):
            svg += density_bars(
                times, t0, span, label, y, width - label, bins, 14, ' opacity="0.6"'
            )
        for f in by_topic.get(topic, [])[:MAX_FINDINGS_LISTED]:
            at = f.observed_ns if f.observed_ns is not None else f.orig_ns
            if at is None:
                continue
            x = label + (at - t0) * scale
            svg.append(
                f'<circle class="fault {f.status.replace(" ", "-")}" cx="{x:.1f}" cy="{y + 12}" '
                f'r="3.5" fill="{COLORS[f.status]}"><title>{html.escape(f.kind)} #{f.index}: '
                f"{html.escape(f.status)} {html.escape(f.detail)}</title></circle>"
            )
    svg.append(f'<text x="{label}" y="{row * len(topics) + 25}">0 s</text>')
    svg.append(
        f'<text x="{width - 60}" y="{row * len(topics) + 25}">{span / 1e9:.2f} s</text></svg>'
    )
    checks = "".join(
        f'<tr><td>{c.level}</td><td>{html.escape(c.name)}</td><td class="'
        f'{"ok" if c.ok and not c.warning else "warn" if c.ok else "bad"}">'
        f"{'pass' if c.ok else 'FAIL'}</td><td>{html.escape(c.detail)}</td></tr>"
        for c in r.checks
    )
    topic_rows = "".join(
        f"<tr><td>{html.escape(t.topic)}</td><td>{html.escape(t.type)}</td>"
        f'<td class="num">{t.messages}</td><td class="num">{t.expected}</td>'
        f'<td class="num">{t.decode_errors}</td><td class="num">{t.stamps_backwards}</td>'
        f'<td class="num">{t.gaps}</td><td class="num">{t.found}/{t.listed}</td>'
        f'<td class="num">{t.unexpected}</td></tr>'
        for t in sorted(r.topics.values(), key=lambda t: t.topic)
    )
    finding_rows = "".join(
        f'<tr class="{f.status.replace(" ", "-")}"><td>{f.status}</td><td>{f.kind}</td>'
        f"<td>{html.escape(f.topic)}</td><td>{f.index}</td><td>{f.orig_ns}</td>"
        f"<td>{f.expected_ns}</td><td>{f.observed_ns}</td><td>{html.escape(f.detail)}</td></tr>"
        for f in r.findings[:MAX_FINDINGS_LISTED]
    )
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>replay-check: {html.escape(Path(r.path).name)}</title><style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; }} .bad {{ color: #b00; }}
.warn {{ color: #b60; }} .ok {{ color: #070; }}
td, th {{ padding: 2px 8px; border-bottom: 1px solid #ddd; }} td.num {{ text-align: right; }}
svg text {{ font: 11px system-ui, sans-serif; }}</style></head><body>
<h1>{html.escape(Path(r.path).name)}: {"PASS" if r.ok else "FAIL"}</h1>
<p>variant {html.escape(r.variant)}; manifest {html.escape(r.manifest)};
source {html.escape(r.reference)}. Faults: {r.count("found")} found, {r.count("not found")}
not found, {r.count("unexpected")} unexpected.</p>
<h2>Levels</h2><table id="checks"><tr><th>level</th><th>check</th><th>result</th>
<th>detail</th></tr>{checks}</table>
<h2>Timeline (bars: messages per time bin; dots: faults — green found, orange listed but not
found, red unexpected)</h2>{"".join(svg)}
<h2>Topics</h2><table id="topics"><tr><th>topic</th><th>type</th><th>messages</th>
<th>manifest</th><th>decode errors</th><th>stamps back</th><th>gaps</th><th>faults found</th>
<th>unexpected</th></tr>{topic_rows}</table>
<h2>Faults</h2><table id="findings"><tr><th>status</th><th>kind</th><th>topic</th>
<th>index</th><th>source ns</th><th>expected ns</th><th>observed ns</th><th>detail</th></tr>
{finding_rows}</table></body></html>
"""


def render_json(r: ReplayReport) -> str:
    return json.dumps(r.to_json(), indent=2)


__all__ = ["render_html", "render_json", "render_table"]

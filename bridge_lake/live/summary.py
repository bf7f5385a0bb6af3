"""What a live session did: messages per topic, lag, the catalog's differences, every loss.

Memory stays flat in the session's length: lags go into a fixed histogram (0.5 % wide
log bins), not a list.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from bridge_lake.live.sink import LiveSink

_LAG_BINS = np.geomspace(1e3, 1e11, 3700)
"""Bin edges in ns, 1 µs to 100 s, ~0.5 % apart."""


class LagHistogram:
    """Quantiles of a stream of durations in bounded memory (0.5 % resolution)."""

    def __init__(self) -> None:
        self.counts = np.zeros(len(_LAG_BINS) + 1, np.int64)
        self.n = 0
        self.max_ns = 0

    def append(self, ns: int) -> None:
        self.counts[int(np.searchsorted(_LAG_BINS, ns))] += 1
        self.n += 1
        self.max_ns = max(self.max_ns, int(ns))

    def quantile(self, q: float) -> float | None:
        """The q-quantile in ns (upper edge of its bin), None without data."""
        if not self.n:
            return None
        k = int(np.searchsorted(np.cumsum(self.counts), math.ceil(q * self.n)))
        return float(_LAG_BINS[min(k, len(_LAG_BINS) - 1)])


@dataclass
class TopicCount:
    type: str
    messages: int = 0


@dataclass
class LiveSummary:
    path: str
    parts: list[str] = field(default_factory=list)
    end: str = ""
    clock: str = ""
    samples: int = 0
    chunks: int = 0
    bytes: int = 0
    triggers: int = 0
    type_changes: int = 0
    restarts: int = 0
    topics: dict[str, TopicCount] = field(default_factory=dict)
    lag_ns: LagHistogram = field(default_factory=LagHistogram)
    """per poll: from the start of the poll that saw the bytes to the last message sent"""
    differences: list[str] = field(default_factory=list)
    quarantine: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    provisional: set[str] = field(default_factory=set)
    topics_offline_only: dict[str, str] = field(default_factory=dict)
    unpublished: dict[str, int] = field(default_factory=dict)
    streams: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, topic: str, typename: str, n: int) -> None:
        self.topics.setdefault(topic, TopicCount(typename)).messages += n

    def account(self, sink: LiveSink) -> None:
        """Per stream: records read = rows written + quarantined (and why)."""
        for (stream, table), s in sink.streams.items():
            self.streams[f"{stream} -> {table}"] = {
                "read": s.read,
                "written": s.written,
                "quarantined": s.quarantined,
            }
            for reason, n in s.reasons.items():
                self.quarantine.append(f"{stream}: {n} x {reason}")

    @property
    def messages(self) -> int:
        return sum(t.messages for t in self.topics.values())

    @property
    def lost(self) -> bool:
        """Something did not reach a topic: quarantine, unpublished rows."""
        return bool(self.quarantine or self.unpublished)

    def lag(self) -> dict[str, float | None]:
        ms = {q: self.lag_ns.quantile(q) for q in (0.5, 0.99)}
        return {
            "p50_ms": None if ms[0.5] is None else ms[0.5] / 1e6,
            "p99_ms": None if ms[0.99] is None else ms[0.99] / 1e6,
            "max_ms": self.lag_ns.max_ns / 1e6 if self.lag_ns.n else None,
        }

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "parts": self.parts,
            "end": self.end,
            "clock": self.clock,
            "samples": self.samples,
            "chunks": self.chunks,
            "bytes": self.bytes,
            "triggers": self.triggers,
            "type_changes": self.type_changes,
            "restarts": self.restarts,
            "messages": self.messages,
            "topics": {k: {"type": v.type, "messages": v.messages} for k, v in self.topics.items()},
            "lag": self.lag(),
            "catalog_differences": self.differences,
            "provisional_names": sorted(self.provisional),
            "quarantine": self.quarantine,
            "unpublished": self.unpublished,
            "offline_only_topics": self.topics_offline_only,
            "streams": self.streams,
            "notices": self.notices,
            "warnings": self.warnings,
        }

    def metadata(self) -> dict[str, str]:
        """For the live MCAP's `bridge_lake.live` metadata record."""
        return {"path": self.path, "parts": json.dumps(self.parts), "end": self.end}

    def render(self) -> str:
        lines = [f"live: {self.path}: {self.end}"]
        if len(self.parts) > 1:
            lines.append(f"  parts: {len(self.parts)} ({', '.join(self.parts)})")
        lines.append(
            f"  {self.chunks} chunks, {self.bytes / 1e6:.1f} MB, {self.samples} samples, "
            f"{self.triggers} triggers -> {self.messages} messages; clock: {self.clock or '-'}"
        )
        lag = self.lag()
        if lag["p50_ms"] is not None:
            lines.append(
                f"  lag (bytes seen -> sent): p50 {lag['p50_ms']:.2f} ms, "
                f"p99 {lag['p99_ms']:.2f} ms, max {lag['max_ms']:.2f} ms"
            )
        width = max([len(t) for t in self.topics] + [5])
        lines.append(f"  {'topic':<{width}}  {'messages':>9}  type")
        for topic in sorted(self.topics):
            t = self.topics[topic]
            lines.append(f"  {topic:<{width}}  {t.messages:>9}  {t.type}")
        for title, items in (
            ("restarts (file rewritten)", [str(self.restarts)] if self.restarts else []),
            ("provisional stream names", sorted(self.provisional)),
            ("catalog differences at close", self.differences),
            ("quarantined", self.quarantine),
            ("rows not published", [f"{k}: {v}" for k, v in self.unpublished.items()]),
            ("topics not live", [f"{k}: {v}" for k, v in self.topics_offline_only.items()]),
            ("warnings", self.warnings),
            ("notices", self.notices),
        ):
            if items:
                lines.append(f"  {title}:")
                lines += [f"    {x}" for x in items]
        return "\n".join(lines)


__all__ = ["LagHistogram", "LiveSummary"]

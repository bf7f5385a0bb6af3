"""What a playback measured: per topic send errors, bytes, late messages; CPU and memory.

Send error = the time a message was handed to the server minus its scheduled time (ns on
`perf_counter_ns`). Kept per topic as int64 in `array`s (8 bytes a message), summarized at
the end as p50/p99/max of |error| and the messages later than LATE_NS.
"""

from __future__ import annotations

import json
import os
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

LATE_NS = 1_000_000
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class TopicStats:
    messages: int = 0
    bytes: int = 0
    errors: array = field(default_factory=lambda: array("q"))

    def summary(self) -> dict[str, Any]:
        e = np.abs(np.frombuffer(self.errors, np.int64)) if len(self.errors) else None
        return {
            "messages": self.messages,
            "bytes": self.bytes,
            "send_error_p50_us": _us(np.percentile(e, 50)) if e is not None else None,
            "send_error_p99_us": _us(np.percentile(e, 99)) if e is not None else None,
            "send_error_max_us": _us(e.max()) if e is not None else None,
            "late_over_1ms": int((e > LATE_NS).sum()) if e is not None else 0,
        }


def _us(ns: float) -> float:
    return round(float(ns) / 1000, 1)


def rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


@dataclass
class PlayReport:
    source: str
    rate: float | None
    """None: --max-speed"""
    topics: dict[str, TopicStats] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    faults_planned: int = 0
    seeks: int = 0
    loops: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    """--ros1: per topic, messages a subscriber that fell behind did not get"""
    outcome: str = "ended"
    """ended | interrupted | stopped (a ROS node asked) | error"""
    error: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    rss_min: int | None = None
    rss_max: int | None = None
    _t0: float = 0.0
    _c0: float = 0.0

    def started(self) -> None:
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        self.sample_rss()

    def finished(self) -> None:
        if self._t0 and not self.wall_s:
            self.wall_s = time.perf_counter() - self._t0
            self.cpu_s = time.process_time() - self._c0
            self.sample_rss()

    def sample_rss(self) -> None:
        r = rss_bytes()
        self.rss_min = r if self.rss_min is None else min(self.rss_min, r)
        self.rss_max = r if self.rss_max is None else max(self.rss_max, r)

    def topic(self, name: str) -> TopicStats:
        t = self.topics.get(name)
        if t is None:
            t = self.topics[name] = TopicStats()
        return t

    def to_json(self) -> dict[str, Any]:
        every = array("q")
        for t in self.topics.values():
            every.extend(t.errors)
        total = TopicStats(
            sum(t.messages for t in self.topics.values()),
            sum(t.bytes for t in self.topics.values()),
            every,
        )
        return {
            "source": self.source,
            "rate": self.rate,
            "outcome": self.outcome,
            "error": self.error,
            "wall_s": round(self.wall_s, 3),
            "cpu_percent_of_one_core": round(100 * self.cpu_s / self.wall_s, 1)
            if self.wall_s
            else None,
            "rss_min_mb": _mb(self.rss_min),
            "rss_max_mb": _mb(self.rss_max),
            "rss_jitter_mb": _mb((self.rss_max or 0) - (self.rss_min or 0)),
            "seeks": self.seeks,
            "loops": self.loops,
            "dropped": dict(sorted(self.dropped.items())),
            "total": total.summary(),
            "topics": {k: v.summary() for k, v in sorted(self.topics.items())},
            "faults_planned": self.faults_planned,
            "faults_injected": len(self.faults),
            "faults": self.faults,
        }

    def write(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")

    def table(self) -> str:
        """The summary printed at the end of every run."""
        d = self.to_json()
        head = (
            f"{'topic':<40} {'msgs':>8} {'MB':>9} {'p50 µs':>8} {'p99 µs':>8} "
            f"{'max µs':>9} {'>1ms':>6}"
        )
        lines = [head, "-" * len(head)]
        rows = [*d["topics"].items(), ("total", d["total"])]
        for name, s in rows:
            lines.append(
                f"{name[:40]:<40} {s['messages']:>8} {s['bytes'] / 1e6:>9.2f} "
                f"{_f(s['send_error_p50_us']):>8} {_f(s['send_error_p99_us']):>8} "
                f"{_f(s['send_error_max_us']):>9} {s['late_over_1ms']:>6}"
            )
        rate = "max speed" if self.rate is None else f"{self.rate:g}x"
        lines.append(
            f"{self.outcome} after {d['wall_s']:.1f} s at {rate}: "
            f"CPU {_f(d['cpu_percent_of_one_core'])} % of one core, "
            f"RSS {_f(d['rss_min_mb'])}-{_f(d['rss_max_mb'])} MB "
            f"(jitter {_f(d['rss_jitter_mb'])} MB), {self.seeks} seeks"
            + (f", {len(self.faults)} faults injected" if self.faults_planned else "")
        )
        for topic, n in sorted(self.dropped.items()):
            lines.append(f"{topic}: {n} messages dropped for a subscriber that fell behind")
        if self.error and self.outcome == "stopped":  # an error's line is the CLI's own
            lines.append(f"stopped: {self.error}")
        return "\n".join(lines)

    def sent(self) -> int:
        """Messages sent so far, on every topic."""
        return sum(t.messages for t in self.topics.values())


def _mb(n: int | None) -> float | None:
    return None if n is None else round(n / 1e6, 1)


def _f(v: float | None) -> str:
    """A measured value for the table: `-` when there is none, never in exponent form."""
    return "-" if v is None else f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}"

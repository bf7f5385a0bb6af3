"""Progress lines for long steps: count, MB, rate and ETA, at most every few seconds.

A Dagster step that reads a 20 GB drive must never look hung in the run log, and a log line
per batch would drown it; `Progress` keeps the figures and emits one line per interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable

INTERVAL_S = 5.0


class Progress:
    """Call `update(count, nbytes)` with running totals; a line goes to `emit` at most every
    `interval_s` (and at `done()`)."""

    def __init__(
        self,
        what: str,
        emit: Callable[[str], None],
        *,
        total: int | None = None,
        unit: str = "rows",
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.what, self.emit, self.total, self.unit = what, emit, total, unit
        self.interval_s = interval_s
        self.start = self.last = time.monotonic()
        self.count = self.nbytes = 0

    def update(self, count: int, nbytes: int = 0) -> None:
        self.count, self.nbytes = count, nbytes
        now = time.monotonic()
        if now - self.last >= self.interval_s:
            self.last = now
            self.emit(self.line(now))

    def done(self) -> None:
        self.emit(self.line(time.monotonic(), final=True))

    def line(self, now: float, *, final: bool = False) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.count / elapsed
        text = (
            f"{self.what}: {self.count:,} {self.unit}"
            + (f" of {self.total:,}" if self.total else "")
            + f", {self.nbytes / 1e6:,.1f} MB, {rate:,.0f} {self.unit}/s, {elapsed:.0f} s"
        )
        if self.total and not final and rate > 0:
            text += f", ETA {max(self.total - self.count, 0) / rate:.0f} s"
        return text + (" (done)" if final else "")

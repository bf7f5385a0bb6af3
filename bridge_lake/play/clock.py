"""The playback clock: absolute deadlines on a monotonic clock, slept coarsely, spun finely.

A message logged at `t` is due at `anchor_mono + (t - anchor_log) / rate` on
`time.perf_counter_ns()`. Deadlines are absolute, so an early or late wake never adds up over
a drive; pause, seek and a new rate re-anchor (`anchor`).

The player gets to a deadline in three steps, each cheaper than spinning:
1. `approach`: an `asyncio` sleep (the event loop serves clients meanwhile) to about 1.5 ms
   before: epoll wakes in whole milliseconds, so the sleep is rounded down to them;
then the player prepares what it will hand over, and `arrive` does
2. a blocking `time.sleep` (nanosecond clock_nanosleep) to SPIN_NS before;
3. a spin on `perf_counter_ns` for the rest.
A read-ahead thread may run only during step 1 and the first part of step 2 (`gate`, closed
GATE_GUARD_NS before the spin): a Python thread holding the GIL when the pacer wakes delays it
by up to the switch interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable

COARSE_GUARD_NS = 1_500_000
"""The asyncio sleep ends at least this long before the deadline (epoll: 1 ms granularity)."""
SPIN_NS = 60_000
"""The last stretch spun rather than slept: with a 1 µs timer slack (`precise_sleeps`) a
nanosleep wakes a median 27 µs, p90 47 µs late on these VMs (77 / 104 µs at the default
50 µs slack)."""
GATE_GUARD_NS = 300_000
"""`arrive` lets the read-ahead thread run in its sleep until this long before the spin: a
reader holding the GIL gives it up within the switch interval (player.SWITCH_INTERVAL_S) and
parks at its gate within one message's work."""
TOGETHER_NS = 20_000
"""Messages due within this of the first of a group are handed over with it, at the middle
of the group's span: handing a group to a local client costs a median 16-20 µs (one
loopback send(), measured in the player), so of two groups closer than that the second
would be late by the rest of the first's hand-over anyway."""


def next_group(deadlines: list[int], i: int) -> tuple[int, int]:
    """The group that starts at `i`: the end of it (the messages due within TOGETHER_NS of
    its first) and when to hand it over (the middle of its span)."""
    first, j, n = deadlines[i], i + 1, len(deadlines)
    while j < n and deadlines[j] - first <= TOGETHER_NS:
        j += 1
    return j, first + (deadlines[j - 1] - first) // 2


class Waker:
    """An interruptible asyncio sleep cheaper than `wait_for(event.wait(), t)` (no task per
    wait): `sleep(s)` returns after `s` seconds or at once when `wake()` is called."""

    def __init__(self) -> None:
        self.woken = False
        self._future: asyncio.Future | None = None

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self._future = loop.create_future()
        handle = loop.call_later(seconds, _settle, self._future)
        try:
            await self._future
        finally:
            handle.cancel()
            self._future = None

    def wake(self) -> None:
        self.woken = True
        if self._future is not None:
            _settle(self._future)

    def clear(self) -> None:
        self.woken = False

    def is_set(self) -> bool:
        return self.woken


def _settle(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def precise_sleeps() -> None:
    """Linux: a 1 µs timer slack for this thread (default 50 µs), so nanosleeps wake on
    time; elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


def realtime_priority(priority: int = 10) -> str | None:
    """SCHED_FIFO for the calling thread (needs root or CAP_SYS_NICE): on a loaded machine
    the scheduler then runs the player as soon as it wakes. None, or why it was refused."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:
        return str(getattr(exc, "strerror", None) or exc)
    return None


def normal_priority() -> None:
    """Back to SCHED_OTHER for the calling thread (threads inherit their creator's)."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


class PlaybackClock:
    """Maps log times to monotonic deadlines at a rate; paused, it stands at `position`."""

    def __init__(self, start_log_ns: int, rate: float = 1.0) -> None:
        self.rate = rate
        self.paused = False
        self.anchor(start_log_ns)

    def anchor(self, log_ns: int, mono_ns: int | None = None) -> None:
        """From now (or `mono_ns`), log time `log_ns` is the clock's position."""
        self.anchor_log = log_ns
        self.anchor_mono = time.perf_counter_ns() if mono_ns is None else mono_ns

    def deadline(self, log_ns: int) -> int:
        return self.anchor_mono + int((log_ns - self.anchor_log) / self.rate)

    def position(self) -> int:
        """The log time the clock stands at now."""
        if self.paused:
            return self.anchor_log
        return self.anchor_log + int((time.perf_counter_ns() - self.anchor_mono) * self.rate)

    def pause(self) -> None:
        if not self.paused:
            self.anchor(self.position())
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self.anchor(self.anchor_log)

    def set_rate(self, rate: float) -> None:
        self.anchor(self.position())
        self.rate = rate


async def approach(
    deadline: int,
    interrupted: Waker,
    *,
    open_gate: Callable[[], None] | None = None,
    close_gate: Callable[[], None] | None = None,
    idle: Callable[[], None] | None = None,
) -> bool:
    """Step 1: sleep in the event loop until COARSE_GUARD_NS (plus up to 1 ms) before
    `deadline` (perf_counter_ns); True, or early False when `interrupted` is set (pause,
    seek, rate). `idle` runs in the coarse sleep (where a few µs cannot hurt)."""
    while True:
        remaining = deadline - time.perf_counter_ns()
        if remaining <= COARSE_GUARD_NS + 1_000_000:
            break
        whole_ms = (remaining - COARSE_GUARD_NS) // 1_000_000
        if idle is not None:
            idle()
        if open_gate is not None:
            open_gate()
        try:
            await interrupted.sleep(whole_ms / 1000)
        finally:
            if close_gate is not None:
                close_gate()
        if interrupted.is_set():
            return False
    if close_gate is not None:
        close_gate()
    return not interrupted.is_set()


def arrive(deadline: int, gate: threading.Event | None = None) -> None:
    """Steps 2 and 3: a blocking sleep to SPIN_NS before `deadline`, then a spin to it. The
    event loop does not run meanwhile, so what was prepared for the deadline stays valid.
    With `gate` (closed on entry), the reader may run in the sleep up to GATE_GUARD_NS
    before the spin, and the gate is closed again on return."""
    remaining = deadline - time.perf_counter_ns()
    if gate is not None and remaining > SPIN_NS + GATE_GUARD_NS:
        gate.set()
        time.sleep((remaining - SPIN_NS - GATE_GUARD_NS) / 1e9)
        gate.clear()
        remaining = deadline - time.perf_counter_ns()
    if remaining > SPIN_NS:
        time.sleep((remaining - SPIN_NS) / 1e9)
    while time.perf_counter_ns() < deadline:
        pass

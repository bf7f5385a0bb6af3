"""The fuzzing rule, in one place: what a reader may do with any input.

For every input a target may return normally or raise a `BridgeLakeError` (a typed error
naming file and offset or key). Anything else is a finding:
- any other exception (IndexError, struct.error, KeyError, a MemoryError, ...);
- a traced allocation peak above `MEMORY_FLOOR + MEMORY_FACTOR x len(input)`: Python objects
  and numpy buffers are traced (tracemalloc), so a size field read from the file and used
  to allocate before it is checked shows up here even when the machine could afford it;
- more than `TIME_LIMIT_S` seconds for one input (a hang, or work out of proportion).

Allocations of native libraries that bypass tracemalloc (Arrow's and polars' own pools)
are bounded by `RLIMIT_AS` instead: the runner caps the address space at the warmed-up
process plus `ADDRESS_SPACE_HEADROOM`, so a runaway allocation becomes a MemoryError, which
is a finding like any other.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import time
import tracemalloc
from collections.abc import Callable, Iterator

from bridge_lake.errors import BridgeLakeError

ALLOWED: tuple[type[BaseException], ...] = (BridgeLakeError,)
"""The only exceptions a reader may raise on bad input."""
TIME_LIMIT_S = 15.0
"""CPU seconds per input (CPU, not wall time: parallel targets must not make it flaky).
Most inputs take milliseconds; the largest real recordings, walked four ways under
tracemalloc (which makes every allocation several times dearer), take a few seconds."""
MEMORY_FLOOR = 64 << 20
MEMORY_FACTOR = 64
ADDRESS_SPACE_HEADROOM = 4 << 30


class Finding(Exception):
    """An input broke the rule (not a BridgeLakeError, so it escapes like a crash)."""


class TooMuchMemory(Finding):
    pass


class TooSlow(Finding):
    pass


def memory_limit(size: int) -> int:
    return MEMORY_FLOOR + MEMORY_FACTOR * size


def check(target: Callable[[bytes], None], data: bytes) -> None:
    """Run `target` on one input under the rule; raise `Finding` (or the stray exception)."""
    tracing = tracemalloc.is_tracing()
    if tracing:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    t0 = time.process_time()
    with contextlib.suppress(*ALLOWED):
        target(data)
    elapsed = time.process_time() - t0
    if tracing:
        peak = tracemalloc.get_traced_memory()[1] - base
        if peak > memory_limit(len(data)):
            raise TooMuchMemory(
                f"allocation peak {peak / 2**20:.1f} MiB for a {len(data)}-byte input "
                f"(limit {memory_limit(len(data)) / 2**20:.1f} MiB)"
            )
    if elapsed > TIME_LIMIT_S:
        raise TooSlow(f"{elapsed:.1f} CPU s for a {len(data)}-byte input (limit {TIME_LIMIT_S} s)")


def cap_address_space(headroom: int = ADDRESS_SPACE_HEADROOM) -> None:
    """RLIMIT_AS = what the process maps now + headroom (call after warming the target up,
    so thread pools and lazily loaded libraries are already mapped)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    limit = pages * resource.getpagesize() + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


@contextlib.contextmanager
def cpu_time_limit(seconds: float) -> Iterator[None]:
    """Raise TooSlow inside the target after `seconds` of CPU time (replay mode: SIGVTALRM,
    so neither libFuzzer's nor pytest-timeout's SIGALRM is touched; under libFuzzer its own
    -timeout catches hangs)."""

    def expired(signum, frame):
        raise TooSlow(f"still running after {seconds} s of CPU time")

    old = signal.signal(signal.SIGVTALRM, expired)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


def replay(target: Callable[[bytes], None], data: bytes) -> None:
    """`check` with a CPU-time limit and tracing on: for regression tests of crashers."""
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    try:
        with cpu_time_limit(TIME_LIMIT_S * 2):
            check(target, data)
    finally:
        if not started:
            tracemalloc.stop()

"""One thread takes the process's stop signals; the main thread gets them only outside held spans.

A span that must not be cut (a step making a drive's tables public and recording the check
results that let them through) cannot hold off SIGINT by blocking it in the main thread
alone: the kernel then hands a process-directed signal to any other thread that accepts it
(polars', pyarrow's and DuckDB's pools do), Python's C handler trips, and the Python-level
handler runs in the main thread anyway, in the middle of the span (issue 33, fault 5: a
partition was visible without its materialization). So a command that needs such spans
calls `install()` before any thread exists: SIGINT and SIGTERM are blocked in the main thread
and so in every thread started after it (a new thread inherits its creator's mask); a gate
thread takes them with `sigtimedwait`, tells the listener, and interrupts the main thread
(`_thread.interrupt_main`: its current Python handler runs, Dagster's or the command's) unless
the main thread is inside `held()`, in which case the interrupt waits for the span's end.

Child processes inherit the blocked mask, so a command that installs the gate starts none
(`bridge-lake ingest` and the demo keep Dagster's compute-log children out: defs/compute_logs.py;
`ingest --launch` starts a code server and runs nothing itself, so it does without a gate).
A command holds the gate for its own span only (`gated()`): run in-process, as the tests run
commands, it leaves the process's mask as it found it, and processes started afterwards stop
on SIGINT and SIGTERM again (CI saw `bridge-lake play` children that ignored them).
Standard library only: the CLI installs it before importing anything heavy.
"""

from __future__ import annotations

import _thread
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
POLL_S = 0.05
"""How long the gate thread waits for a signal before it looks at its other work."""

Listener = Callable[[signal.Signals], None]


class SignalGate:
    """The gate of this process (see module); `install()` makes the one instance."""

    def __init__(self) -> None:
        self.listener: Listener | None = None
        """Told of every stop signal (in the gate thread) before the main thread is."""
        self._lock = threading.Lock()
        self._depth = 0  # nesting of held() spans in the main thread
        self._pending = 0  # interrupts that wait for the span's end
        self._trips: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="signal-gate", daemon=True)

    def trip(self) -> None:
        """Interrupt the main thread again, from the gate thread (for an interrupt that
        landed where Python could only ignore it: a finalizer)."""
        self._trips.put(None)

    @contextmanager
    def held(self) -> Iterator[None]:
        """A span of the main thread no stop signal interrupts; one that came meanwhile
        interrupts it as the span ends."""
        with self._lock:
            # an interrupt sent just before the lock was taken runs its handler here, before
            # the span (pthread_sigmask runs the pending handlers when it returns)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                release = self._depth == 0 and self._pending
                if release:
                    self._pending = 0
            if release:
                _thread.interrupt_main(signal.SIGINT)

    def _interrupt(self) -> None:
        with self._lock:
            if self._depth:
                self._pending += 1
            else:
                _thread.interrupt_main(signal.SIGINT)

    def _run(self) -> None:
        while not self._closing.is_set():
            got = signal.sigtimedwait(STOP_SIGNALS, POLL_S)
            if got is not None:
                if self.listener is not None:
                    self.listener(signal.Signals(got.si_signo))
                self._interrupt()
            while not self._trips.empty():
                self._trips.get()
                self._interrupt()


_GATE: SignalGate | None = None
_USERS = 0
_MASK_BEFORE: set[signal.Signals] = set()
"""The main thread's mask when the gate was installed; `release()` restores it."""


def install() -> SignalGate:
    """The process's gate, started by the first of its users (in the main thread, ideally
    before any other thread exists: threads started earlier keep accepting the signals).
    Each call is paired with `release()` (`gated()` pairs them)."""
    global _GATE, _USERS, _MASK_BEFORE
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("the signal gate is installed from the main thread")
    if _GATE is None:
        _MASK_BEFORE = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        _GATE = SignalGate()
        _GATE._thread.start()
    _USERS += 1
    return _GATE


def release() -> None:
    """One user of the gate is done; the last one stops it and gives the main thread back
    its mask from before (a signal still pending then reaches its Python handler as usual)."""
    global _GATE, _USERS
    _USERS -= 1
    if _USERS or _GATE is None:
        return
    gate, _GATE = _GATE, None
    gate._closing.set()
    try:  # (a last interrupt from the gate thread can land in the join)
        gate._thread.join()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS - _MASK_BEFORE)


@contextmanager
def gated() -> Iterator[SignalGate]:
    """The gate for the span of a command: `install()` on entry, `release()` on exit."""
    gate = install()
    try:
        yield gate
    finally:
        release()


def installed() -> SignalGate | None:
    """The process's gate, if one is installed."""
    return _GATE

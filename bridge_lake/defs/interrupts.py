"""Ctrl-C and SIGTERM for `bridge-lake ingest`: cancel the run in flight as Dagster does.

Dagster terminates a run by recording it CANCELING and interrupting the process executing
it; the interrupt surfaces inside the step (DagsterExecutionInterruptedError) or before the
next one, and the run ends CANCELED. An ingest executes its runs in its own main thread,
where Dagster's handlers take SIGINT (and SIGTERM) while a run executes: they interrupt it.
`StopWatcher` adds what a terminal user needs around that: a thread woken by every signal
(`signal.set_wakeup_fd`) records the stop request and marks the run in flight CANCELING in
the instance; a run that Dagster nevertheless recorded as failed by the interrupt is then
reported canceled; no further drive starts; a second signal ends the process at once.
Between runs the signal is only recorded; while a run is being set up or wound up (outside
Dagster's handlers) it raises KeyboardInterrupt out of `execute_in_process`, and a run left
unfinished is reported canceled. A KeyboardInterrupt that lands in a finalizer (a database
connection closed by the garbage collector) is swallowed by Python and printed as "Exception
ignored"; the watcher's unraisable hook keeps it off the terminal and trips the signal again,
so the interrupt reaches the code that runs next. One that lands in sqlalchemy's pool while it
closes a connection is logged there with its traceback and raised again: the interrupt goes
on, and `_InterruptRecords` keeps that log record off the terminal.

`publishing()` brackets the span in which a step makes a drive's tables public and records
their materializations and check results: SIGINT and SIGTERM are blocked in that thread for
the span and delivered when it ends, so a partition is never visible without the check
results that let it through. The mask is the thread's, whatever handler Dagster has
installed meanwhile; it holds the signal when no other thread of the process accepts it,
as in `bridge-lake ingest` (its only other thread, the watcher, blocks both) and in a step
process of its own. A process with threads that accept signals would run Python's handler
in the main thread anyway.
"""

from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL_S = 0.05
"""How often a run not yet executing is looked at after a signal."""
INTERRUPTS = (KeyboardInterrupt, dg.DagsterExecutionInterruptedError)
"""What a SIGINT handler raises: ours and Python's KeyboardInterrupt, Dagster's own while a
step executes."""
INTERRUPT_NAMES = frozenset(c.__name__ for c in INTERRUPTS)
RETRIP = b"\x00"
"""Written to the watcher's pipe (never a signal number): trip SIGINT again."""


@contextmanager
def publishing() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for this span (main thread only: signals reach Python there);
    one that arrives meanwhile is delivered as the span ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class StopWatcher:
    """Turns SIGINT / SIGTERM into a stop request (`stopped` names the signal) and cancels
    the run registered with `running()`. A context manager for the main thread."""

    def __init__(self, instance: dg.DagsterInstance, say: Callable[[str], None]) -> None:
        self.instance = instance
        self.say = say
        self.stopped: str | None = None
        self._run_id: str | None = None
        self._lock = threading.RLock()  # the main thread's signal handler takes it too
        self._thread: threading.Thread | None = None
        self._pipe: tuple[int, int] | None = None
        self._saved: dict[int, object] = {}
        self._old_fd = -1
        self._seen = 0
        self._retrips = 0  # SIGINTs tripped again by the watcher, not sent by the user
        self._old_hook = sys.unraisablehook
        self._handlers: list[logging.Handler | None] = []

    def __enter__(self) -> StopWatcher:
        if threading.current_thread() is not threading.main_thread():
            return self
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)
        for s in STOP_SIGNALS:
            self._saved[s] = signal.signal(s, self._on_signal)
        self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self._old_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        self._handlers = [logging.lastResort, *logging.getLogger().handlers]
        for h in self._handlers:
            if h is not None:
                h.addFilter(_INTERRUPT_RECORDS)
        self._thread = threading.Thread(target=self._watch, name="stop-watcher", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pipe is None:
            return
        signal.set_wakeup_fd(self._old_fd)
        sys.unraisablehook = self._old_hook
        for h in self._handlers:
            if h is not None:
                h.removeFilter(_INTERRUPT_RECORDS)
        for s, handler in self._saved.items():
            signal.signal(s, handler)  # type: ignore[arg-type]
        r, w = self._pipe
        os.close(w)  # ends the watcher's read
        if self._thread is not None:
            self._thread.join()
        os.close(r)

    def _on_signal(self, signum: int, frame: object) -> None:
        """The main thread's handler whenever Dagster's are not installed: between drives
        the watcher has recorded the signal and nothing is interrupted; while a run is
        being set up (before Dagster executes it) or wound up, KeyboardInterrupt leaves
        `execute_in_process` and the run is settled as canceled by `running()`."""
        with self._lock:
            pending = self._run_id is not None
            self.stopped = self.stopped or signal.Signals(signum).name
        if pending:
            raise KeyboardInterrupt

    def _unraisable(self, info: sys.UnraisableHookArgs) -> None:
        """An interrupt raised inside a finalizer, where Python can only ignore it (a
        signal's handler raised it there, ours or Dagster's): the watcher trips the signal
        again (from its thread, so that it is not handled inside this hook) and it
        interrupts what runs next; anything else goes to the usual hook."""
        if not issubclass(info.exc_type, INTERRUPTS) or self._pipe is None:
            self._old_hook(info)
            return
        os.write(self._pipe[1], RETRIP)

    @contextmanager
    def running(self, run_id: str) -> Iterator[None]:
        """The main thread executes this run: a stop request cancels it."""
        with self._lock:
            self._run_id = run_id
        try:
            yield
        finally:
            with self._lock:
                self._run_id = None
            if self.stopped:
                self._settle(run_id)

    def _watch(self) -> None:
        assert self._pipe is not None
        # never take a signal here: delivered to this thread it would bypass the main
        # thread's `publishing()` mask (Python runs the handler in the main thread anyway)
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        while True:
            data = os.read(self._pipe[0], 64)
            if not data:
                return  # the write end closed: the watcher's context ended
            for signo in data:
                if signo == RETRIP[0]:
                    self._retrips += 1
                    _thread.interrupt_main(signal.SIGINT)
                    continue
                if signo not in STOP_SIGNALS:
                    continue
                if signo == signal.SIGINT and self._retrips:
                    self._retrips -= 1
                    continue
                name = signal.Signals(signo).name
                self._seen += 1
                if self._seen > 1:
                    self.say(f"{name} again: exiting now")
                    sys.stdout.flush()
                    os._exit(130)
                with self._lock:
                    self.stopped = self.stopped or name
                self.say(
                    f"\n{name} received: canceling the run in flight, starting no more "
                    "drives (send it again to exit at once)"
                )
                threading.Thread(target=self._mark_canceling, daemon=True).start()

    def _mark_canceling(self) -> None:
        """The termination request, recorded as the UI's Terminate records it, once the run
        executes (a run still being set up is stopped by `_on_signal` instead)."""
        with self._lock:
            run_id = self._run_id
        while run_id is not None:
            run = self.instance.get_run_by_id(run_id)
            if run is not None and run.is_finished:
                return
            if run is not None and run.status == dg.DagsterRunStatus.STARTED:
                self.instance.report_run_canceling(
                    run, message=f"bridge-lake ingest received {self.stopped}"
                )
                return
            time.sleep(POLL_S)
            with self._lock:
                if self._run_id != run_id:
                    return

    def _settle(self, run_id: str) -> None:
        """After a stop request: a run left unfinished (interrupted while being set up) or
        ended as FAILURE by the interrupt before its CANCELING was recorded was canceled by
        the user, and the instance says so."""
        run = self.instance.get_run_by_id(run_id)
        if run is None:
            return
        interrupted = run.status == dg.DagsterRunStatus.FAILURE and _interrupted(
            self.instance, run_id
        )
        if not run.is_finished or interrupted:
            self.instance.report_run_canceled(
                run, message=f"canceled: bridge-lake ingest received {self.stopped}"
            )


class _InterruptRecords(logging.Filter):
    """Drops sqlalchemy's pool log record of an interrupt raised while it closed a
    connection: the pool raises it again after logging it, so the interrupt is not lost;
    only its traceback would reach the terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[0] if record.exc_info else None
        interrupt = exc is not None and issubclass(exc, INTERRUPTS)
        return not (interrupt and record.name.startswith("sqlalchemy.pool"))


_INTERRUPT_RECORDS = _InterruptRecords()


def _interrupted(instance: dg.DagsterInstance, run_id: str) -> bool:
    """True when the run failed because it was interrupted, not for a reason of its own
    (such a run stays FAILURE): a step failed by the interrupt, or the run itself did,
    before any step ran (the interrupt came while its resources were set up, ahead of the
    CANCELING mark, and Dagster calls that an unexpected termination)."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = entry.dagster_event
        source = getattr(event.step_failure_data, "error_source", None) if event else None
        if getattr(source, "name", "") == "INTERRUPT":
            return True
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
        event = entry.dagster_event
        data = event.job_failure_data if event else None
        error = getattr(data, "error", None)
        reason = getattr(getattr(data, "failure_reason", None), "name", "")
        if reason == "UNEXPECTED_TERMINATION" and getattr(error, "cls_name", "") in INTERRUPT_NAMES:
            return True
    return False

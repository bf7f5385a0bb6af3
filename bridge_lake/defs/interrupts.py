"""Ctrl-C and SIGTERM for `bridge-lake ingest`: cancel the run in flight as Dagster does.

Dagster terminates a run by recording it CANCELING and interrupting the process executing
it; the interrupt surfaces inside the step (DagsterExecutionInterruptedError) or before the
next one, and the run ends CANCELED. An ingest executes its runs in its own main thread,
where Dagster's handlers take SIGINT while a run executes: they interrupt it. The signals
themselves reach the process through its signal gate (bridge_lake.signal_gate: one thread
takes them and interrupts the main thread, except inside a held span). `StopWatcher` adds
what a terminal user needs around that: it is told of every signal first, records the stop
request and marks the run in flight CANCELING in the instance; a run that Dagster
nevertheless recorded as failed by the interrupt is then reported canceled; no further drive
starts; a second signal ends the process at once. Between runs the signal is only recorded;
while a run is being set up or wound up (outside Dagster's handlers) it raises
KeyboardInterrupt out of `execute_in_process`, and a run left unfinished is reported
canceled. A KeyboardInterrupt that lands in a finalizer (a database connection closed by the
garbage collector) is swallowed by Python and printed as "Exception ignored"; the watcher's
unraisable hook keeps it off the terminal and has the gate interrupt again, so the interrupt
reaches the code that runs next. One that lands in sqlalchemy's pool while it closes a
connection is logged there with its traceback and raised again: the interrupt goes on, and
`_InterruptRecords` keeps that log record off the terminal.

`publishing()` brackets the span in which a step makes a drive's tables public and records
their materializations and check results: with the gate installed (`bridge-lake ingest`,
the demo) no stop signal interrupts it, one that comes meanwhile interrupts as the span
ends, so a partition is never visible without the check results that let it through.
Without a gate (a step process Dagster started) the span blocks the signals in the main
thread only, which holds them off only as long as no other thread of the process accepts
them: there a signal can still cut the span, and the step's re-run publishes again.
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

from bridge_lake import signal_gate

STOP_SIGNALS = tuple(signal_gate.STOP_SIGNALS)
POLL_S = 0.05
"""How often a run not yet executing is looked at after a signal."""
INTERRUPTS = (KeyboardInterrupt, dg.DagsterExecutionInterruptedError)
"""What a SIGINT handler raises: ours and Python's KeyboardInterrupt, Dagster's own while a
step executes."""
INTERRUPT_NAMES = frozenset(c.__name__ for c in INTERRUPTS)
INTERRUPTED_KEY = "bridge_lake/interrupted"
"""Metadata of the failure a layer step raises for an interrupt (`interrupted_failure`)."""


def interrupted_failure(exc: BaseException) -> dg.Failure:
    """The failure of a step that was interrupted: not retried. Dagster applies an op's
    retry policy to interrupts too, so a layer step (retried on infrastructure errors)
    would otherwise be run again after its delay, and Ctrl-C or Terminate would neither
    stop the run nor end it soon."""
    return dg.Failure(
        f"interrupted ({type(exc).__name__}): the run was asked to stop",
        metadata={INTERRUPTED_KEY: True},
        allow_retries=False,
    )


@contextmanager
def publishing() -> Iterator[None]:
    """Hold SIGINT and SIGTERM off the main thread for this span; one that arrives
    meanwhile interrupts as the span ends (see module)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    gate = signal_gate.installed()
    if gate is not None:
        with gate.held():
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
        self._gate: signal_gate.SignalGate | None = None
        self._entered = False
        self._retrips = 0  # interrupts tripped again without a gate, not sent by the user
        self._saved: dict[int, object] = {}
        self._seen = 0
        self._old_hook = sys.unraisablehook
        self._handlers: list[logging.Handler | None] = []

    def __enter__(self) -> StopWatcher:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._gate = signal_gate.installed()
        for s in STOP_SIGNALS:
            self._saved[s] = signal.signal(s, self._on_signal)
        self._old_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        self._handlers = [logging.lastResort, *logging.getLogger().handlers]
        for h in self._handlers:
            if h is not None:
                h.addFilter(_INTERRUPT_RECORDS)
        if self._gate is not None:
            self._gate.listener = self._on_received
        self._entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._entered:
            return
        if self._gate is not None:
            self._gate.listener = None
        sys.unraisablehook = self._old_hook
        for h in self._handlers:
            if h is not None:
                h.removeFilter(_INTERRUPT_RECORDS)
        for s, handler in self._saved.items():
            signal.signal(s, handler)  # type: ignore[arg-type]
        self._gate = None
        self._entered = False

    def _on_signal(self, signum: int, frame: object) -> None:
        """The main thread's handler whenever Dagster's are not installed: between drives
        the watcher has recorded the signal and nothing is interrupted; while a run is
        being set up (before Dagster executes it) or wound up, KeyboardInterrupt leaves
        `execute_in_process` and the run is settled as canceled by `running()`. Without
        a gate (`ingest --launch`: its runs execute elsewhere) the signal itself comes
        here, and this handler is the one told of it."""
        if self._gate is None:
            if self._retrips:
                self._retrips -= 1  # tripped again by `_unraisable`, not sent
            else:
                self._on_received(signal.Signals(signum))
        with self._lock:
            pending = self._run_id is not None
            self.stopped = self.stopped or signal.Signals(signum).name
        if pending:
            raise KeyboardInterrupt

    def _unraisable(self, info: sys.UnraisableHookArgs) -> None:
        """An interrupt raised inside a finalizer, where Python can only ignore it (a
        signal's handler raised it there, ours or Dagster's): the gate interrupts again
        (from its thread, so that it is not handled inside this hook) and the interrupt
        reaches what runs next; anything else goes to the usual hook."""
        if not issubclass(info.exc_type, INTERRUPTS):
            self._old_hook(info)
        elif self._gate is not None:
            self._gate.trip()
        else:
            self._retrips += 1
            trip = threading.Timer(POLL_S, _thread.interrupt_main)  # once the hook returned
            trip.daemon = True
            trip.start()

    def _on_received(self, signo: signal.Signals) -> None:
        """A stop signal came (told by the gate thread before it interrupts the main
        thread, or by `_on_signal`): the first is a stop request, a second exits at once."""
        self._seen += 1
        if self._seen > 1:
            self.say(f"{signo.name} again: exiting now")
            sys.stdout.flush()
            os._exit(130)
        with self._lock:
            self.stopped = self.stopped or signo.name
        self.say(
            f"\n{signo.name} received: canceling the run in flight, starting no more "
            "drives (send it again to exit at once)"
        )
        threading.Thread(target=self._mark_canceling, daemon=True).start()

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
        user = getattr(event.step_failure_data, "user_failure_data", None) if event else None
        if user is not None and INTERRUPTED_KEY in (user.metadata or {}):
            return True
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
        event = entry.dagster_event
        data = event.job_failure_data if event else None
        error = getattr(data, "error", None)
        reason = getattr(getattr(data, "failure_reason", None), "name", "")
        if reason == "UNEXPECTED_TERMINATION" and getattr(error, "cls_name", "") in INTERRUPT_NAMES:
            return True
    return False

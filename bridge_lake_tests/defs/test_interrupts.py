"""publishing(): a signal during the span is delivered when it ends, not inside it.

Run in a process of its own with only the main thread, as `bridge-lake ingest` runs its
steps (pytest's own threads would take the signal without the main thread's mask)."""

import os
import subprocess
import sys

from bridge_lake_tests.conftest import REPO

SCRIPT = """
import os, signal, threading, time
from bridge_lake.defs.interrupts import publishing
assert threading.active_count() == 1, threading.enumerate()
got = []
signal.signal(signal.SIGINT, lambda signo, frame: got.append(time.monotonic()))
with publishing():
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):  # bytecodes at which a delivered signal would run
        time.sleep(0.0001)
    inside = list(got)
    ended = time.monotonic()
print(len(inside), len(got), got[0] >= ended)
"""


def test_signal_waits_for_the_publishing_span():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=120, check=True)  # fmt: skip
    assert run.stdout.split() == ["0", "1", "True"]


FINALIZER = """
import gc, os, signal, time
import dagster as dg
from bridge_lake.defs.interrupts import StopWatcher

class Closing:  # a pooled connection closed by the garbage collector
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs here, inside the finalizer
            time.sleep(0.0001)

with dg.DagsterInstance.ephemeral() as instance:
    said = []
    with StopWatcher(instance, said.append) as watcher:
        caught = "none"
        try:
            with watcher.running("run-1"):
                c = Closing()
                c.self = c
                del c
                gc.collect()
                for _ in range(20000):  # the interrupt, tripped again, lands here
                    time.sleep(0.0001)
        except KeyboardInterrupt:
            caught = "KeyboardInterrupt"
        time.sleep(0.3)  # the watcher has read every wakeup byte by now
print(caught, watcher.stopped, len(said))
"""


def test_an_interrupt_inside_a_finalizer_is_not_lost_nor_printed():
    """The handler's KeyboardInterrupt raised in a finalizer (CI: sqlalchemy closing a
    connection) is ignored by Python with a traceback on stderr; the watcher keeps it off
    stderr, trips the signal again, and the code after the finalizer is interrupted. The
    re-trip is not taken for the user's second signal (which would exit at once)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", FINALIZER], capture_output=True, text=True,
                         env=env, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr
    assert run.stdout.split() == ["KeyboardInterrupt", "SIGINT", "1"], run.stdout + run.stderr

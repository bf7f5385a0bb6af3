"""publishing(): a signal during the span is delivered when it ends, not inside it.

Run in a process of its own with only the main thread, as `bridge-lake ingest` runs its
steps (pytest's own threads would take the signal without the main thread's mask)."""

import os
import subprocess
import sys

import pytest

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
import gc, os, signal, sys, time
if sys.argv[1] == "gate":  # as `bridge-lake ingest` runs; `ingest --launch` has none
    from bridge_lake import signal_gate
    signal_gate.install()
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


@pytest.mark.parametrize("gate", ["gate", "no-gate"])
def test_an_interrupt_inside_a_finalizer_is_not_lost_nor_printed(gate):
    """The handler's KeyboardInterrupt raised in a finalizer (CI: sqlalchemy closing a
    connection) is ignored by Python with a traceback on stderr; the watcher keeps it off
    stderr, trips the signal again, and the code after the finalizer is interrupted. The
    re-trip is not taken for the user's second signal (which would exit at once)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", FINALIZER, gate], capture_output=True,
                         text=True, env=env, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr
    assert run.stdout.split() == ["KeyboardInterrupt", "SIGINT", "1"], run.stdout + run.stderr


POOL_LOG = """
import logging, sys
import dagster as dg
from bridge_lake.defs.interrupts import StopWatcher

pool = logging.getLogger("sqlalchemy.pool.impl.QueuePool")

def closing_failed(exc):  # as sqlalchemy's pool logs a failed close before raising it again
    try:
        raise exc
    except BaseException:
        pool.error("Exception closing connection <c>", exc_info=True)

with dg.DagsterInstance.ephemeral() as instance:
    with StopWatcher(instance, print):
        closing_failed(dg.DagsterExecutionInterruptedError())
        closing_failed(KeyboardInterrupt())
        closing_failed(OSError("disk gone"))  # a real failure still shows
    closing_failed(KeyboardInterrupt())  # outside the watcher: as before
"""


def test_the_pools_log_of_an_interrupt_stays_off_the_terminal():
    """CI: Dagster's handler raised DagsterExecutionInterruptedError inside sqlalchemy's
    connection close, which logged it with a traceback (then raised it again, so the run was
    still canceled). While the watcher watches, such records of an interrupt are dropped;
    other errors of the pool still print, and nothing changes outside the watcher."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", POOL_LOG], capture_output=True, text=True,
                         env=env, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("Exception closing connection") == 2, run.stderr
    assert "OSError: disk gone" in run.stderr and run.stderr.count("KeyboardInterrupt") == 1
    assert "DagsterExecutionInterruptedError" not in run.stderr


RUN_FAILED_BY_INTERRUPT = """
import os, signal, time
import dagster as dg
from bridge_lake.defs.interrupts import _interrupted

class Interrupted(dg.ConfigurableResource):
    def setup_for_execution(self, context):  # the user's Ctrl-C while resources are set up
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)

class Broken(dg.ConfigurableResource):
    def setup_for_execution(self, context):
        raise RuntimeError("no database")

@dg.op
def step(r: dg.ConfigurableResource) -> None:
    pass

def run(resource):
    @dg.job(resource_defs={"r": resource})
    def job():
        step()
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        return result.success, _interrupted(instance, result.run_id)

print(*run(Interrupted()), *run(Broken()))
"""


def test_a_run_failed_by_the_interrupt_before_any_step_counts_as_interrupted():
    """Clean clone: SIGINT while a run's resources were set up failed the run itself
    (Dagster: "interrupted unexpectedly", no CANCELING mark yet), no step; the ingest then
    reported the drive FAILED instead of canceled. Such a run is interrupted; a run whose
    resource failed for its own reason is not."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", RUN_FAILED_BY_INTERRUPT], capture_output=True,
                         text=True, env=env, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "True", "False", "False"], run.stdout + run.stderr

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

"""Issue 33, fault 5: Ctrl-C during a step's publishing span (tables made public, their
materializations and check results recorded) waits for the span's end, even when other
threads of the process accept signals; and an interrupted layer step is not retried.

On the code before this change the span blocked the signals in the main thread only: the
kernel handed SIGINT to a polars pool thread, the handler ran in the main thread inside the
span, and a partition was visible without its materialization (CI, test_cli_interrupt at
6 s). An interrupted layer step was retried after INFRA_RETRY's 15 s, so Ctrl-C took 20 s
and the run went on to SUCCESS."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import dagster as dg

from bridge_lake.defs.interrupts import INTERRUPTED_KEY, _interrupted
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.steps import layer_step

SPAN = textwrap.dedent(
    """
    import os, signal, threading, time
    from bridge_lake import signal_gate
    gate = signal_gate.install()  # as `bridge-lake ingest` does, before threads exist
    import polars as pl
    from bridge_lake.defs.interrupts import publishing

    # pool threads that would accept SIGINT had they been started before the gate
    pl.DataFrame({"a": range(200_000)}).select(pl.col("a").sort()).sum()
    started = threading.Thread(target=time.sleep, args=(5,), daemon=True)
    started.start()
    tasks = os.listdir("/proc/self/task")
    assert len(tasks) > 2, tasks
    for t in set(tasks) - {str(gate._thread.native_id)}:  # (it waits in sigtimedwait)
        # every other thread of the process blocks the stop signals
        with open(f"/proc/self/task/{t}/status") as f:
            blocked = int(next(l for l in f if l.startswith("SigBlk")).split()[1], 16)
        assert blocked & (1 << (signal.SIGINT - 1)), (t, hex(blocked))
    try:
        with publishing():
            os.kill(os.getpid(), signal.SIGINT)  # process-directed, as a terminal sends it
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                sum(range(1000))  # Python code runs: a handler would run here
            print("span done", flush=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            sum(range(1000))
        print("not interrupted after the span")
    except KeyboardInterrupt:
        print("interrupted after the span")
    """
)


def test_a_stop_signal_waits_for_the_publishing_span_whatever_thread_takes_it() -> None:
    out = subprocess.run([sys.executable, "-c", SPAN], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["span done", "interrupted after the span"], out


@layer_step("demo", {"t": "a table"}, deps=[], check_specs=[])
def stopped_step(context, publication):
    raise dg.DagsterExecutionInterruptedError()  # what Dagster's SIGINT handler raises
    yield  # a generator, as every layer step


def test_an_interrupted_layer_step_fails_at_once_as_interrupted(tmp_path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(drives.name, ["d"])
        result = dg.materialize(
            [stopped_step], instance=instance, partition_key="d", raise_on_error=False
        )
        kinds = [e.event_type_value for e in result.all_events]
        assert "STEP_UP_FOR_RETRY" not in kinds
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        assert INTERRUPTED_KEY in failure.step_failure_data.user_failure_data.metadata
        assert _interrupted(instance, result.run_id)


AFTERWARDS = textwrap.dedent(
    """
    import signal, subprocess, sys
    from bridge_lake import signal_gate
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1, signal.SIGTERM])
    with signal_gate.gated():
        with signal_gate.gated():  # nested users share the one gate
            pass
        assert signal_gate.installed() is not None
    assert signal_gate.installed() is None
    print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
    with signal_gate.gated():
        pass
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    child.send_signal(signal.SIGINT)  # a process started after the command stops on it
    print(child.wait(timeout=10))
    """
)


def test_a_command_leaves_the_mask_as_it_found_it() -> None:
    """`bridge-lake ingest` run in-process (as the tests run it) gave every process started
    afterwards a mask that blocked SIGINT and SIGTERM."""
    out = subprocess.run(
        [sys.executable, "-c", AFTERWARDS], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    usr1, term = int(signal.SIGUSR1), int(signal.SIGTERM)
    assert out.stdout.split("\n")[:2] == [f"[{usr1}, {term}]", str(-signal.SIGINT)], out

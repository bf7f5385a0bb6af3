"""Ctrl-C at any moment of `bridge-lake ingest` (issue 33, fault 5), as a terminal sends it:
SIGINT to the command's whole process group (its children too), 0.5 s (Python still
importing), 2 s (loading Dagster and the definitions) and 4-6 s (a run executing) into the
ingest of a 1-minute synthetic drive. Each time: exit 130 within seconds, no traceback from
the command or any child of it, no process of its group left, and every partition visible in
the lake has the materialization and the passed checks that let it through.

On the code before this change, SIGINT at 0.5 s printed a KeyboardInterrupt traceback from an
import and the command died of the signal (exit -2), and once a run executed Dagster's
`watch_orphans` children (the compute-log mirror) printed KeyboardInterrupt tracebacks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from bridge_lake.synth import synthesize
from bridge_lake_tests.test_cli_ingest import _assert_published_passed

COMMAND = Path(sys.executable).with_name("bridge-lake")


@pytest.fixture(scope="module")
def minute_drive(tmp_path_factory):
    landing = tmp_path_factory.mktemp("interrupt") / "landing"
    (drive,) = synthesize(landing, drives=1, minutes=1.0, light=True, source="adtf")
    return landing, drive.drive_id


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(300)
@pytest.mark.parametrize("after_s", [0.5, 2.0, 4.0, 5.0, 6.0])
def test_ctrl_c_at_any_moment_stops_cleanly(minute_drive, tmp_path, after_s):
    landing, drive = minute_drive
    lake, home = tmp_path / "lake", tmp_path / "home"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    env.pop("BRIDGE_LAKE_DEBUG", None)
    proc = subprocess.Popen(
        [str(COMMAND), "ingest", str(landing), "--lake", str(lake)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        time.sleep(after_s)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does
        out, err = proc.communicate(timeout=60)
        gone = time.monotonic() - sent
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _group_alive(proc.pid)
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 130, out + err
    assert gone < 15, gone
    assert "Traceback" not in out + err and "Exception ignored" not in err, out + err
    assert not left, "a process of the ingest's group outlived it"
    if "Summary (" in out:  # it got as far as a run
        assert "Stopped by SIGINT" in out
    else:
        assert err.strip() == "bridge-lake: interrupted", err
    if (home / "dagster.yaml").exists():
        with dg.DagsterInstance.from_config(str(home)) as instance:
            for run in instance.get_runs():
                assert run.is_finished, run.status
            _assert_published_passed(instance, lake, [drive])

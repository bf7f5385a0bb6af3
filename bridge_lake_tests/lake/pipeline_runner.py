"""A fork server that runs the library's pipeline for one drive in child processes, for tests
that kill runs (SIGKILL) or run them side by side.

Importing the pipeline takes seconds, forking a process that has imported it milliseconds:
the server (`python -m bridge_lake_tests.lake.pipeline_runner`, started by `Runner`)
imports everything and does no work itself (no threads, so forking is safe); it reads one
JSON list of jobs per line, forks a child per job, waits for all of them and answers with
their exit codes (-9: killed by SIGKILL).

A child runs the steps of the `lake_job` without Dagster (raw manifest, normalize,
calibrate, export to MCAP) holding the drive's lock, and writes what happened to the job's
`out` file. With `kill_phase` a timer thread started when that step begins sends the
process SIGKILL after `kill_after_s`: wherever the step then is, inside Arrow's C++ writers
and with background encoder threads running as often as between two Python lines.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

PHASES = ("raw", "normalize", "calibrate", "export")
REPO = Path(__file__).resolve().parents[2]


def _kill_timer(seconds: float, record: dict, out: str) -> threading.Timer:
    """SIGKILL this process after `seconds`, noting first which step it was in."""

    def kill() -> None:
        record["killed_in"] = record["phase"]
        _write(out, record)
        os.kill(os.getpid(), signal.SIGKILL)

    timer = threading.Timer(seconds, kill)
    timer.daemon = True
    return timer


def _write(path: str, record: dict) -> None:
    tmp = f"{path}.{threading.get_ident()}.tmp"
    Path(tmp).write_text(json.dumps(record))
    os.replace(tmp, path)


def run_job(job: dict) -> bool:
    """Run `job["phases"]` of one drive under its lock; record the outcome in `job["out"]`."""
    from bridge_lake.calibrate.drive import calibrate_drive
    from bridge_lake.export.exporter import ExportRequest
    from bridge_lake.export.lake_exports import export_to_lake
    from bridge_lake.lake import Lake
    from bridge_lake.lake.locks import drive_lock
    from bridge_lake.landing import LandingZone
    from bridge_lake.normalize.drive import normalize_drive
    from bridge_lake_tests.support import register

    lake, landing = Lake(job["lake"]), LandingZone(job["landing"])
    drive, source = job["drive"], job["source"]
    steps = {
        "raw": lambda: register(landing, lake, drive),
        "normalize": lambda: normalize_drive(landing, lake, drive, source),
        "calibrate": lambda: calibrate_drive(lake, drive),
        "export": lambda: export_to_lake(lake, drive, "mcap", ExportRequest()),
    }
    record: dict[str, Any] = {"pid": os.getpid(), "seconds": {}, "phase": None}

    def waiting(holder: Any) -> None:
        record["waited_for"] = str(holder)

    try:
        with drive_lock(lake, drive, owner=job["owner"], wait_s=job["wait_s"], on_wait=waiting):
            record["acquired"] = time.time()
            for name in job["phases"]:
                record["phase"] = name
                if name == job.get("kill_phase"):
                    _kill_timer(job["kill_after_s"], record, job["out"]).start()
                t = time.perf_counter()
                published = steps[name]()
                record["seconds"][name] = time.perf_counter() - t
                if isinstance(published, tuple) and not published[1]:
                    raise AssertionError(f"{name} of {drive} did not publish")
            record["released"] = time.time()
        ok = True
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["traceback"] = traceback.format_exc()
        ok = False
    _write(job["out"], record)
    return ok


WARM = (
    "bridge_lake.calibrate.drive",
    "bridge_lake.export.exporter",
    "bridge_lake.export.health",
    "bridge_lake.export.lake_exports",
    "bridge_lake.lake.locks",
    "bridge_lake.normalize.drive",
    "bridge_lake_tests.support",
    "mcap.reader",  # the health check imports its readers lazily
    "mcap_protobuf.decoder",
    "mcap_ros2.decoder",
    "rosbags.highlevel",
)
"""Imported by the server before it forks; plus the ROS 2 typestore (pure Python, cached)."""


def _serve() -> None:
    for name in WARM:
        importlib.import_module(name)
    importlib.import_module("bridge_lake.export.messages.typestore").typestore(2)
    warnings.filterwarnings("ignore", message=".*fork.*")  # polars: no pool was started here
    for line in sys.stdin:
        jobs = json.loads(line)
        pids = []
        for job in jobs:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = 0 if run_job(job) else 1
                finally:
                    os._exit(code)
            pids.append(pid)
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
        print(json.dumps(codes), flush=True)


class Runner:
    """The fork server as a context manager: `run(jobs)` forks one child per job at once and
    returns their exit codes when all have ended."""

    def __enter__(self) -> Runner:
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # same event counts run after run
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bridge_lake_tests.lake.pipeline_runner"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=env,
            text=True,
        )
        return self

    def run(self, jobs: list[dict]) -> list[int]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(jobs) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"pipeline runner exited with {self._proc.wait()}")
        return json.loads(line)

    def __exit__(self, *exc: object) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)


def job(
    lake: Path,
    landing: Path,
    drive: str,
    source: str,
    out: Path,
    *,
    phases: tuple[str, ...] = PHASES,
    kill_phase: str | None = None,
    kill_after_s: float = 0.0,
    wait_s: float = 60.0,
    owner: str = "test",
) -> dict:
    return {
        "lake": str(lake),
        "landing": str(landing),
        "drive": drive,
        "source": source,
        "out": str(out),
        "phases": list(phases),
        "kill_phase": kill_phase,
        "kill_after_s": kill_after_s,
        "wait_s": wait_s,
        "owner": owner,
    }


def outcome(job: dict) -> dict:
    return json.loads(Path(job["out"]).read_text())


if __name__ == "__main__":
    _serve()

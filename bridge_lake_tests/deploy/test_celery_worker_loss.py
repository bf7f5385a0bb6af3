"""Issue 33, fault 2: kill -9 of a step's process on a Celery worker. With the shipped
Celery config (task_acks_late, task_reject_on_worker_lost) the task goes back on the queue
and the step runs again: the run succeeds. With Celery's defaults the same kill failed the
run with WorkerLostError (checked by running this test against the old celery.yaml).

A real redis-server and a real dagster-celery worker; the instance is a local SQLite one
(every process here is on one host)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from bridge_lake.defs.compute_logs import COMPUTE_LOGS
from bridge_lake.defs.executors import CELERY_YAML
from bridge_lake_tests.conftest import free_port
from bridge_lake_tests.deploy import killed_step_job
from bridge_lake_tests.deploy.servers import Background, redis_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BIN = Path(sys.executable).parent


def test_a_killed_step_process_is_run_again_and_the_run_succeeds(tmp_path, monkeypatch):
    marker = tmp_path / "killed-once"
    with redis_server(free_port(), tmp_path) as broker:
        env = _environment(tmp_path, broker, monkeypatch, {killed_step_job.MARKER_ENV: str(marker)})
        with dg.DagsterInstance.get() as instance:  # its schema made before the worker reads it
            worker = Background("worker", _worker_argv("w1"), env, tmp_path / "worker.log")
            try:
                job = dg.reconstructable(_job)
                start = time.monotonic()
                with dg.execute_job(job, instance=instance, raise_on_error=False) as result:
                    success = result.success
                seconds = time.monotonic() - start
            finally:
                worker.stop()
    assert marker.exists(), worker.tail()  # the first attempt was killed
    assert success, worker.tail()
    assert seconds < 120
    assert "WorkerLostError" in worker.log.read_text(errors="replace")


def _job() -> dg.JobDefinition:
    return killed_step_job.killed_step_job


def test_a_run_whose_whole_worker_dies_fails_within_two_minutes_naming_it(tmp_path, monkeypatch):
    """kill -9 of the whole worker (main process and pool) while it runs a step: Redis keeps
    the task for visibility_timeout (1800 s) and the run waited for it (issue 33: STARTED for
    4.5 minutes). The executor pings the worker that took the step and fails the step; the
    other branch, on the other worker, still finishes (its next step is submitted after the
    loss was found), and the run ends FAILED naming the worker."""
    marker = tmp_path / "started"
    with redis_server(free_port(), tmp_path) as broker:
        extra = {killed_step_job.MARKER_ENV: str(marker), killed_step_job.OTHER_SECONDS_ENV: "75"}
        env = _environment(tmp_path, broker, monkeypatch, extra)
        with dg.DagsterInstance.get() as instance:
            workers = {
                name: Background(name, _worker_argv(name), env, tmp_path / f"{name}.log")
                for name in ("w-a", "w-b")
            }
            killed: list[tuple[str, float]] = []

            def kill_when_started() -> None:
                deadline = time.monotonic() + 150
                while not marker.exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(1)
                pid = int(marker.read_text())
                for name, worker in workers.items():  # the one running the step, whole
                    if pid in worker.descendants():
                        os.killpg(worker.proc.pid, signal.SIGKILL)
                        killed.append((name, time.monotonic()))

            killer = threading.Thread(target=kill_when_started, daemon=True)
            killer.start()
            try:
                job = dg.reconstructable(_lost_worker_job)
                with dg.execute_job(job, instance=instance, raise_on_error=False) as result:
                    success, run_id = result.success, result.run_id
                ended = time.monotonic()
            finally:
                for worker in workers.values():
                    worker.stop()
            run = instance.get_run_by_id(run_id)
            events = [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event]
    assert killed, [w.tail() for w in workers.values()]
    name, at = killed[0]
    assert not success and run is not None and run.status == dg.DagsterRunStatus.FAILURE
    print(f"the run ended {ended - at:.1f} s after the kill")
    assert ended - at < 120, ended - at
    failed = {e.step_key: _failure_text(e) for e in events if e.is_step_failure}
    assert list(failed) == ["runs_long"] and "WorkerLost" in failed["runs_long"]
    assert f"celery worker {name}@" in failed["runs_long"], failed
    assert {e.step_key for e in events if e.is_step_success} == {"outlasts_the_loss", "after_it"}


def _environment(
    tmp_path: Path, broker: str, monkeypatch: pytest.MonkeyPatch, extra: dict[str, str]
) -> dict[str, str]:
    """The workers' and this process's environment: a Dagster home of its own (compute logs
    without `tail` children), the broker, the job module on the path, and `extra`."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump({"compute_logs": COMPUTE_LOGS}))
    env = {**os.environ, "DAGSTER_HOME": str(home), "BRIDGE_LAKE_CELERY_BROKER": broker,
           "PYTHONPATH": os.getcwd(), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           **extra}  # fmt: skip
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def _worker_argv(name: str) -> list[str]:
    return [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
            "-y", str(CELERY_YAML), "-n", name, "--", "--concurrency=1"]  # fmt: skip


def _lost_worker_job() -> dg.JobDefinition:
    return killed_step_job.lost_worker_job


def _failure_text(event: dg.DagsterEvent) -> str:
    error = getattr(event.event_specific_data, "error", None)
    return (event.message or "") + (error.to_string() if error is not None else "")


def test_a_worker_running_a_long_step_answers_every_ping(tmp_path, monkeypatch):
    """The watch never takes a busy worker for a lost one: its main process answers pings
    while the step runs in its pool. Pinged every second, lost after 5 s of silence, through
    a 15 s step: the run succeeds."""
    from bridge_lake.defs import celery_watch

    monkeypatch.setattr(celery_watch, "WATCH_EVERY_S", 1.0)
    monkeypatch.setattr(celery_watch, "LOST_AFTER_S", 5.0)
    with redis_server(free_port(), tmp_path) as broker:
        extra = {killed_step_job.MARKER_ENV: str(tmp_path / "started"),
                 killed_step_job.SECONDS_ENV: "15"}  # fmt: skip
        env = _environment(tmp_path, broker, monkeypatch, extra)
        with dg.DagsterInstance.get() as instance:
            worker = Background("worker", _worker_argv("w-busy"), env, tmp_path / "worker.log")
            try:
                job = dg.reconstructable(_lost_worker_job)
                with dg.execute_job(job, instance=instance, raise_on_error=False) as result:
                    success = result.success
            finally:
                worker.stop()
    assert success, worker.tail()

"""Issue 33, fault 2: kill -9 of a step's process on a Celery worker. With the shipped
Celery config (task_acks_late, task_reject_on_worker_lost) the task goes back on the queue
and the step runs again: the run succeeds. With Celery's defaults the same kill failed the
run with WorkerLostError (checked by running this test against the old celery.yaml).

A real redis-server and a real dagster-celery worker; the instance is a local SQLite one
(every process here is on one host)."""

from __future__ import annotations

import os
import sys
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
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump({"compute_logs": COMPUTE_LOGS}))
    marker = tmp_path / "killed-once"
    with redis_server(free_port(), tmp_path) as broker:
        env = {**os.environ, "DAGSTER_HOME": str(home), "BRIDGE_LAKE_CELERY_BROKER": broker,
               killed_step_job.MARKER_ENV: str(marker), "PYTHONPATH": os.getcwd(),
               "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        argv = [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
                "-y", str(CELERY_YAML), "-n", "w1", "--", "--concurrency=1"]  # fmt: skip
        with dg.DagsterInstance.get() as instance:  # its schema made before the worker reads it
            worker = Background("worker", argv, env, tmp_path / "worker.log")
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

"""A job on the Celery executor of bridge_lake/defs/celery.yaml whose step kills its own
process (kill -9) the first time it runs, and one whose worker is killed whole while it runs:
test_celery_worker_loss.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import dagster as dg

from bridge_lake.defs.executors import celery_executor_def

MARKER_ENV = "BRIDGE_LAKE_TEST_MARKER"
SECONDS_ENV = "BRIDGE_LAKE_TEST_SECONDS"
OTHER_SECONDS_ENV = "BRIDGE_LAKE_TEST_OTHER_SECONDS"


@dg.op
def dies_once() -> int:
    """Killed on its first attempt, as the OOM killer or an operator would; then succeeds."""
    marker = Path(os.environ[MARKER_ENV])
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return 1


@dg.job(executor_def=celery_executor_def())
def killed_step_job() -> None:
    dies_once()


@dg.op
def runs_long() -> int:
    """Says it started (the marker), then runs SECONDS_ENV seconds (or until killed)."""
    Path(os.environ[MARKER_ENV]).write_text(str(os.getpid()))
    time.sleep(float(os.environ.get(SECONDS_ENV, "600")))
    return 1


@dg.op
def outlasts_the_loss() -> int:
    """Another branch, still running when the loss is found (OTHER_SECONDS_ENV s)."""
    time.sleep(float(os.environ.get(OTHER_SECONDS_ENV, "0")))
    return 1


@dg.op
def after_it(x: int) -> int:
    """Submitted only once the other branch is done: after the loss was found."""
    return x


@dg.job(executor_def=celery_executor_def())
def lost_worker_job() -> None:
    runs_long()
    after_it(outlasts_the_loss())

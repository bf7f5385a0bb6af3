"""The Celery executor, watching the worker of every step it sent: a dead worker fails the run.

dagster-celery's executor sends a step as a task and polls its result until it is ready. When
the whole worker that took it dies (kill -9 of the worker, its host lost), the result never
becomes ready: Redis keeps the task unacknowledged until its `visibility_timeout` (1800 s in
celery.yaml, which must outlast the longest step) and the run waits meanwhile (issue 33: a
run STARTED for 4.5 minutes, until Terminate). So this executor asks Celery itself, with the
means Celery has for it: the task's STARTED state names the worker that took it
(`task_track_started`), and that worker is pinged over the broker (`app.control.ping`,
answered by the worker's main process even while a step runs in its pool). A worker that has
not answered for LOST_AFTER_S is lost: the step gets a STEP_FAILURE event whose error is a
`WorkerLost` naming the worker (handed to dagster-celery's loop as the task's events, so its
downstream steps are skipped and the other branches finish: raising from the result instead
left the loop waiting for steps it would no longer submit), and its task is revoked. Only
workers alive then remember a revocation; a worker started later without `--statedb` could
still run the task when the broker hands it out again after `visibility_timeout`. A step's
process killed while its worker lives is Celery's own case (reject-on-worker-lost).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import dagster as dg

WATCH_EVERY_S = 10.0
"""How often the worker of a step still running is pinged."""
LOST_AFTER_S = 45.0
"""A worker that answers no ping for this long is lost (a ping waits PING_TIMEOUT_S)."""
PING_TIMEOUT_S = 3.0


class WorkerLost(Exception):
    """The Celery worker that took a step stopped answering: dead or cut off."""


class WatchedResult:
    """A step's AsyncResult for dagster-celery's loop (`ready`, `get`, `revoke`), which is
    also ready when the worker running the step is lost: `get` then gives the step's
    failure event instead of the worker's events."""

    def __init__(self, result: Any, app: Any, step_context: Any) -> None:
        self.result, self.app, self.step_context = result, app, step_context
        self.lost: str | None = None
        self._worker: str | None = None
        self._next = time.monotonic() + WATCH_EVERY_S
        self._answered = time.monotonic()

    def ready(self) -> bool:
        if self.lost is not None or self.result.ready():
            return True
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + WATCH_EVERY_S
        worker = self._taken_by()
        if worker != self._worker:  # taken (again: a task sent back goes to another one)
            self._worker, self._answered = worker, now
        if worker is None:  # queued: no worker to watch yet
            return False
        replies = self.app.control.ping(destination=[worker], timeout=PING_TIMEOUT_S)
        if any(worker in r for r in replies or ()):
            self._answered = time.monotonic()
            return False
        silent = time.monotonic() - self._answered
        if silent < LOST_AFTER_S:
            return False
        self.lost = (
            f"celery worker {worker} took step {self.step_context.step.key} and has answered "
            f"no ping for {silent:.0f} s: it died or was cut off (its task is revoked; the "
            "run does not wait for the broker's visibility_timeout)"
        )
        self.result.revoke()
        return True

    def get(self) -> Any:
        if self.lost is None:
            return self.result.get()
        from dagster._core.events import DagsterEvent
        from dagster._core.execution.plan.objects import StepFailureData
        from dagster._serdes import serialize_value
        from dagster._utils.error import serializable_error_info_from_exc_info

        try:
            raise WorkerLost(self.lost)
        except WorkerLost:
            error = serializable_error_info_from_exc_info(sys.exc_info())
        event = DagsterEvent.step_failure_event(  # logged to the run here, as a worker would
            self.step_context, StepFailureData(error=error, user_failure_data=None)
        )
        return [serialize_value(event)]

    def revoke(self) -> None:
        self.result.revoke()

    def _taken_by(self) -> str | None:
        """The hostname of the worker running the task now (its STARTED state's info)."""
        info = self.result.info if self.result.state == "STARTED" else None
        if isinstance(info, dict) and info.get("hostname"):
            return str(info["hostname"])
        return self._worker


def _watched_submit(app: Any, plan_context: Any, step: Any, *args: Any) -> WatchedResult:
    from dagster_celery.executor import _submit_task

    result = _submit_task(app, plan_context, step, *args)
    return WatchedResult(result, app, plan_context.for_step(step))


def watched_celery_executor() -> dg.ExecutorDefinition:
    """dagster-celery's executor (same name, config and workers) with WatchedResult."""
    from dagster_celery.core_execution_loop import core_celery_execution_loop
    from dagster_celery.executor import CELERY_CONFIG, CeleryExecutor, celery_executor

    class WatchedCeleryExecutor(CeleryExecutor):
        def execute(self, plan_context: Any, execution_plan: Any) -> Any:
            return core_celery_execution_loop(
                plan_context, execution_plan, step_execution_fn=_watched_submit
            )

    @dg.executor(
        name=celery_executor.name,
        config_schema=CELERY_CONFIG,
        requirements=dg.multiple_process_executor_requirements(),
    )
    def watched(init_context: dg.InitExecutorContext) -> WatchedCeleryExecutor:
        from dagster._core.execution.retries import RetryMode

        config = init_context.executor_config
        return WatchedCeleryExecutor(
            broker=config.get("broker"),
            backend=config.get("backend"),
            config_source=config.get("config_source"),
            include=config.get("include"),
            retries=RetryMode.from_config(config["retries"]),
        )

    return watched

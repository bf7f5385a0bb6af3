"""Where the steps of a run execute: processes of the run itself, or Celery workers anywhere.

Chosen when the code location loads, by BRIDGE_LAKE_EXECUTOR (bridge_lake.settings), so one
image serves both deployments without a code change:

- `in_process` (default): every step of the run in the run's own process, one after the
  other. A drive's steps are a chain (raw → normalized → calibrated → scenes), so a second
  process per step would buy no parallelism and cost a fresh interpreter per step (importing
  the code location, about 2.5 CPU s, and 15-20 s between steps on a loaded 2-core machine);
  parallelism comes from running drives at once (dagster.yaml's run concurrency).
- `multiprocess`: one process per step inside the run's own process or pod, at most two at
  once; a run is then as big as the machine that launched it.
- `celery`: every step becomes a task on the Celery queue `dagster`, picked up by whichever
  worker is free (`dagster-celery worker start -A dagster_celery.app -y
  docs/deploy/celery.yaml`), so the steps of one drive spread over many machines. Broker and
  result backend are both BRIDGE_LAKE_CELERY_BROKER (a Redis URL). Workers report step
  events straight into the instance's event log, so the instance must be one every worker
  reaches (PostgreSQL), and so must the lake and the landing zone (S3, or a shared disk).
  Needs the `celery` extra (dagster-celery with Redis).
"""

from __future__ import annotations

import dagster as dg

from bridge_lake import settings

CELERY_BROKER_ENV = "BRIDGE_LAKE_CELERY_BROKER"


def lake_executor() -> dg.ExecutorDefinition:
    """The executor named by BRIDGE_LAKE_EXECUTOR; raises SettingsError for an unknown one."""
    if settings.executor() == "celery":
        from dagster_celery import celery_executor  # optional: only celery deployments have it

        # read from the environment when a run starts, not when the code location loads
        url = {"env": CELERY_BROKER_ENV}
        return celery_executor.configured({"broker": url, "backend": url})
    if settings.executor() == "multiprocess":
        return dg.multiprocess_executor.configured({"max_concurrent": 2})
    return dg.in_process_executor

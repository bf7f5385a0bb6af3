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
  worker is free (`dagster-celery worker start -A dagster_celery.app -y <CELERY_YAML>`), so
  the steps of one drive spread over many machines. Executor and workers read the same file
  (CELERY_YAML, shipped in the package): broker and result backend both
  BRIDGE_LAKE_CELERY_BROKER (a Redis URL), late acks and reject-on-worker-lost. Workers report step
  events straight into the instance's event log, so the instance must be one every worker
  reaches (PostgreSQL), and so must the lake and the landing zone (S3, or a shared disk).
  Needs the `celery` extra (dagster-celery with Redis).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from bridge_lake import settings

CELERY_YAML = Path(__file__).with_name("celery.yaml")
"""The Celery config of executor and workers (`-y` of `dagster-celery worker start`)."""


def celery_config() -> dict[str, Any]:
    """The `execution: config:` block of CELERY_YAML: dagster-celery's executor config."""
    return yaml.safe_load(CELERY_YAML.read_text(encoding="utf-8"))["execution"]["config"]


def lake_executor() -> dg.ExecutorDefinition:
    """The executor named by BRIDGE_LAKE_EXECUTOR; raises SettingsError for an unknown one."""
    if settings.executor() == "celery":
        return celery_executor_def()
    if settings.executor() == "multiprocess":
        return dg.multiprocess_executor.configured({"max_concurrent": 2})
    return dg.in_process_executor


def celery_executor_def() -> dg.ExecutorDefinition:
    """dagster-celery's executor, watching the workers of its steps (celery_watch.py),
    configured with CELERY_YAML. The broker is read from the environment when a run starts,
    not when the code location loads ({env: BRIDGE_LAKE_CELERY_BROKER} in the file)."""
    from bridge_lake.defs.celery_watch import watched_celery_executor  # needs the extra

    return watched_celery_executor().configured(celery_config())

"""Issue 33, faults 2 and 3: the summary names why a run failed.

- A step whose process was killed (kill -9) records no STEP_FAILURE: the executor's run
  failure names it (`[step]: cls: message`, as dagster-celery does for billiard's
  WorkerLostError and the multiprocess executor for a crashed child). The summary now gives
  that cause on the step's assets; before, every asset said "the run recorded no
  materialization".
- A step that failed after recording only some of its checks (as when PostgreSQL went away
  mid-step) is FAILED with "k of n checks not recorded", not "ok".

Both fail on the code before this change (checked)."""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path

import dagster as dg

from bridge_lake.defs.outcomes import (
    FAILED,
    NOT_RUN,
    _worker_errors,
    asset_nodes,
    drive_outcome,
)
from bridge_lake.defs.summary import print_summary

CRASH = (
    "ChildProcessCrashException: Multiprocess executor: child process for step first was"
    " terminated by signal 9 (SIGKILL)"
)
"""What Dagster 1.13's multiprocess executor says of the killed step: its step failure holds
the bare exception class, its engine event the signal."""


@dg.asset
def first() -> None:
    """Killed the way the kernel's OOM killer or an operator's kill -9 does it."""
    os.kill(os.getpid(), signal.SIGKILL)


@dg.asset(deps=[first])
def second() -> None:
    """Never runs."""


@dg.asset(check_specs=[dg.AssetCheckSpec(n, asset="checked", description=n) for n in ("c1", "c2")])
def checked():
    """Records one of its two checks and then its step fails (the second result is lost)."""
    yield dg.MaterializeResult(check_results=[dg.AssetCheckResult(check_name="c1", passed=True)])


killed = dg.Definitions(
    assets=[first, second],
    jobs=[dg.define_asset_job("killed_job")],
    executor=dg.multiprocess_executor,  # the step in a process of its own, as on a worker
)


def test_a_killed_step_process_is_named_in_the_summary(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        job = dg.reconstructable(_killed_job)
        with dg.execute_job(job, instance=instance, raise_on_error=False) as result:
            assert not result.success
            run_id = result.run_id
        outcome = drive_outcome(instance, run_id, "d", asset_nodes([first, second]), 1.0)
    by_key = {a.asset: a for a in outcome.assets}
    assert outcome.status == FAILED
    assert by_key["first"].status == FAILED
    assert by_key["first"].problems == (f"FAILED: {CRASH}",)
    assert by_key["second"].status == NOT_RUN and by_key["second"].reason == "first failed"


def _killed_job() -> dg.JobDefinition:
    return killed.resolve_job_def("killed_job")


def test_a_celery_workers_lost_step_is_named_by_its_step() -> None:
    """dagster-celery records no STEP_FAILURE for a task whose worker process died: its run
    failure lists `[step]: <error>` (core_execution_loop), here made the way it makes it."""
    from billiard.exceptions import WorkerLostError
    from dagster._core.errors import DagsterSubprocessError
    from dagster._utils.error import serializable_error_info_from_exc_info

    try:
        raise WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL) Job: 3.")
    except WorkerLostError:
        lost = serializable_error_info_from_exc_info(sys.exc_info())
    try:
        raise DagsterSubprocessError(
            "During celery execution errors occurred in workers:\n"
            + "\n".join(f"[{k}]: {e.to_string()}" for k, e in {"normalized": lost}.items()),
            subprocess_error_infos=[lost],
        )
    except DagsterSubprocessError:
        run_failure = serializable_error_info_from_exc_info(sys.exc_info())
    assert _worker_errors(run_failure) == [
        ("normalized", "WorkerLostError: Worker exited prematurely: signal 9 (SIGKILL) Job: 3.")
    ]


def test_check_results_missing_make_the_asset_failed_and_are_counted(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.materialize([checked], instance=instance, raise_on_error=False)
        outcome = drive_outcome(instance, result.run_id, "d", asset_nodes([checked]), 1.0)
    (a,) = outcome.assets
    assert a.status == FAILED
    assert (a.checks_passed, a.checks_failed, a.checks_missing) == (1, 0, 1)
    assert "FAILED: 1 of 2 checks not recorded: c2" in a.problems
    out = io.StringIO()
    print_summary([outcome], out, home=tmp_path, log=None)
    text = out.getvalue()
    assert "1 passed, 1 not recorded" in text
    assert "Checks: 1 passed, 0 failed, 0 warnings, 1 not recorded." in text

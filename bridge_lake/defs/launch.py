"""`bridge-lake ingest --launch`: drives as runs of lake_job submitted to a Dagster instance.

The runs go through the instance's run coordinator, as runs started in the UI do: the queued
coordinator (Dagster's default) leaves them to the daemon of `dagster dev` or
`dagster-daemon run`, which starts them within the instance's concurrency limits; the
immediate one hands them to the run launcher at once (the default launcher: one process
per run, beside this one). The code location is loaded the way `dagster dev` loads it
(workspace.yaml, location `bridge_lake`), so the daemon finds the runs' code under the same
name. Each run's config pins the lake and landing zone the user named, whatever the
environment of the process that ends up running it.

Dagster has no public API for loading a workspace or creating a run of a remote job; this
follows what `dagster job launch` does (dagster._cli.job) on the 1.13 internals the project
pins. Everything else (the instance, its run coordinator, run statuses, the event log) goes
through the public API.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster._core.remote_representation.code_location import CodeLocation
from dagster._core.remote_representation.external import RemoteJob, RemoteRepository
from dagster._core.workspace.context import WorkspaceProcessContext, WorkspaceRequestContext
from dagster._core.workspace.load_target import (
    ModuleTarget,
    WorkspaceFileTarget,
    WorkspaceLoadTarget,
)

from bridge_lake.defs.jobs import lake_job
from bridge_lake.errors import BridgeLakeError

LOCATION = "bridge_lake"
"""The code location's name in workspace.yaml and pyproject ([tool.dagster])."""
WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"
"""The repository's workspace.yaml (absent when the package is installed elsewhere)."""
QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"
DAEMON_FRESH_S = 120.0
"""A daemon whose last heartbeat is older than this is taken as not running."""
POLL_S = 2.0
CANCEL_WAIT_S = 15.0
"""How long canceled runs are waited for before the summary shows them as they are."""
FINISHED = frozenset(
    {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
)


class LaunchError(BridgeLakeError):
    """Runs cannot be launched on this instance as asked (e.g. nothing dequeues them)."""


@dataclass(frozen=True)
class Submitted:
    drive_id: str
    run_id: str


def queues(instance: dg.DagsterInstance) -> bool:
    """True when the instance queues submitted runs for its daemon to start."""
    return isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)


def queue_needs_daemon(instance: dg.DagsterInstance) -> bool:
    """True when submitted runs would wait in a queue that no live daemon works off."""
    if not queues(instance):
        return False
    beat = instance.get_daemon_heartbeats().get(QUEUE_DAEMON)
    return beat is None or time.time() - beat.timestamp > DAEMON_FRESH_S


def _load_target() -> WorkspaceLoadTarget:
    if WORKSPACE.is_file():
        return WorkspaceFileTarget(paths=[str(WORKSPACE)])
    return ModuleTarget("bridge_lake.definitions", None, None, LOCATION)


@contextmanager
def workspace(instance: dg.DagsterInstance) -> Iterator[WorkspaceRequestContext]:
    """The code location as `dagster dev` loads it (in a code server process of its own)."""
    with WorkspaceProcessContext(
        instance, _load_target(), version=dg.__version__, code_server_log_level="WARNING"
    ) as process:
        yield process.create_request_context()


def _lake_job(ws: WorkspaceRequestContext) -> tuple[CodeLocation, RemoteRepository, RemoteJob]:
    try:
        location = ws.get_code_location(LOCATION)
    except dg.DagsterError as exc:  # the location failed to load: its error is the news
        raise LaunchError(f"cannot load the code location {LOCATION!r}: {exc}") from exc
    (repo,) = location.get_repositories().values()
    return location, repo, repo.get_full_job(lake_job.name)


def submit_drives(
    instance: dg.DagsterInstance,
    ws: WorkspaceRequestContext,
    drive_ids: Sequence[str],
    run_config: Mapping[str, object],
    tags: Mapping[str, Mapping[str, str]],
) -> list[Submitted]:
    """One run of lake_job per drive (partition), created like a run of the UI's launchpad
    and submitted to the instance's run coordinator; `tags[drive]` tags each."""
    location, repo, job = _lake_job(ws)
    plan = location.get_execution_plan(
        job, dict(run_config), step_keys_to_execute=None, known_state=None, instance=instance
    ).execution_plan_snapshot
    out = []
    for drive_id in drive_ids:
        run = instance.create_run(
            job_name=job.name,
            run_id=None,
            run_config=run_config,
            resolved_op_selection=None,
            step_keys_to_execute=plan.step_keys_to_execute,
            op_selection=None,
            status=None,
            root_run_id=None,
            parent_run_id=None,
            tags={**job.tags, "dagster/partition": drive_id, **tags[drive_id]},
            job_snapshot=job.job_snapshot,
            execution_plan_snapshot=plan,
            parent_job_snapshot=job.parent_job_snapshot,
            remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(),
            asset_selection=None,
            asset_check_selection=None,
            asset_graph=repo.asset_graph,
        )
        instance.submit_run(run.run_id, ws)
        out.append(Submitted(drive_id, run.run_id))
    return out


def wait_for_runs(
    instance: dg.DagsterInstance,
    runs: list[Submitted],
    report: Callable[[Submitted, dg.DagsterRunStatus, float], None],
    *,
    poll_s: float = POLL_S,
    timeout_s: float | None = None,
    stop: Callable[[], object] = lambda: None,
) -> dict[str, tuple[dg.DagsterRunStatus, float]]:
    """Poll the runs until every one finished; `report(run, status, seconds)` is called for
    each change of status. Once `stop()` is true the runs not finished are canceled through
    the instance's run coordinator (as the UI's Terminate does) and waited for at most
    CANCEL_WAIT_S more. Returns run id → (final status, seconds from submission)."""
    start = time.monotonic()
    canceled_at: float | None = None
    seen: dict[str, dg.DagsterRunStatus] = {}
    done: dict[str, tuple[dg.DagsterRunStatus, float]] = {}
    while len(done) < len(runs):
        for r in runs:
            if r.run_id in done:
                continue
            run = instance.get_run_by_id(r.run_id)
            status = run.status if run is not None else dg.DagsterRunStatus.FAILURE
            elapsed = time.monotonic() - start
            if seen.get(r.run_id) != status:
                seen[r.run_id] = status
                report(r, status, elapsed)
            if status in FINISHED:
                done[r.run_id] = (status, elapsed)
        if len(done) < len(runs) and stop() and canceled_at is None:
            canceled_at = time.monotonic()
            for r in runs:
                if r.run_id not in done:
                    instance.run_coordinator.cancel_run(r.run_id)
            continue
        if canceled_at is not None and time.monotonic() - canceled_at > CANCEL_WAIT_S:
            for r in runs:
                if r.run_id not in done:
                    done[r.run_id] = (seen.get(r.run_id, dg.DagsterRunStatus.CANCELING),
                                      time.monotonic() - start)  # fmt: skip
        if len(done) < len(runs):
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                left = ", ".join(f"{r.drive_id} ({r.run_id})" for r in runs if r.run_id not in done)
                raise LaunchError(f"runs still not finished after {timeout_s:.0f} s: {left}")
            time.sleep(poll_s)
    return done

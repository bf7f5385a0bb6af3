"""What a drive's run did, read back from the Dagster instance: run and asset-check records.

The ingest and demo summaries are built here from the instance's event log, never from what
the runs happened to print, so the terminal says exactly what the UI says. Every asset of
lake_job gets a status:

- `ok`: materialized, every check passed;
- `warn`: materialized, a WARN check failed (its reason is shown);
- `FAILED`: an ERROR check failed, or the asset's step failed (the reason: the check's
  description, or the step's error in one line);
- `not run`: an asset upstream failed (named) or the run was canceled before it;
- `up to date`: not in the run, which materialized only what was out of date
  (defs/staleness.py); its last materialization stands.

A drive is `ok`, `warn` or `FAILED` after its assets, `canceled` when its run was canceled,
`skipped` when it is up to date (bridge_lake.defs.staleness) and `not run` when the
ingest stopped before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg

OK, WARN, FAILED, NOT_RUN, CANCELED, SKIPPED, UP_TO_DATE = (
    "ok",
    "warn",
    "FAILED",
    "not run",
    "canceled",
    "skipped",
    "up to date",
)
BAD = frozenset({FAILED, NOT_RUN, CANCELED})
"""Statuses that make the exit code 1."""
REASON_KEYS = ("problem", "reason", "error")
"""Metadata a check without a description may carry its reason in."""
RUN_EVENTS = {
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_CHECK_EVALUATION,
    dg.DagsterEventType.STEP_FAILURE,
    dg.DagsterEventType.STEP_START,
    dg.DagsterEventType.ENGINE_EVENT,
    dg.DagsterEventType.RUN_FAILURE,
}


@dataclass(frozen=True)
class AssetNode:
    """One asset of lake_job: its key, the op (step) that makes it, the assets it reads."""

    key: str
    step: str
    deps: frozenset[str]
    checks: Mapping[str, str]
    """check name → what it checks (the spec's description)."""


@dataclass(frozen=True)
class AssetStatus:
    asset: str
    status: str
    rows: int | None = None
    checks_passed: int = 0
    checks_failed: int = 0
    checks_warned: int = 0
    checks_missing: int = 0
    """Checks the asset declares that the run did not record (lost, e.g. in a DB outage)."""
    problems: tuple[str, ...] = ()
    """One line per failed or warning check, or the step's error: 'FAILED: name: reason'."""
    reason: str = ""
    """Why a `not run` asset did not run."""
    blocked_by: tuple[str, ...] = ()
    """The failed assets upstream that kept a `not run` asset from running."""
    report: str = ""
    """The asset's HTML report in the lake, if it has one."""
    path: str = ""
    """Where the asset's data is (its dagster/uri)."""


@dataclass(frozen=True)
class DriveOutcome:
    drive_id: str
    status: str
    run_id: str | None = None
    seconds: float = 0.0
    assets: tuple[AssetStatus, ...] = ()
    reason: str = ""
    """A line for the drive as a whole (a run error, why it was skipped or not run)."""

    @property
    def bad(self) -> bool:
        return self.status in BAD

    def count(self, status: str) -> int:
        return sum(a.status == status for a in self.assets)


@dataclass
class _RunRecords:
    materialized: dict[str, dg.AssetMaterialization] = field(default_factory=dict)
    checks: dict[str, list[dg.AssetCheckEvaluation]] = field(default_factory=dict)
    step_errors: dict[str, str] = field(default_factory=dict)
    steps_started: int = 0
    run_error: str = ""
    """Why the run failed when no step did: the engine's word before the run's failure."""


WORKER_ERROR = re.compile(r"^\[([^\]\s]+)\]: (.+)$", re.MULTILINE)
"""A step's error in the run failure of an executor that runs steps elsewhere (dagster-celery:
"During celery execution errors occurred in workers:" then `[step]: cls: message` per step,
e.g. billiard's WorkerLostError when the step's process was killed): no STEP_FAILURE event
is recorded for such a step, only this line."""


def asset_nodes(assets: Iterable[dg.AssetsDefinition]) -> list[AssetNode]:
    """The assets of the given definitions in their order, with steps, deps and checks."""
    nodes = []
    for a in assets:
        for key in sorted(a.keys, key=lambda k: k.to_user_string()):  # a set: give it an order
            checks = {s.name: s.description or "" for s in a.check_specs if s.asset_key == key}
            nodes.append(
                AssetNode(
                    key.to_user_string(),
                    a.node_def.name,
                    frozenset(d.to_user_string() for d in a.asset_deps[key]),
                    checks,
                )
            )
    return nodes


def _records(instance: dg.DagsterInstance, run_id: str) -> _RunRecords:
    out = _RunRecords()
    engine = ""
    step_engine: dict[str, str] = {}  # the engine's last word on a step (e.g. how it died)
    for entry in instance.all_logs(run_id, of_type=RUN_EVENTS):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.ENGINE_EVENT:
            engine = event.message or engine
            if event.step_key is not None and event.message:
                step_engine[event.step_key] = event.message
        elif event.event_type == dg.DagsterEventType.RUN_FAILURE:
            error = getattr(event.event_specific_data, "error", None)
            out.run_error = error_line(error) if error else engine or (event.message or "")
            for step, line in _worker_errors(error):
                out.step_errors.setdefault(step, line)
        elif event.event_type == dg.DagsterEventType.STEP_START:
            out.steps_started += 1
        elif event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            m = event.materialization
            out.materialized[m.asset_key.to_user_string()] = m
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            ev = event.asset_check_evaluation_data
            out.checks.setdefault(ev.asset_key.to_user_string(), []).append(ev)
        elif event.step_key is not None:
            error = event.step_failure_data.error
            line = error_line(error) if error else "step failed"
            if ": " not in line and event.step_key in step_engine:  # a bare class name
                said = step_engine[event.step_key].split(". ")[0].rstrip(".")  # its first sentence
                line = f"{line.rsplit('.', 1)[-1]}: {said}"
            out.step_errors[event.step_key] = line
    return out


def _worker_errors(error) -> list[tuple[str, str]]:  # a dagster SerializableErrorInfo
    """(step, one-line error) of every step error a run failure names (WORKER_ERROR)."""
    out = []
    while error is not None:
        for step, text in WORKER_ERROR.findall(error.message or ""):
            out.append((step, _unqualified(text.strip())))
        error = error.cause
    return out


def _unqualified(first: str) -> str:
    qualified, sep, rest = first.partition(": ")
    if sep and qualified.startswith("bridge_lake."):
        return rest  # our errors name the file, row or key themselves
    if sep and "." in qualified:
        return f"{qualified.rsplit('.', 1)[1]}: {rest}"
    return first


def error_line(error) -> str:  # a dagster SerializableErrorInfo
    """The innermost cause of a Dagster error as one line, without our module paths."""
    while error.cause is not None:
        error = error.cause
    text = (error.message or error.cls_name or "error").strip()
    return _unqualified(text.splitlines()[0] if text else error.cls_name)


def check_reason(ev: dg.AssetCheckEvaluation, spec_description: str) -> str:
    """A failed check's reason: its description, else a reason in its metadata, else what
    the check checks."""
    if ev.description:
        return " ".join(ev.description.split())
    for key in REASON_KEYS:
        value = ev.metadata.get(key)
        if value is not None and str(value.value).strip():
            return " ".join(str(value.value).split())
    return f"expected: {spec_description}" if spec_description else "failed"


def _value(m: dg.AssetMaterialization, *keys: str) -> object | None:
    for k in keys:
        if k in m.metadata:
            return m.metadata[k].value
    return None


def drive_outcome(
    instance: dg.DagsterInstance,
    run_id: str,
    drive_id: str,
    nodes: Sequence[AssetNode],
    seconds: float,
    selection: Iterable[dg.AssetKey] | None = None,
) -> DriveOutcome:
    """The statuses of one drive's run, from the instance's records of it; the assets
    outside `selection` (the run's assets, None: all) are up to date."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return DriveOutcome(drive_id, FAILED, run_id, seconds, reason="the run is not recorded")
    rec = _records(instance, run_id)
    canceled = run.status in (dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.CANCELING)
    if not rec.steps_started and run.status != dg.DagsterRunStatus.SUCCESS:
        why = "canceled before it ran" if canceled else "the run ended before any step"
        assets = tuple(AssetStatus(n.key, NOT_RUN, reason=why) for n in nodes)
        status = CANCELED if canceled else FAILED
        reason = "" if canceled else f"the run failed: {rec.run_error or 'see the log'}"
        return DriveOutcome(drive_id, status, run_id, seconds, assets, reason)
    ran = None if selection is None else {k.to_user_string() for k in selection}
    statuses: dict[str, AssetStatus] = {}
    for node in nodes:
        if ran is not None and node.key not in ran:
            why = "unchanged code and inputs since its last materialization"
            statuses[node.key] = AssetStatus(node.key, UP_TO_DATE, reason=why)
            continue
        statuses[node.key] = _asset_status(node, rec, statuses, canceled)
    assets = tuple(statuses.values())
    if canceled:
        status = CANCELED
    elif any(a.status in BAD for a in assets) or run.status != dg.DagsterRunStatus.SUCCESS:
        status = FAILED
    else:
        status = WARN if any(a.status == WARN for a in assets) else OK
    reason = ""
    if run.status == dg.DagsterRunStatus.FAILURE and not any(a.status in BAD for a in assets):
        first = next(iter(rec.step_errors.values()), "") or rec.run_error
        reason = f"the run failed: {first or 'see the log'}"
    return DriveOutcome(drive_id, status, run_id, seconds, assets, reason)


def _asset_status(
    node: AssetNode, rec: _RunRecords, done: Mapping[str, AssetStatus], canceled: bool
) -> AssetStatus:
    evals = rec.checks.get(node.key, [])
    problems = []
    for ev in sorted(evals, key=lambda e: e.severity != dg.AssetCheckSeverity.ERROR):
        if not ev.passed:
            word = FAILED if ev.severity == dg.AssetCheckSeverity.ERROR else "warn"
            problems.append(
                f"{word}: {ev.check_name}: {check_reason(ev, node.checks.get(ev.check_name, ''))}"
            )
    passed = sum(ev.passed for ev in evals)
    n_warned = len(problems) - sum(p.startswith(FAILED) for p in problems)
    m = rec.materialized.get(node.key)
    absent = sorted(set(node.checks) - {ev.check_name for ev in evals}) if m is not None else []
    if absent:
        problems.append(_missing_checks(absent, len(node.checks)))
    n_failed = len(problems) - n_warned
    counts = {"checks_passed": passed, "checks_failed": n_failed - bool(absent),
              "checks_warned": n_warned, "checks_missing": len(absent)}  # fmt: skip
    failed = n_failed > 0
    if m is not None:
        rows = _value(m, "dagster/row_count", "messages")
        report = _value(m, "report")
        uri = _value(m, "dagster/uri")
        status = FAILED if failed else WARN if problems else OK
        return AssetStatus(
            node.key,
            status,
            int(rows) if isinstance(rows, int | float) else None,
            problems=tuple(problems),
            report=str(report) if report else "",
            path=str(uri) if uri else "",
            **counts,
        )
    if failed:
        return AssetStatus(node.key, FAILED, problems=tuple(problems), **counts)
    if node.step in rec.step_errors:
        if canceled:
            return AssetStatus(node.key, NOT_RUN, reason="canceled while it ran")
        error = f"FAILED: {rec.step_errors[node.step]}"
        return AssetStatus(node.key, FAILED, problems=(*problems, error), **counts)
    upstream = _failed_upstream(node, done)
    if upstream:
        more = f" and {len(upstream) - 2} more" if len(upstream) > 2 else ""
        return AssetStatus(
            node.key,
            NOT_RUN,
            reason=f"{', '.join(upstream[:2])}{more} failed",
            blocked_by=tuple(upstream),
        )
    if canceled:
        return AssetStatus(node.key, NOT_RUN, reason="canceled before it ran")
    lost = "FAILED: the run recorded no materialization"
    return AssetStatus(node.key, FAILED, problems=(*problems, lost), **counts)


def _missing_checks(absent: Sequence[str], declared: int) -> str:
    """'FAILED: k of n checks not recorded: names' for a materialized asset whose run did not
    record a result of every check it declares (results lost, e.g. while the database was
    away): the asset is not 'ok' on the strength of checks nobody saw."""
    more = f" and {len(absent) - 3} more" if len(absent) > 3 else ""
    return (
        f"{FAILED}: {len(absent)} of {declared} checks not recorded: {', '.join(absent[:3])}{more}"
    )


def _failed_upstream(node: AssetNode, done: Mapping[str, AssetStatus]) -> list[str]:
    """The failed assets this one waited for: a direct dependency that failed, or what a
    dependency that did not run waited for."""
    out: list[str] = []
    for dep in sorted(node.deps):
        s = done.get(dep)
        if s is None:
            continue  # landing_drive: observed, never materialized
        found = [dep] if s.status == FAILED else s.blocked_by
        out.extend(f for f in found if f not in out)
    return out

"""`bridge-lake demo`: synthesize drives and run the whole pipeline on the embedded default.

Runs in-process against the Dagster instance in $DAGSTER_HOME (or `<workdir>/dagster_home`),
so `dagster dev` pointed at the same home afterwards shows every run, materialization and
check result of the demo.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import dagster as dg

from bridge_lake import settings
from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.partitions import drives as drives_partitions
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.drive_meta import DRIVE_YAML, MAX_DRIVE_YAML_BYTES, parse_drive_yaml
from bridge_lake.errors import BridgeLakeError
from bridge_lake.landing import LandingZone
from bridge_lake.synth import synthesize

DRIVE_TAG = "bridge_lake/drive"
SOURCE_TAG = "bridge_lake/source"

DEMO_INSTANCE_YAML = "telemetry:\n  enabled: false\n"
"""A home created by the demo keeps Dagster's default SQLite storage inside it."""
SUPERSEDED_DEV = "ignore:Function `dev_command` is superseded"
"""Dagster 1.13's `dagster dev` warns that `dg dev` (the separate dagster-dg-cli package)
supersedes it; `dagster dev` is what this project runs and documents, so that warning only
alarms."""
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
"""The demo prints its own progress; Dagster's step log is in the run's event log."""


@dataclass(frozen=True)
class AssetOutcome:
    drive_id: str
    asset: str
    rows: int | None
    path: str
    checks_passed: int
    checks_failed: list[str]
    """ERROR checks that failed: the drive is not good."""
    checks_warned: list[str]
    """WARN checks that failed: worth a look (e.g. a GNSS gap indoors), not a failure."""
    run_ok: bool
    seconds: float


def run_demo(
    workdir: Path,
    *,
    drives: int = 2,
    minutes: float = 1.5,
    seed: int = 0,
    source: str = "all",
    out: TextIO,
) -> list[AssetOutcome]:
    workdir = workdir.resolve()
    landing_root, lake_root = workdir / "landing", workdir / "lake"
    home = Path(os.environ.get("DAGSTER_HOME") or workdir / "dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DEMO_INSTANCE_YAML)
    print(f"bridge-lake demo in {workdir} (Dagster home {home})", file=out)
    t0 = time.perf_counter()
    made = synthesize(  # the demo's own landing zone: re-running replaces its drives
        landing_root,
        drives=drives,
        minutes=minutes,
        seed=seed,
        source=source,
        light=True,
        force=True,
    )
    print(f"  synthesized {len(made)} drives in {time.perf_counter() - t0:.1f} s:", file=out)
    for d in made:
        size = sum(f.stat().st_size for f in d.files)
        print(
            f"    {d.drive_id:32s} {d.source:5s} {len(d.files):5d} files {size / 1e6:8.1f} MB",
            file=out,
        )
    sources = {d.drive_id: d.source for d in made}
    outcomes = materialize_drives(str(landing_root), str(lake_root), sources, home, out)
    _print_summary(outcomes, out)
    _print_ui_command(home, str(lake_root), str(landing_root), out)
    _print_play_command(lake_root, out)
    return outcomes


def _print_play_command(lake_root: Path, out: TextIO) -> None:
    """The `bridge-lake play` command for the first clean scene the demo made."""
    scenes = sorted(
        p
        for p in lake_root.glob("exports/drive=*/scenes/*.json")
        if "--" not in p.name  # variants are <scene>--<variant>.json
    )
    if not scenes:
        return
    print("\nReplay a scene in Foxglove (open ws://127.0.0.1:8765 in the app):", file=out)
    print(f"  bridge-lake play {scenes[0]}", file=out)


def _print_ui_command(home: Path, lake: str, landing: str, out: TextIO) -> None:
    env = {
        "DAGSTER_HOME": str(home),
        "BRIDGE_LAKE_ROOT": _absolute(lake),
        "BRIDGE_LAKE_LANDING": _absolute(landing),
    }
    print("\nOpen the same instance in the UI (http://127.0.0.1:3000):", file=out)
    print("  " + ui_command(env), file=out)


def ui_command(env: dict[str, str]) -> str:
    """A `dagster dev` command that works from any folder: the venv's own dagster and the
    repository's workspace.yaml by absolute path (`make dev` in the repository does the same).

    It starts in DAGSTER_HOME (a subshell, so the caller's folder stays): from a folder holding
    another dagster.yaml, such as the repository's template, `dagster dev` warns that it is
    not used; and it silences SUPERSEDED_DEV. Neither warning asks anything of the user."""
    dagster = Path(sys.executable).with_name("dagster")
    workspace = Path(__file__).resolve().parents[1] / "workspace.yaml"
    target = (
        f"-w {shlex.quote(str(workspace))}" if workspace.is_file() else "-m bridge_lake.definitions"
    )
    exe = shlex.quote(str(dagster)) if dagster.is_file() else "dagster"
    settings_ = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    home = shlex.quote(env["DAGSTER_HOME"])
    quiet = f"PYTHONWARNINGS={shlex.quote(SUPERSEDED_DEV)}"
    return f"(cd {home} && {quiet} {settings_} {exe} dev {target} -h 127.0.0.1 -p 3000)"


def materialize_drives(
    landing: str, lake: str, sources: dict[str, str], home: Path, out: TextIO
) -> list[AssetOutcome]:
    """Register the drives as partitions of the instance in `home` and run `lake_job` for
    each, in-process, tagged with the drive and its source (as the sensor's runs are), so
    `dagster dev` on the same home shows them as lake_job runs."""
    from bridge_lake.definitions import ASSETS  # the Dagster graph, imported only when run

    resources = {
        "lake": LakeResource(root=lake, storage_options=settings.storage_options(lake)),
        "landing": LandingZoneResource(
            root=landing, storage_options=settings.storage_options(landing)
        ),
    }
    # the instance of `home` (its dagster.yaml), as `dagster dev` with DAGSTER_HOME=home opens it
    with dg.DagsterInstance.local_temp(tempdir=str(home)) as instance:
        # resolved inside: loading Definitions reads the defs state of the current instance
        job = dg.Definitions(assets=ASSETS, jobs=[lake_job], resources=resources).resolve_job_def(
            lake_job.name
        )
        known = set(instance.get_dynamic_partitions(drives_partitions.name))
        instance.add_dynamic_partitions(
            drives_partitions.name, [d for d in sources if d not in known]
        )
        outcomes: list[AssetOutcome] = []
        for i, (drive_id, source) in enumerate(sources.items(), 1):
            print(f"  [{i}/{len(sources)}] materializing {drive_id} ...", file=out, flush=True)
            t = time.perf_counter()
            result = job.execute_in_process(
                partition_key=drive_id,
                instance=instance,
                raise_on_error=False,
                run_config=QUIET_LOGS,
                tags={DRIVE_TAG: drive_id, SOURCE_TAG: source},
            )
            seconds = time.perf_counter() - t
            evaluations = result.get_asset_check_evaluations()
            mats = [e.materialization for e in result.get_asset_materialization_events()]
            outcomes.extend(_outcomes(mats, evaluations, drive_id, result.success, seconds))
            status = "ok" if result.success else "FAILED"
            print(f"        {status} in {seconds:.1f} s", file=out, flush=True)
    return outcomes


def launch_drives(
    landing: str, lake: str, sources: dict[str, str], home: Path, out: TextIO, *, wait: bool
) -> list[AssetOutcome]:
    """Register the drives as partitions of the instance in `home` and submit a run of
    `lake_job` for each to its run coordinator (defs/launch.py); unless `wait` is false, follow
    them to the end and gather what they recorded."""
    from bridge_lake.defs import launch

    with dg.DagsterInstance.from_config(str(home)) as instance:
        if wait and launch.queue_needs_daemon(instance):
            raise launch.LaunchError(
                f"the instance in {home} queues runs and no dagster-daemon is running for it, "
                "so they would never start: run `dagster dev` (it runs the daemon) with "
                f"DAGSTER_HOME={home}, or add --no-wait to only queue them, or leave out "
                "--launch to run them in this process"
            )
        known = set(instance.get_dynamic_partitions(drives_partitions.name))
        instance.add_dynamic_partitions(
            drives_partitions.name, [d for d in sources if d not in known]
        )
        print(f"  loading the code location {launch.LOCATION!r} ...", file=out, flush=True)
        with launch.workspace(instance) as ws:
            runs = launch.submit_drives(
                instance, ws, sources, _launch_config(landing, lake), _run_tags
            )
            how = "queued" if launch.queues(instance) else "launched at once"
            print(f"  submitted {len(runs)} runs of lake_job ({how}):", file=out)
            for r in runs:
                print(f"    {r.drive_id:32s} run {r.run_id}", file=out, flush=True)
            if not wait:
                if launch.queue_needs_daemon(instance):
                    print("  queued: they start once a dagster-daemon runs for this home "
                          "(`dagster dev`)", file=out)  # fmt: skip
                print("  not waiting (--no-wait): see them in the UI or `dagster run list`",
                      file=out)  # fmt: skip
                return []
            finished = launch.wait_for_runs(instance, runs, _status_printer(len(runs), out))
        outcomes: list[AssetOutcome] = []
        for r in runs:
            status, seconds = finished[r.run_id]
            mats, evaluations = launch.run_events(instance, r.run_id)
            ok = status == dg.DagsterRunStatus.SUCCESS
            outcomes.extend(_outcomes(mats, evaluations, r.drive_id, ok, seconds))
    return outcomes


def _launch_config(landing: str, lake: str) -> dict:
    """Run config naming the lake and landing zone (a launched run may execute in a process,
    the daemon's or a cluster's, whose environment points elsewhere), with console logs at
    WARNING (the events are in the run's event log; this process prints the progress)."""
    return {
        **QUIET_LOGS,
        "resources": {
            "lake": {"config": {"root": lake, "storage_options": settings.storage_options(lake)}},
            "landing": {
                "config": {
                    "root": landing,
                    "storage_options": settings.storage_options(landing),
                    "adtf_mapping": settings.adtf_mapping(),
                }
            },
        },
    }


def _run_tags(drive_id: str, source: str) -> dict[str, str]:
    return {DRIVE_TAG: drive_id, SOURCE_TAG: source}


def _status_printer(total: int, out: TextIO):
    finished = 0

    def report(run, status: dg.DagsterRunStatus, seconds: float) -> None:
        nonlocal finished
        if status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE,
                      dg.DagsterRunStatus.CANCELED):  # fmt: skip
            finished += 1
        print(f"  [{finished}/{total} finished] {run.drive_id}: {status.value.lower()} "
              f"after {seconds:.0f} s", file=out, flush=True)  # fmt: skip

    return report


def run_ingest(
    landing: str,
    lake: str,
    drive_ids: list[str] | None,
    out: TextIO,
    *,
    launch: bool = False,
    wait: bool = True,
) -> list[AssetOutcome]:
    """`bridge-lake ingest`: every drive folder of a landing zone (or the ones named) through
    the whole pipeline on the instance of $DAGSTER_HOME (default ./.dagster_home), in this
    process or, with `launch`, as runs the instance launches (`wait`: until they finish)."""
    zone = LandingZone(landing, settings.storage_options(landing))
    scan = zone.scan()
    for name, why in sorted(scan.rejected.items()):
        print(f"  skipped folder {name!r}: {why}", file=out)
    found = sorted(scan.drives)
    if drive_ids:
        missing = sorted(set(drive_ids) - set(found))
        if missing:
            raise BridgeLakeError(
                f"no drive folder {', '.join(missing)} in {landing} (drives: "
                f"{', '.join(found) or 'none'})"
            )
        found = [d for d in found if d in drive_ids]
    if not found:
        raise BridgeLakeError(f"no drive folders in {landing} (a drive folder holds drive.yaml)")
    sources = {d: _source(zone, d) for d in found}
    home = Path(os.environ.get("DAGSTER_HOME") or ".dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DEMO_INSTANCE_YAML)
    print(f"bridge-lake ingest: {len(found)} drives from {landing} into {lake} "
          f"(Dagster home {home})", file=out)  # fmt: skip
    if launch:  # runs in other processes: local paths must not depend on this one's cwd
        landing, lake = _absolute(landing), _absolute(lake)
        outcomes = launch_drives(landing, lake, sources, home, out, wait=wait)
    else:
        outcomes = materialize_drives(landing, lake, sources, home, out)
    if outcomes:
        _print_summary(outcomes, out)
    _print_ui_command(home, lake, landing, out)
    return outcomes


def _absolute(url: str) -> str:
    return url if "://" in url else str(Path(url).resolve())


def _source(zone: LandingZone, drive_id: str) -> str:
    try:
        meta = parse_drive_yaml(zone.read_head(drive_id, DRIVE_YAML, MAX_DRIVE_YAML_BYTES + 1))
    except (BridgeLakeError, OSError):
        return "unknown"
    return meta.source


def _outcomes(
    materializations: list[dg.AssetMaterialization],
    evaluations: list[dg.AssetCheckEvaluation],
    drive_id: str,
    ok: bool,
    seconds: float,
) -> list[AssetOutcome]:
    """One row per materialization with its checks; a failed run that materialized nothing
    still gets a row, so it is counted and the exit code says so."""
    checks: dict[str, list[tuple[str, bool, bool]]] = {}
    for ev in evaluations:
        is_error = ev.severity == dg.AssetCheckSeverity.ERROR
        checks.setdefault(ev.asset_key.to_user_string(), []).append(
            (ev.check_name, ev.passed, is_error)
        )
    out = []
    for m in materializations:
        key = m.asset_key.to_user_string()
        rows = m.metadata.get("dagster/row_count") or m.metadata.get("messages")
        path = m.metadata.get("dagster/uri")
        results = checks.get(key, [])
        out.append(
            AssetOutcome(
                drive_id,
                key,
                int(rows.value) if rows is not None else None,
                str(path.value) if path is not None else "",
                sum(ok for _, ok, _ in results),
                [name for name, passed, error in results if not passed and error],
                [name for name, passed, error in results if not passed and not error],
                ok,
                seconds,
            )
        )
    if not out and not ok:
        out.append(AssetOutcome(drive_id, "(run failed)", None, "", 0, [], [], False, seconds))
    return out


def _print_summary(outcomes: list[AssetOutcome], out: TextIO) -> None:
    header = ("drive", "asset", "rows", "checks", "path")
    rows = [
        (
            o.drive_id,
            o.asset,
            "" if o.rows is None else str(o.rows),
            f"{o.checks_passed}/{o.checks_passed + len(o.checks_failed) + len(o.checks_warned)}"
            " passed"
            + (f", FAILED: {', '.join(o.checks_failed)}" if o.checks_failed else "")
            + (f", warn: {', '.join(o.checks_warned)}" if o.checks_warned else ""),
            o.path,
        )
        for o in outcomes
    ]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    print("\nSummary", file=out)
    print("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), file=out)
    print("  " + "  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print(
            "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out
        )
    n_drives = len({o.drive_id for o in outcomes})
    failed = sum(len(o.checks_failed) for o in outcomes)
    warned = sum(len(o.checks_warned) for o in outcomes)
    print(
        f"\n  {n_drives} drives, {len(outcomes)} materializations, "
        f"{sum(o.checks_passed for o in outcomes)} checks passed, {failed} failed, "
        f"{warned} warnings",
        file=out,
    )

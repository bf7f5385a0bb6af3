"""`bridge-lake ingest` (and the demo's run): every drive of a landing zone through lake_job.

The drives become partitions of the instance in $DAGSTER_HOME and runs of lake_job, tagged
with the drive, its source and its folder's fingerprint, executed in this process one after
the other or submitted to the instance (`launch`). Their inputs are observed first (the
folder, the vehicle's rig, the ADTF stream mapping: defs/inputs.py) and only the assets
Dagster finds stale or missing, with what they feed, run (defs/staleness.py): a drive that
is up to date, however it was run before (this command, the sensor, a backfill from the
UI), is skipped; `--launch` runs a drive with anything out of date whole. SIGINT
or SIGTERM cancels the run in flight and starts no more (bridge_lake.defs.interrupts). The
summary is read back from the instance's records (bridge_lake.defs.outcomes); the runs'
full log goes to a file under $DAGSTER_HOME/logs, never to the terminal.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import dagster as dg

from bridge_lake import settings
from bridge_lake.defs import launch as launching
from bridge_lake.defs.compute_logs import open_instance
from bridge_lake.defs.inputs import current_inputs, drive_facts, observe
from bridge_lake.defs.interrupts import StopWatcher
from bridge_lake.defs.jobs import export_job, lake_job
from bridge_lake.defs.outcomes import (
    NOT_RUN,
    SKIPPED,
    AssetNode,
    DriveOutcome,
    asset_nodes,
    drive_outcome,
)
from bridge_lake.defs.partitions import drives as drives_partitions
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.defs.sensors import FINGERPRINT_TAG
from bridge_lake.defs.staleness import OutOfDate, Staleness
from bridge_lake.defs.summary import print_summary, write_log
from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone

DRIVE_TAG = "bridge_lake/drive"
SOURCE_TAG = "bridge_lake/source"
INSTANCE_YAML = "telemetry:\n  enabled: false\n"
"""A home created here keeps Dagster's default SQLite storage inside it."""
SUPERSEDED_DEV = "ignore:Function `dev_command` is superseded"
"""Dagster 1.13's `dagster dev` warns that `dg dev` (the separate dagster-dg-cli package)
supersedes it; `dagster dev` is what this project runs and documents, so that warning only
alarms."""
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
"""Dagster's console logger prints step failures with their stack traces; the summary says
what failed in one line each, and every event is in the instance and the log file."""
LOG_DIR = "logs"


@dataclass
class IngestResult:
    outcomes: list[DriveOutcome] = field(default_factory=list)
    stopped: str | None = None
    """The signal that stopped the ingest, if one did."""
    log: Path | None = None

    @property
    def exit_code(self) -> int:
        """130 when stopped by a signal, 1 when anything failed or did not run, else 0."""
        if self.stopped:
            return 130
        return 1 if any(o.bad for o in self.outcomes) else 0


@dataclass(frozen=True)
class Drive:
    drive_id: str
    source: str
    fingerprint: str
    """The landing folder's fingerprint (bridge_lake.landing.fingerprint)."""
    vehicle: str | None = None
    """drive.yaml's vehicle (which rig the drive is calibrated with), if it names one."""


def dagster_home(default: str | os.PathLike) -> Path:
    """$DAGSTER_HOME or `default`, created with a dagster.yaml if it has none."""
    home = Path(os.environ.get("DAGSTER_HOME") or default).resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(INSTANCE_YAML)
    return home


def scan_landing(landing: str, drive_ids: list[str] | None, out: TextIO) -> list[Drive]:
    """The drive folders of a landing zone (or the ones named), with source and fingerprint;
    a missing landing folder, or a named drive that is not there, is an error."""
    zone = LandingZone(landing, settings.storage_options(landing))
    if not zone.fs.isdir(zone.base):
        raise BridgeLakeError(f"landing folder {landing} is missing (no such folder)")
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
    out = []
    for d in found:
        vehicle, source = drive_facts(zone, d)
        out.append(Drive(d, source or "unknown", scan.drives[d], vehicle))
    return out


def run_ingest(
    landing: str,
    lake: str,
    drive_ids: list[str] | None,
    out: TextIO,
    *,
    launch: bool = False,
    wait: bool = True,
    force: bool = False,
) -> IngestResult:
    """`bridge-lake ingest`: every drive folder of a landing zone (or the ones named) through
    the whole pipeline on the instance of $DAGSTER_HOME (default ./.dagster_home), in this
    process or, with `launch`, as runs the instance launches (`wait`: until they finish)."""
    found = scan_landing(landing, drive_ids, out)
    home = dagster_home(".dagster_home")
    print(f"bridge-lake ingest: {len(found)} drives from {landing} into {lake} "
          f"(Dagster home {home})", file=out)  # fmt: skip
    if launch:  # runs in other processes: local paths must not depend on this one's cwd
        landing, lake = absolute(landing), absolute(lake)
    result = run_drives(landing, lake, found, home, out, launch=launch, wait=wait, force=force)
    print_ui_command(home, lake, landing, out)
    return result


def run_drives(
    landing: str,
    lake: str,
    found: list[Drive],
    home: Path,
    out: TextIO,
    *,
    launch: bool = False,
    wait: bool = True,
    force: bool = False,
) -> IngestResult:
    """Register the drives as partitions, observe their inputs, run what is out of date of
    each (everything with `force`), and print the summary of what the instance recorded."""
    from bridge_lake.definitions import LAKE_ASSETS  # the Dagster graph, imported when run
    from bridge_lake.definitions import defs as definitions

    nodes = asset_nodes(LAKE_ASSETS)
    keys = [dg.AssetKey.from_user_string(n.key) for n in nodes]
    tags = {
        d.drive_id: {DRIVE_TAG: d.drive_id, SOURCE_TAG: d.source, FINGERPRINT_TAG: d.fingerprint}
        for d in found
    }
    result = IngestResult()
    with open_instance(home) as instance:  # no tail/watch_orphans children (compute_logs)
        with StopWatcher(instance, lambda s: print(s, file=out, flush=True)) as watcher:
            known = set(instance.get_dynamic_partitions(drives_partitions.name))
            instance.add_dynamic_partitions(
                drives_partitions.name, [d.drive_id for d in found if d.drive_id not in known]
            )
            inputs = {d.drive_id: (d.fingerprint, d.vehicle, d.source) for d in found}
            observe(instance, current_inputs(inputs, settings.adtf_mapping()))
            exists = Lake(lake, settings.storage_options(lake)).fs.exists
            stale = Staleness(instance, definitions.resolve_asset_graph(), keys, exists)
            plan = {d.drive_id: _plan(stale, d.drive_id, keys, force) for d in found}
            todo = [d for d, p in plan.items() if p.keys]
            for d, p in plan.items():
                if not p.keys:
                    print(f"  {d}: up to date (its assets' code and inputs are unchanged): "
                          "skipped (--force runs it again)", file=out)  # fmt: skip
                elif not force and p.why:
                    print(f"  {d}: {p.summary()}", file=out)
            selections = {d: None if plan[d].keys == set(keys) else plan[d].keys for d in todo}
            batch = Batch(instance, landing, lake, todo, tags, nodes, out, watcher, selections)
            ran = launch_drives(batch, wait) if launch else materialize_drives(batch)
            if ran is None:  # --no-wait: nothing to summarize yet
                return result
            by_drive = {o.drive_id: o for o in ran}
            for d in found:
                if not plan[d.drive_id].keys:
                    reason = "up to date: its assets' code and inputs are unchanged"
                    result.outcomes.append(DriveOutcome(d.drive_id, SKIPPED, reason=reason))
                else:
                    result.outcomes.append(by_drive[d.drive_id])
            result.stopped = watcher.stopped
            runs = [(o.drive_id, o.run_id) for o in result.outcomes if o.run_id]
            if runs:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                result.log = write_log(instance, runs, home / LOG_DIR / f"ingest-{stamp}.log")
        print_summary(result.outcomes, out, home=home, log=result.log)
    if result.stopped:
        print(f"Stopped by {result.stopped}: run the same command again to resume "
              "(drives done are skipped).", file=out)  # fmt: skip
    return result


def _plan(stale: Staleness, drive_id: str, keys: list[dg.AssetKey], force: bool) -> OutOfDate:
    """What of the drive runs: what is out of date, or, with `force`, everything."""
    return OutOfDate(frozenset(keys), {}) if force else stale.drive(drive_id)


def _not_started(drive_id: str, stopped: str | None) -> DriveOutcome:
    return DriveOutcome(drive_id, NOT_RUN, reason=f"not started: the ingest got {stopped}")


@dataclass(frozen=True)
class Batch:
    """The drives one ingest runs (`todo`, with the run tags of each) and what running them
    needs: the instance, where they come from and go, the assets whose outcome is reported,
    where progress is printed and the watcher that says stop."""

    instance: dg.DagsterInstance
    landing: str
    lake: str
    todo: list[str]
    tags: Mapping[str, Mapping[str, str]]
    nodes: list[AssetNode]
    out: TextIO
    watcher: StopWatcher
    selections: Mapping[str, frozenset[dg.AssetKey] | None] = field(default_factory=dict)
    """drive → the assets its run materializes (None or absent: the whole job)."""
    job: str = lake_job.name


def export_drives(
    home: Path, landing: str, lake: str, drives: list[Drive], out: TextIO
) -> list[DriveOutcome]:
    """The on-demand whole-drive export (export_job) of each drive, in this process, on the
    instance in `home`: what the demo adds to the default layers."""
    from bridge_lake.definitions import ON_DEMAND

    tags = {d.drive_id: {DRIVE_TAG: d.drive_id, SOURCE_TAG: d.source} for d in drives}
    with open_instance(home) as instance:
        with StopWatcher(instance, lambda s: print(s, file=out, flush=True)) as watcher:
            todo = [d.drive_id for d in drives]
            nodes = asset_nodes(ON_DEMAND)
            batch = Batch(
                instance, landing, lake, todo, tags, nodes, out, watcher, job=export_job.name
            )
            return materialize_drives(batch)


def materialize_drives(batch: Batch) -> list[DriveOutcome]:
    """Run the batch's job (lake_job) for each drive in this process, on the batch's
    instance, tagged as the sensor's runs are, so `dagster dev` on the same home shows them;
    stop when the watcher says so."""
    from bridge_lake.definitions import ASSETS

    lake, landing = batch.lake, batch.landing
    resources = {
        "lake": LakeResource(root=lake, storage_options=settings.storage_options(lake)),
        "landing": LandingZoneResource(
            root=landing, storage_options=settings.storage_options(landing)
        ),
    }
    # resolved inside: loading Definitions reads the defs state of the current instance
    job = dg.Definitions(
        assets=ASSETS, jobs=[lake_job, export_job], resources=resources
    ).resolve_job_def(batch.job)
    instance, todo, out, watcher = batch.instance, batch.todo, batch.out, batch.watcher
    outcomes = []
    for i, drive_id in enumerate(todo, 1):
        if watcher.stopped:
            outcomes.append(_not_started(drive_id, watcher.stopped))
            continue
        print(f"  [{i}/{len(todo)}] {drive_id} ...", end="", file=out, flush=True)
        run_id = str(uuid.uuid4())
        t = time.perf_counter()
        selection = batch.selections.get(drive_id)
        try:
            with watcher.running(run_id):
                job.execute_in_process(
                    partition_key=drive_id,
                    asset_selection=sorted(selection) if selection is not None else None,
                    instance=instance,
                    raise_on_error=False,
                    run_config=QUIET_LOGS,
                    tags=batch.tags[drive_id],
                    run_id=run_id,
                )
        except KeyboardInterrupt:  # the stop request came while the run was set up
            if not watcher.stopped:
                raise
        if instance.get_run_by_id(run_id) is None:
            outcomes.append(_not_started(drive_id, watcher.stopped))
            print(" not started", file=out, flush=True)
            continue
        seconds = time.perf_counter() - t
        outcome = drive_outcome(instance, run_id, drive_id, batch.nodes, seconds, selection)
        outcomes.append(outcome)
        print(f" {outcome.status} in {outcome.seconds:.1f} s", file=out, flush=True)
    return outcomes


def launch_drives(batch: Batch, wait: bool) -> list[DriveOutcome] | None:
    """Submit a run of lake_job per drive to the instance's run coordinator (defs/launch.py);
    unless `wait` is false, follow them to the end (canceling them through the coordinator
    when the watcher says stop) and read back what they recorded. None when not waiting."""
    instance, todo, out, watcher = batch.instance, batch.todo, batch.out, batch.watcher
    if wait and todo and launching.queue_needs_daemon(instance):
        raise launching.LaunchError(
            f"the instance in {instance.root_directory} queues runs and no dagster-daemon is "
            "running for it, so they would never start: run `dagster-daemon run -w "
            "workspace.yaml` (a deployment) or `dagster dev` (it runs one) with the same "
            "DAGSTER_HOME, or add --no-wait to only queue them, or leave out --launch to run "
            "them in this process"
        )
    if not todo:
        return []
    print(f"  loading the code location {launching.LOCATION!r} ...", file=out, flush=True)
    with launching.workspace(instance) as ws:
        if watcher.stopped:
            return [_not_started(d, watcher.stopped) for d in todo]
        config = _launch_config(batch.landing, batch.lake)
        runs = launching.submit_drives(instance, ws, todo, config, batch.tags)
        how = "queued" if launching.queues(instance) else "launched at once"
        print(f"  submitted {len(runs)} runs of lake_job ({how}):", file=out)
        for r in runs:
            print(f"    {r.drive_id:32s} run {r.run_id}", file=out, flush=True)
        if not wait:
            if launching.queue_needs_daemon(instance):
                print("  queued: they start once a dagster-daemon runs for this home "
                      "(`dagster-daemon run -w workspace.yaml`, or `dagster dev`)",
                      file=out)  # fmt: skip
            print("  not waiting (--no-wait): see them in the UI or `dagster run list`",
                  file=out)  # fmt: skip
            return None
        finished = launching.wait_for_runs(
            instance, runs, _status_printer(len(runs), out), stop=lambda: watcher.stopped
        )
    return [
        drive_outcome(instance, r.run_id, r.drive_id, batch.nodes, finished[r.run_id][1])
        for r in runs
    ]


def _launch_config(landing: str, lake: str) -> dict:
    """Run config naming the lake and landing zone (a launched run may execute in a process,
    the daemon's or a cluster's, whose environment points elsewhere), with the console
    logger quiet (the events are in the run's event log; this process prints the progress)."""
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


def _status_printer(total: int, out: TextIO):
    finished = 0

    def report(run: launching.Submitted, status: dg.DagsterRunStatus, seconds: float) -> None:
        nonlocal finished
        if status in launching.FINISHED:
            finished += 1
        print(f"  [{finished}/{total} finished] {run.drive_id}: {status.value.lower()} "
              f"after {seconds:.0f} s", file=out, flush=True)  # fmt: skip

    return report


def print_ui_command(home: Path, lake: str, landing: str, out: TextIO) -> None:
    print("\nOpen the same instance in the UI (http://127.0.0.1:3000):", file=out)
    print("  " + ui_command(ui_env(home, lake, landing)), file=out)


def ui_env(home: Path, lake: str, landing: str) -> dict[str, str]:
    """DAGSTER_HOME, every BRIDGE_LAKE_* setting of this process (rigs, mapping, S3 endpoint,
    executor...), and the lake and landing zone this command used."""
    env = {"DAGSTER_HOME": str(home)}
    env |= {k: v for k, v in sorted(os.environ.items()) if k.startswith("BRIDGE_LAKE_")}
    env |= {"BRIDGE_LAKE_ROOT": absolute(lake), "BRIDGE_LAKE_LANDING": absolute(landing)}
    return env


def ui_command(env: dict[str, str]) -> str:
    """A `dagster dev` command that works from any folder: the venv's own dagster and the
    repository's workspace.yaml by absolute path (`make dev` in the repository does the same).

    It starts in DAGSTER_HOME (a subshell, so the caller's folder stays): from a folder holding
    another dagster.yaml, such as the repository's template, `dagster dev` warns that it is
    not used; and it silences SUPERSEDED_DEV. Neither warning asks anything of the user."""
    dagster = Path(sys.executable).with_name("dagster")
    workspace = launching.WORKSPACE
    target = (
        f"-w {shlex.quote(str(workspace))}" if workspace.is_file() else "-m bridge_lake.definitions"
    )
    exe = shlex.quote(str(dagster)) if dagster.is_file() else "dagster"
    settings_ = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    home = shlex.quote(env["DAGSTER_HOME"])
    quiet = f"PYTHONWARNINGS={shlex.quote(SUPERSEDED_DEV)}"
    return f"(cd {home} && {quiet} {settings_} {exe} dev {target} -h 127.0.0.1 -p 3000)"


def absolute(url: str) -> str:
    return url if "://" in url else str(Path(url).resolve())

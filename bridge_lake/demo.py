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
    env = {
        "DAGSTER_HOME": str(home),
        "BRIDGE_LAKE_ROOT": str(lake_root),
        "BRIDGE_LAKE_LANDING": str(landing_root),
    }
    print("\nOpen the same instance in the UI (http://127.0.0.1:3000):", file=out)
    print("  " + ui_command(env), file=out)
    return outcomes


def ui_command(env: dict[str, str]) -> str:
    """A `dagster dev` command that works from any folder: the venv's own dagster and the
    repository's workspace.yaml by absolute path (`make dev` in the repository does the same)."""
    dagster = Path(sys.executable).with_name("dagster")
    workspace = Path(__file__).resolve().parents[1] / "workspace.yaml"
    target = (
        f"-w {shlex.quote(str(workspace))}" if workspace.is_file() else "-m bridge_lake.definitions"
    )
    exe = shlex.quote(str(dagster)) if dagster.is_file() else "dagster"
    settings_ = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"{settings_} {exe} dev {target} -h 127.0.0.1 -p 3000"


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
            outcomes.extend(_outcomes(result, drive_id, seconds))
            status = "ok" if result.success else "FAILED"
            print(f"        {status} in {seconds:.1f} s", file=out, flush=True)
    return outcomes


def run_ingest(landing: str, lake: str, drive_ids: list[str] | None, out: TextIO) -> list:
    """`bridge-lake ingest`: every drive folder of a landing zone (or the ones named) through
    the whole pipeline on the instance of $DAGSTER_HOME (default ./.dagster_home)."""
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
    outcomes = materialize_drives(landing, lake, sources, home, out)
    _print_summary(outcomes, out)
    return outcomes


def _source(zone: LandingZone, drive_id: str) -> str:
    try:
        meta = parse_drive_yaml(zone.read_head(drive_id, DRIVE_YAML, MAX_DRIVE_YAML_BYTES + 1))
    except (BridgeLakeError, OSError):
        return "unknown"
    return meta.source


def _outcomes(
    result: dg.ExecuteInProcessResult, drive_id: str, seconds: float
) -> list[AssetOutcome]:
    checks: dict[str, list[tuple[str, bool, bool]]] = {}
    for ev in result.get_asset_check_evaluations():
        is_error = ev.severity == dg.AssetCheckSeverity.ERROR
        checks.setdefault(ev.asset_key.to_user_string(), []).append(
            (ev.check_name, ev.passed, is_error)
        )
    out = []
    for mat in result.get_asset_materialization_events():
        m = mat.materialization
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
                [name for name, ok, error in results if not ok and error],
                [name for name, ok, error in results if not ok and not error],
                result.success,
                seconds,
            )
        )
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

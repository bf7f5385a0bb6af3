"""`bridge-lake demo`: synthesize drives and run the whole pipeline on the embedded default.

Runs in-process against the Dagster instance in $DAGSTER_HOME (or `<workdir>/dagster_home`),
so `dagster dev` pointed at the same home afterwards shows every run, materialization and
check result of the demo.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import dagster as dg

from bridge_lake.defs.partitions import drives as drives_partitions
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.synth import synthesize

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
    minutes: float = 0.5,
    seed: int = 0,
    source: str = "all",
    out: TextIO,
) -> list[AssetOutcome]:
    from bridge_lake.definitions import ASSETS  # the Dagster graph, imported only when run

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
    resources = {
        "lake": LakeResource(root=str(lake_root)),
        "landing": LandingZoneResource(root=str(landing_root)),
    }
    # the instance of `home` (its dagster.yaml), as `dagster dev` with DAGSTER_HOME=home opens it
    with dg.DagsterInstance.local_temp(tempdir=str(home)) as instance:
        known = set(instance.get_dynamic_partitions(drives_partitions.name))
        instance.add_dynamic_partitions(
            drives_partitions.name, [d.drive_id for d in made if d.drive_id not in known]
        )
        outcomes: list[AssetOutcome] = []
        for i, d in enumerate(made, 1):
            print(f"  [{i}/{len(made)}] materializing {d.drive_id} ...", file=out, flush=True)
            t = time.perf_counter()
            result = dg.materialize(
                ASSETS,
                partition_key=d.drive_id,
                instance=instance,
                resources=resources,
                raise_on_error=False,
                run_config=QUIET_LOGS,
            )
            seconds = time.perf_counter() - t
            outcomes.extend(_outcomes(result, d.drive_id, seconds))
            status = "ok" if result.success else "FAILED"
            print(f"        {status} in {seconds:.1f} s", file=out, flush=True)
    _print_summary(outcomes, out)
    env = {
        "DAGSTER_HOME": str(home),
        "BRIDGE_LAKE_ROOT": str(lake_root),
        "BRIDGE_LAKE_LANDING": str(landing_root),
    }
    print("\nOpen the same instance in the UI (http://127.0.0.1:3000):", file=out)
    print(
        "  "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + " dagster dev -w workspace.yaml",
        file=out,
    )
    return outcomes


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

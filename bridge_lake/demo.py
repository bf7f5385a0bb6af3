"""`bridge-lake demo`: synthesize drives and run the whole pipeline on the embedded default.

Runs in-process against the Dagster instance in $DAGSTER_HOME (or `<workdir>/dagster_home`)
through the same runner as `bridge-lake ingest` (bridge_lake.defs.ingest), so `dagster dev`
pointed at the same home afterwards shows every run, materialization and check result of the
demo, and the summary is the one ingest prints. Then the layers beside the lake: the online
bridge follows a re-recording of the ADTF drive and crash recovery rebuilds a cut copy of it
(bridge_lake.demo_online); the demo ends with the `bridge-lake play` command for a scene.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bridge_lake.defs.ingest import (
    IngestResult,
    dagster_home,
    export_drives,
    print_ui_command,
    run_drives,
    scan_landing,
)
from bridge_lake.defs.outcomes import DriveOutcome
from bridge_lake.demo_online import follow_and_recover
from bridge_lake.synth import SynthDrive, synthesize

QUERY = "select * from drive_summary"
"""The first question for the lake (README: From the demo to your own drives)."""


def run_demo(
    workdir: Path,
    *,
    drives: int = 2,
    minutes: float = 1.5,
    seed: int = 0,
    source: str = "all",
    out: TextIO,
) -> DemoResult:
    workdir = workdir.resolve()
    landing_root, lake_root = workdir / "landing", workdir / "lake"
    home = dagster_home(workdir / "dagster_home")
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
    found = scan_landing(str(landing_root), [d.drive_id for d in made], out)
    result = run_drives(str(landing_root), str(lake_root), found, home, out)
    print("\nOn demand: the whole-drive export of each drive (export_job; `bridge-lake "
          "export` does the same outside Dagster):", file=out)  # fmt: skip
    exports = export_drives(home, str(landing_root), str(lake_root), found, out)
    for o in exports:
        for p in (p for a in o.assets for p in a.problems):
            print(f"      {p}", file=out)
    online_ok = _online(workdir, made, exports, out)
    print_ui_command(home, str(lake_root), str(landing_root), out)
    _print_next(result, exports, lake_root, out)
    return DemoResult(result, exports, online_ok)


@dataclass
class DemoResult:
    ingest: IngestResult
    exports: list[DriveOutcome]
    """the on-demand whole-drive export of each drive"""
    online_ok: bool
    """the live bridge agreed with the export and the recovery kept samples (or no ADTF
    drive was exported to try them on)"""

    @property
    def exit_code(self) -> int:
        """The ingest's exit code; 1 when it is 0 but an export failed or the online steps
        disagreed."""
        bad = any(o.bad for o in self.exports) or not self.online_ok
        return self.ingest.exit_code or (1 if bad else 0)


def _exported(exports: list[DriveOutcome]) -> dict[str, str]:
    """drive → its MCAP export."""
    return {o.drive_id: a.path for o in exports for a in o.assets if a.path.endswith(".mcap")}


def _online(
    workdir: Path, made: list[SynthDrive], exports: list[DriveOutcome], out: TextIO
) -> bool:
    """The online bridge and crash recovery on the first ADTF drive exported."""
    exported = _exported(exports)
    for d in made:
        if d.source == "adtf" and d.drive_id in exported:
            return follow_and_recover(workdir, d.path, Path(exported[d.drive_id]), out)
    return True


def _print_next(result: IngestResult, exports: list[DriveOutcome], lake: Path, out: TextIO) -> None:
    """Where to go from here: the reports, `query`, `ingest` on your own drives, `play`."""
    reports = sorted({a.report for o in result.outcomes for a in o.assets if a.report})
    mcaps = list(_exported(exports).values())
    query = shlex.join(["bridge-lake", "query", QUERY, "--lake", str(lake)])
    print("\nNext:", file=out)
    for r in reports:
        print(f"  open the report   {r}", file=out)
    print(f"  ask the lake      {query}", file=out)
    print("  your own drives   bridge-lake ingest LANDING --lake LAKE   (README: Running it on "
          "your data)", file=out)  # fmt: skip
    if not _print_play_command(lake, out) and mcaps:
        print(f"  play a drive      bridge-lake play {shlex.quote(mcaps[0])}", file=out)


def _print_play_command(lake_root: Path, out: TextIO) -> bool:
    """The `bridge-lake play` command for the first clean scene the demo made; False when
    it made none."""
    scenes = sorted(
        p
        for p in lake_root.glob("exports/drive=*/scenes/*.json")
        if "--" not in p.name  # variants are <scene>--<variant>.json
    )
    if not scenes:
        return False
    print("  replay a scene    (open ws://127.0.0.1:8765 in Foxglove)", file=out)
    print(f"                    bridge-lake play {scenes[0]}", file=out)
    return True

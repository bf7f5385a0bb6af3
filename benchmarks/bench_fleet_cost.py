"""What a raw GB costs through every default layer: CPU seconds, lake bytes, peak RSS, against
the code before issue 30, side by side.

    python benchmarks/bench_fleet_cost.py --smoke     # CI: a 0.3-minute light ADTF drive
    python benchmarks/bench_fleet_cost.py             # the issue's figure: 10 minutes of each
    python benchmarks/bench_fleet_cost.py --minutes 3 --sources nclt --rounds 1

For each source a synthetic drive (seed 7) is made once; then, alternating ours and the
baseline for --rounds rounds, `bridge-lake ingest` runs it in a child process on a fresh
Dagster home (SQLite, in-process steps: what a user's ingest is) into a fresh lake. Each
code is a `git archive` of its commit (ours: HEAD; the baseline: --baseline, by default
8bfc156, the code this issue measured) put first on PYTHONPATH, with this venv's packages.
wait4 gives the child's CPU time (user + system) and peak RSS; the lake's bytes are counted
per layer on disk; each step's wall time and the gaps between steps are read from the run's
event log (in-process steps run one after the other in one thread, so the steps' walls add
up to the run and the remainder is the command's fixed cost: imports, loading the
definitions, Dagster's event storage, the summary).

The floor is our readers alone on the same files in one process: every ADTF sample
(`open_dat(...).samples()`), or for NCLT every Velodyne hit, Hokuyo record and CSV row
through the readers the normalized layer uses, the camera files read as bytes.

The baseline (8bfc156) also writes the whole-drive MCAP in its default job; ours makes it
on demand (`bridge-lake export`), so its cost is measured apart as one more figure.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from figures import figure

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
GB = 1e9
BASELINE = "8bfc156"
LAYERS = ("raw", "normalized", "calibrated", "scenes", "exports")


@dataclass
class Run:
    code: str
    cpu_s: float
    wall_s: float
    peak_rss_mb: float
    lake: dict[str, int]
    steps: dict[str, float] = field(default_factory=dict)
    max_gap_s: float = 0.0
    """the longest time between one step's end and the next one's start"""

    @property
    def lake_bytes(self) -> int:
        return sum(self.lake.values())


def source_tree(rev: str, into: Path) -> Path:
    """`rev`'s files (git archive) in a folder of their own, for PYTHONPATH."""
    target = into / f"src-{rev}"
    if not target.exists():
        target.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def synthesize(landing: Path, source: str, minutes: float, light: bool) -> Path:
    args = ["--out", str(landing), "--drives", "1", "--minutes", str(minutes), "--seed", "7"]
    args += ["--source", source] + (["--light"] if light else [])
    subprocess.run([str(BIN / "bridge-lake"), "synth", *args], check=True, capture_output=True)
    (drive,) = [p for p in landing.iterdir() if p.is_dir()]
    return drive


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def lake_layers(lake: Path) -> dict[str, int]:
    """Bytes per layer; scene sets live under exports/drive=*/scenes, counted as scenes."""
    sizes = {layer: 0 for layer in LAYERS}
    for p in lake.rglob("*"):
        if not p.is_file():
            continue
        parts = p.relative_to(lake).parts
        layer = "scenes" if "scenes" in parts else parts[0]
        sizes[layer if layer in sizes else "raw"] += p.stat().st_size
    return sizes


def step_times(home: Path) -> tuple[dict[str, float], float]:
    """Each step's wall time and the longest gap between steps, from the run's event log
    (SQLite: the ingest's instance keeps one database per run)."""
    steps: dict[str, float] = {}
    gap, last_end = 0.0, None
    for db in (home / "history" / "runs").glob("*.db"):
        if db.name == "index.db":
            continue
        with sqlite3.connect(db) as con:
            rows = con.execute(
                "select dagster_event_type, step_key, timestamp from event_logs where "
                "dagster_event_type in ('STEP_START', 'STEP_SUCCESS') order by id"
            ).fetchall()
        started: dict[str, datetime.datetime] = {}
        for kind, step, stamp in rows:
            t = datetime.datetime.fromisoformat(stamp)
            if kind == "STEP_START":
                started[step] = t
                if last_end is not None:
                    gap = max(gap, (t - last_end).total_seconds())
            else:
                steps[step] = steps.get(step, 0.0) + (t - started[step]).total_seconds()
                last_end = t
        last_end = None
    return steps, gap


def ingest(code: str, src: Path, landing: Path, work: Path) -> Run:
    """One `bridge-lake ingest` of the landing zone by the code in `src`, fresh home and lake."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{code}-", dir=work))
    home, lake = run_dir / "home", run_dir / "lake"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(src)}
    env = {k: v for k, v in env.items() if not k.startswith("BRIDGE_LAKE_")}
    cmd = [sys.executable, "-m", "bridge_lake.cli", "ingest", str(landing), "--lake", str(lake)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=run_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{code}: ingest failed:\n{out[-3000:]}")
    steps, gap = step_times(home)
    run = Run(
        code,
        usage.ru_utime + usage.ru_stime,
        wall,
        usage.ru_maxrss / 1024,
        lake_layers(lake),
        steps,
        gap,
    )
    shutil.rmtree(run_dir)
    return run


def export_cost(src: Path, landing: Path, work: Path) -> tuple[float, int]:
    """Ours: ingest, then the on-demand whole-drive MCAP; the export's CPU s and bytes."""
    run_dir = Path(tempfile.mkdtemp(prefix="export-", dir=work))
    home, lake = run_dir / "home", run_dir / "lake"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(src)}
    py = [sys.executable, "-m", "bridge_lake.cli"]
    subprocess.run([*py, "ingest", str(landing), "--lake", str(lake)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    (drive,) = [p.name for p in landing.iterdir() if p.is_dir()]
    out = run_dir / "drive.mcap"
    cmd = [*py, "export", "--lake", str(lake), "--drive", drive, "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"export failed: {err[-2000:]}")
    size = out.stat().st_size
    shutil.rmtree(run_dir)
    return usage.ru_utime + usage.ru_stime, size


def floor_cpu(drive: Path, source: str) -> float:
    """CPU s of our readers alone over the drive's files (module docstring), in a child."""
    code = FLOOR_ADTF if source == "adtf" else FLOOR_NCLT
    proc = subprocess.run(
        [sys.executable, "-c", code, str(drive)], check=True, capture_output=True, text=True
    )
    return float(proc.stdout.split()[-1])


FLOOR_ADTF = """
import sys, time
from pathlib import Path
from bridge_lake.formats.adtf.reader import open_dat
t = time.process_time()
for path in sorted(Path(sys.argv[1]).rglob("*.dat")):
    with open_dat(path) as dat:
        for _ in dat.samples():
            pass
print(time.process_time() - t)
"""
FLOOR_NCLT = """
import sys, time
from pathlib import Path
from bridge_lake.formats.nclt.csv_tables import load_table
from bridge_lake.formats.nclt.hokuyo import iter_hokuyo
from bridge_lake.formats.nclt.kinds import CSV_KINDS
from bridge_lake.formats.nclt.velodyne import iter_velodyne_packets
t = time.process_time()
root = Path(sys.argv[1])
for path in sorted(root.rglob("*")):
    if not path.is_file():
        continue
    stem = path.stem.split("_20")[0]
    if path.name == "velodyne_hits.bin":
        for _ in iter_velodyne_packets(path, threads=1):
            pass
    elif path.name in ("hokuyo_30m.bin", "hokuyo_4m.bin"):
        for _ in iter_hokuyo(path.stem, path):
            pass
    elif path.suffix == ".csv" and stem in (*CSV_KINDS, "groundtruth", "cov"):
        load_table(stem, path)
    elif "velodyne_sync" not in path.parts:  # the stream the default layers skip
        path.read_bytes()
print(time.process_time() - t)
"""


def report(source: str, raw: int, ours: list[Run], base: list[Run], floor: float) -> None:
    gb = raw / GB
    best_o = min(ours, key=lambda r: r.cpu_s)
    best_b = min(base, key=lambda r: r.cpu_s)
    print(f"\n## {source}: raw {raw / 1e6:,.1f} MB")
    print("| code | CPU s | CPU s per raw GB | wall s | peak RSS MB | lake MB | lake / raw |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in [*base, *ours]:
        print(
            f"| {r.code} | {r.cpu_s:.1f} | {r.cpu_s / gb:.1f} | {r.wall_s:.1f} | "
            f"{r.peak_rss_mb:.0f} | {r.lake_bytes / 1e6:,.1f} | {r.lake_bytes / raw:.2f} |"
        )
    for r in (best_b, best_o):
        layers = ", ".join(f"{k} {v / 1e6:,.1f}" for k, v in r.lake.items() if v)
        steps = ", ".join(
            f"{k} {v:.1f} s ({v / gb:.1f}/GB)"
            for k, v in sorted(r.steps.items(), key=lambda kv: -kv[1])
        )
        fixed = r.wall_s - sum(r.steps.values())
        print(
            f"- {r.code}: lake MB {layers}; steps (wall) {steps}; rest of the command {fixed:.1f} s"
        )
    print(f"- floor (readers alone): {floor:.2f} CPU s ({floor / gb:.1f}/GB)")
    figure(f"{source} CPU s per raw GB, default layers", best_o.cpu_s / gb, best_b.cpu_s / gb,
           "CPU s/GB", more_is_better=False, baseline_name=BASELINE,
           peak_rss_mb=best_o.peak_rss_mb)  # fmt: skip
    figure(f"{source} lake / raw", best_o.lake_bytes / raw, best_b.lake_bytes / raw, "x",
           more_is_better=False, baseline_name=BASELINE)  # fmt: skip
    figure(f"{source} peak RSS", best_o.peak_rss_mb, best_b.peak_rss_mb, "MB",
           more_is_better=False, baseline_name=BASELINE)  # fmt: skip
    figure(f"{source} longest gap between steps", best_o.max_gap_s, best_b.max_gap_s, "s",
           more_is_better=False, baseline_name=BASELINE)  # fmt: skip
    figure(f"{source} readers alone", floor / gb, None, "CPU s/GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="a 0.3-minute light ADTF drive only (CI)"
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sources", nargs="+", default=["adtf", "nclt"])
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per code")
    parser.add_argument("--baseline", default=BASELINE, help="commit to compare against")
    parser.add_argument("--workdir", type=Path, help="keep sources and drives here")
    args = parser.parse_args()
    minutes, rounds = (0.3, 1) if args.smoke else (args.minutes, args.rounds)
    sources = ["adtf"] if args.smoke else args.sources  # CI: the side-by-side path, once
    work = args.workdir or Path(tempfile.mkdtemp(prefix="fleet-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        src = {"ours": source_tree("HEAD", work), args.baseline: source_tree(args.baseline, work)}
        print(f"load {os.getloadavg()[0]:.1f}; {minutes} min per drive, {rounds} rounds")
        for source in sources:
            landing = work / f"landing-{source}-{minutes}"
            drive = landing / "x"
            if not landing.exists():
                drive = synthesize(landing, source, minutes, light=args.smoke)
            else:
                (drive,) = [p for p in landing.iterdir() if p.is_dir()]
            raw = tree_bytes(drive)
            runs: dict[str, list[Run]] = {"ours": [], args.baseline: []}
            for i in range(rounds):
                order = ("ours", args.baseline) if i % 2 else (args.baseline, "ours")
                for code in order:
                    runs[code].append(ingest(code, src[code], landing, work))
                    r = runs[code][-1]
                    print(f"  {source} {code}: {r.cpu_s:.1f} CPU s, {r.wall_s:.1f} s wall, "
                          f"lake {r.lake_bytes / 1e6:,.1f} MB (load {os.getloadavg()[0]:.1f})",
                          flush=True)  # fmt: skip
            floor = floor_cpu(drive, source)
            report(source, raw, runs["ours"], runs[args.baseline], floor)
            cpu, size = export_cost(src["ours"], landing, work)
            print(f"- ours, on demand: whole-drive MCAP {size / 1e6:,.1f} MB "
                  f"({size / raw:.2f}x raw) in {cpu:.1f} CPU s ({cpu / (raw / GB):.1f}/GB)")  # fmt: skip
            figure(f"{source} on-demand export", cpu / (raw / GB), None, "CPU s/GB")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

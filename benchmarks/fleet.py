"""A synthetic fleet backfilled through Dagster, one drive at a time: wall time and peak RSS.

    python benchmarks/fleet.py --workdir /tmp/fleet            # the plan below (hours)
    python benchmarks/fleet.py --workdir /tmp/fleet --report   # markdown table of the runs
    python benchmarks/fleet.py --workdir /tmp/fleet --redo adtf-test-vehicle-s10000

Each drive is synthesized (`bridge-lake synth`, its own process) into the landing zone
`<workdir>/landing`, then `bridge-lake ingest --drive ID` runs lake_job for it on the Dagster
instance `<workdir>/home` (SQLite) into the lake `<workdir>/lake`, in a child process whose
resources this script collects with wait4: wall time, peak RSS (ru_maxrss of the ingest
process; it starts none of its own) and CPU time. The host's load average is sampled
every second, so a figure can be read against the machine's business. After a run the
drive's landing folder is deleted (a seed gives the same bytes again); lake partitions of
drives above --prune-gb are deleted too (sizes recorded first), to bound the disk used.
Results are appended to `<workdir>/runs.jsonl`; a drive already there is skipped, so the
script resumes where it stopped.

The children run the committed code: HEAD is exported (`git archive`) into
`<workdir>/src-<rev>` and put first on PYTHONPATH, so edits in progress in the working tree
do not reach a run that lasts an hour; the rev is recorded with each run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
GB = 1e9

PLAN: tuple[tuple[str, float], ...] = (
    ("nclt", 0.5),
    ("adtf", 1),
    ("nclt", 0.5),
    ("adtf", 1),
    ("nclt", 1),
    ("adtf", 2),
    ("nclt", 1),
    ("adtf", 2),
    ("nclt", 1.5),
    ("adtf", 3),
    ("nclt", 2),
    ("adtf", 5),
    ("nclt", 2),
    ("adtf", 5),
    ("nclt", 3),
    ("adtf", 10),
    ("nclt", 5),
    ("adtf", 20),
    ("nclt", 10),
    ("adtf", 30),
    ("adtf", 60),
)
"""(source, minutes) per drive, short ones first; drive i gets seed 10 + i."""


@dataclass(frozen=True)
class Planned:
    source: str
    minutes: float
    seed: int

    @property
    def drive_id(self) -> str:
        # bridge_lake.synth names the first drive of a `synth --drives 1` run by seed * 1000
        if self.source == "nclt":
            return f"nclt-2012-01-08-s{self.seed * 1000}"
        return f"adtf-test-vehicle-s{self.seed * 1000}"


def plan() -> list[Planned]:
    return [Planned(src, m, 10 + i) for i, (src, m) in enumerate(PLAN)]


def tree_bytes(path: Path, pattern: str | None = None) -> int:
    """Bytes of the files under `path` (only in folders named `pattern`, if given)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        if pattern is None or pattern in root:
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


class Sampler:
    """Every second while a run lasts: the 1-minute load average and, once `pid` is set,
    that process's resident set (VmRSS), with the time of each sample."""

    def __init__(self) -> None:
        self.load: list[float] = []
        self.rss: list[tuple[float, int]] = []
        self.pid: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.load.append(os.getloadavg()[0])
            if self.pid is not None:
                kb = vm_rss_kb(self.pid)
                if kb is not None:
                    self.rss.append((time.time(), kb))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean_load(self) -> float:
        return sum(self.load) / len(self.load) if self.load else os.getloadavg()[0]


def vm_rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def run_measured(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, object]:
    """Run `cmd` with stdout/stderr to `log`; wall time, ru_maxrss and CPU from wait4, the
    RSS samples in `rss` (epoch s, kB)."""
    with log.open("wb") as out, Sampler() as sampler:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        sampler.pid = proc.pid
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "load": round(sampler.mean_load, 1),
        "rss": sampler.rss,
    }


def rss_by_asset(home: Path, since: float, rss: list[tuple[float, int]]) -> dict[str, int]:
    """Largest RSS sample (MB) per asset, each sample charged to the first asset materialized
    after it (from the run's SQLite event log; steps run one at a time), in run order."""
    runs = [p for p in (home / "history" / "runs").glob("*.db") if p.name != "index.db"]
    runs = [p for p in runs if p.stat().st_mtime >= since]
    if not rss or not runs:
        return {}
    with sqlite3.connect(max(runs, key=lambda p: p.stat().st_mtime)) as db:
        rows = db.execute(
            "select asset_key, timestamp from event_logs"
            " where dagster_event_type = 'ASSET_MATERIALIZATION' order by id"
        ).fetchall()
    marks = [
        (datetime.datetime.fromisoformat(str(t)).replace(tzinfo=datetime.UTC).timestamp(),
         json.loads(k)[0])
        for k, t in rows
    ]  # fmt: skip
    out: dict[str, int] = {}
    for at, kb in rss:
        name = next((a for t, a in marks if t >= at), "after the last materialization")
        out[name] = max(out.get(name, 0), kb // 1024)
    return out


def peak_step(by_asset: dict[str, int]) -> str:
    """The asset in work at the run's largest RSS sample, with that sample."""
    if not by_asset:
        return ""
    name = max(by_asset, key=lambda a: by_asset[a])
    return f"{name} ({by_asset[name]} MB)"


def snapshot(work: Path) -> tuple[str, Path]:
    """HEAD exported into `<work>/src-<rev>` (once): the code every child of this run uses."""
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = work / f"src-{rev}"
    if not tree.exists():
        tmp = work / f".src-{rev}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar", "HEAD"], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        tmp.rename(tree)
    return rev, tree


def summary_line(log: Path) -> str:
    """The ingest's last line: `N drives, M materializations, P checks passed, ...`."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return next(
        (ln for ln in reversed(lines) if "materializations" in ln), lines[-1] if lines else ""
    )


def one_drive(work: Path, p: Planned, prune_gb: float) -> dict[str, object]:
    landing, lake, home, logs = (work / n for n in ("landing", "lake", "home", "logs"))
    for d in (landing, lake, home, logs):
        d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DAGSTER_HOME=str(home))
    synth = run_measured(
        [str(BIN / "bridge-lake"), "synth", "--out", str(landing), "--drives", "1",
         "--minutes", str(p.minutes), "--seed", str(p.seed), "--source", p.source, "--force"],
        env,
        logs / f"{p.drive_id}.synth.log",
    )  # fmt: skip
    if synth["exit"] != 0:
        raise SystemExit(f"synth of {p.drive_id} failed: see {logs}")
    raw = tree_bytes(landing / p.drive_id)
    rev, tree = snapshot(work)  # taken now: the newest commit when the ingest starts
    env["PYTHONPATH"] = str(tree)
    started = time.time()
    ingest = run_measured(
        [str(BIN / "bridge-lake"), "ingest", str(landing), "--drive", p.drive_id,
         "--lake", str(lake)],
        env,
        logs / f"{p.drive_id}.ingest.log",
    )  # fmt: skip
    lake_bytes = tree_bytes(lake, f"drive={p.drive_id}")
    rss = ingest.pop("rss")
    synth.pop("rss")
    record = {
        "drive": p.drive_id,
        "source": p.source,
        "minutes": p.minutes,
        "raw_gb": round(raw / GB, 3),
        "lake_gb": round(lake_bytes / GB, 3),
        "synth_s": synth["wall_s"],
        **ingest,
        "peak_at": peak_step(by_asset := rss_by_asset(home, started, rss)),
        "rss_by_asset_mb": by_asset,
        "summary": summary_line(logs / f"{p.drive_id}.ingest.log"),
        "rev": rev,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    shutil.rmtree(landing / p.drive_id, ignore_errors=True)
    if lake_bytes > prune_gb * GB:
        for root, dirs, _files in os.walk(lake):
            for d in list(dirs):
                if d == f"drive={p.drive_id}":
                    shutil.rmtree(os.path.join(root, d), ignore_errors=True)
                    dirs.remove(d)
        record["lake_pruned"] = True
    return record


def load_runs(work: Path) -> list[dict[str, object]]:
    path = work / "runs.jsonl"
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def report(runs: list[dict[str, object]]) -> str:
    """The runs as a markdown table (the latest run of each drive, in plan order)."""
    latest = {r["drive"]: r for r in runs}
    order = [p.drive_id for p in plan()]
    rows = [latest[d] for d in order if d in latest]
    head = (
        "| drive | source | min | raw GB | lake GB | ingest s | CPU s | peak RSS MB | peak in "
        "| load | result | rev |\n|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|"
    )
    lines = [head]
    for r in rows:
        result = "ok" if r["exit"] == 0 else f"exit {r['exit']}"
        lines.append(
            f"| {r['drive']} | {r['source']} | {r['minutes']:g} | {r['raw_gb']:.2f} "
            f"| {r['lake_gb']:.2f} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} "
            f"| {r['peak_rss_mb']} | {r.get('peak_at', '')} | {r['load']:.1f} "
            f"| {result}: {r['summary']} | {r['rev']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--report", action="store_true", help="print the table and stop")
    parser.add_argument("--redo", nargs="*", default=[], help="run these drives again")
    parser.add_argument("--only", nargs="*", default=None, help="only these drives")
    parser.add_argument(
        "--prune-gb", type=float, default=2.0, help="delete a drive's lake data above this"
    )
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.report:
        print(report(load_runs(work)))
        return
    done = {r["drive"] for r in load_runs(work)} - set(args.redo)
    for p in plan():
        if p.drive_id in done or (args.only is not None and p.drive_id not in args.only):
            continue
        print(f"{time.strftime('%H:%M:%S')} {p.drive_id} ({p.source}, {p.minutes:g} min)",
              flush=True)  # fmt: skip
        record = one_drive(work, p, args.prune_gb)
        with (work / "runs.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"   {json.dumps(record)}", flush=True)


if __name__ == "__main__":
    main()

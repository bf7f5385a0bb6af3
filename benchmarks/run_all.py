"""Every benchmark of the project in one run, and one table of their figures.

    python benchmarks/run_all.py --smoke                 # CI (`make bench-smoke`): minutes
    python benchmarks/run_all.py                         # `make bench`: hours, GBs in /tmp
    python benchmarks/run_all.py --only bench_export.py --markdown out.md

Runs each benchmarks/bench_*.py in its own process, one after the other (the machine has few
cores; two at once would time each other), with --smoke or at its full size (FULL_ARGS adds
what a full figure needs). Each benchmark measures ours against its baseline side by side in
its own run and prints BENCH-FIGURE lines (figures.py); this collects them into one table:
figure, ours, baseline, ratio (how many times better ours is), peak RSS. The peak RSS is the
one the benchmark measured for ours when it did, else (marked ~) the largest process of the
benchmark's run (wait4's ru_maxrss: the benchmark or one of its children). The run's load
average (1 min, sampled every 10 s) is printed beside each benchmark: on a shared machine the
ratios hold better than the absolute figures. A benchmark that fails is reported and the
run goes on; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

from figures import parse

HERE = Path(__file__).resolve().parent
FULL_ARGS = {
    "bench_export.py": ["--rss", "3", "30"],  # peak RSS of a lidar export, 3 vs 30 minutes
    "bench_nclt_memory.py": ["--smoke"],  # reads files you give it; no full size of its own
}


class LoadSampler:
    """The 1-minute load average every 10 s while a benchmark runs."""

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(10.0):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


def run_one(script: Path, smoke: bool, log_dir: Path | None) -> dict:
    """Run one benchmark; its figures, wall time, peak RSS of its process tree, load."""
    args = ["--smoke"] if smoke else FULL_ARGS.get(script.name, [])
    cmd = [sys.executable, str(script), *args]
    with LoadSampler() as load:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out_lines = []
        assert proc.stdout is not None
        for line in proc.stdout:  # echoed as it comes: a full run takes hours
            print(f"  | {line}", end="", flush=True)
            out_lines.append(line)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    output = "".join(out_lines)
    if log_dir is not None:
        (log_dir / f"{script.stem}.log").write_text(output)
    return {
        "benchmark": script.name,
        "args": args,
        "exit": os.waitstatus_to_exitcode(status),
        "seconds": wall,
        "tree_peak_rss_mb": usage.ru_maxrss / 1024,
        "load": (min(load.samples), max(load.samples)),
        "figures": parse(output),
    }


def fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def table(runs: list[dict]) -> str:
    """One markdown table of every figure (one row per benchmark without figures)."""
    lines = [
        "| benchmark | figure | ours | baseline | ratio | peak RSS MB | load |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for r in runs:
        load = f"{r['load'][0]:.1f}-{r['load'][1]:.1f}"
        name = r["benchmark"].removesuffix(".py")
        if r["exit"] != 0:
            lines.append(f"| {name} | FAILED (exit {r['exit']}) | | | | | {load} |")
            continue
        if not r["figures"]:
            lines.append(
                f"| {name} | (no figures; ran {r['seconds']:.0f} s) | | | | "
                f"~{r['tree_peak_rss_mb']:.0f} | {load} |"
            )
        for f in r["figures"]:
            rss = (
                f"{f['peak_rss_mb']:.0f}"
                if f["peak_rss_mb"] is not None
                else f"~{r['tree_peak_rss_mb']:.0f}"
            )
            base = "—"
            if f["baseline"] is not None:
                base = f"{fmt(f['baseline'])} ({f['baseline_name']})"
            lines.append(
                f"| {name} | {f['figure']} | {fmt(f['ours'])} {f['unit']} | {base} "
                f"| {fmt(f['ratio'])}{'x' if f['ratio'] is not None else ''} | {rss} | {load} |"
            )
    return "\n".join(lines)


def machine() -> str:
    return (
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, {platform.node()} "
        f"({platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="every benchmark's --smoke (CI)")
    parser.add_argument("--only", nargs="*", help="these bench_*.py files only")
    parser.add_argument("--markdown", type=Path, help="write the table (and run facts) here")
    parser.add_argument("--logs", type=Path, help="keep each benchmark's output in this folder")
    args = parser.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        scripts = [s for s in scripts if s.name in args.only or s.stem in args.only]
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    started = machine()
    t0 = time.perf_counter()
    runs = []
    for script in scripts:
        print(f"== {script.name} {'--smoke' if args.smoke else ''}", flush=True)
        run = run_one(script, args.smoke, args.logs)
        print(
            f"== {script.name}: exit {run['exit']}, {run['seconds']:.0f} s, "
            f"peak RSS {run['tree_peak_rss_mb']:.0f} MB, load {run['load'][0]:.1f}-"
            f"{run['load'][1]:.1f}",
            flush=True,
        )
        runs.append(run)
    total = time.perf_counter() - t0
    report = (
        f"{'Smoke' if args.smoke else 'Full'} run started {started}; {len(runs)} benchmarks in "
        f"{total / 60:.1f} min.\n\n{table(runs)}\n"
    )
    print("\n" + report)
    if args.markdown:
        args.markdown.write_text(report)
    failed = [r["benchmark"] for r in runs if r["exit"] != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

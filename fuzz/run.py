"""Run fuzz targets with atheris (libFuzzer), one process per target, and summarise.

    python -m fuzz.run [TARGET ...] [--seconds S | --runs N] [--jobs J] [--work DIR]

Without targets every target runs. The parent builds the seed corpora (fuzz.corpus) into
`<work>/seeds/<target>/`, then starts one child per target: the child imports the target
with coverage instrumentation, warms it up on its smallest seed, caps its address space
and hands over to libFuzzer, which runs every input (the seeds, the recorded crashers of
`fuzz/crashers/<target>/`, the growing corpus `<work>/corpus/<target>/`, then mutations)
under the rule of fuzz.harness.

A finding stops that target: libFuzzer writes the input to `<work>/artifacts/<target>/`
(`crash-*` for an escaped exception or a broken memory rule, `timeout-*` for a hang) and
the run exits 1. `python -m fuzz.run TARGET --replay FILE` reproduces it with its traceback.
Add the input under `fuzz/crashers/<target>/`, fix the reader, and the regression test
(bridge_lake_tests/test_fuzz.py) keeps it fixed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fuzz import harness
from fuzz.targets import SCRATCH_ENV, TARGETS, load, new_scratch_dir

ROOT = Path(__file__).resolve().parent
CRASHERS = ROOT / "crashers"
DEFAULT_WORK = ROOT / ".work"
_STATUS = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)


@dataclass
class Result:
    target: str
    returncode: int
    seconds: float
    executions: int = 0
    exec_per_sec: int = 0
    coverage: int = 0
    """libFuzzer's `cov`: instrumented edges (bytecode branches) reached."""
    features: int = 0
    """libFuzzer's `ft`: coverage features (edges by hit-count bucket)."""
    corpus_units: int = 0
    new_units: int = 0
    peak_rss_mb: int = 0
    seeds: int = 0
    artifacts: list[str] = field(default_factory=list)
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.artifacts


def write_seeds(name: str, work: Path) -> Path:
    """The target's seed folder, rebuilt from fuzz.corpus."""
    folder = work / "seeds" / name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    for key, data in load(name).seeds(work).items():
        digest = hashlib.sha1(data).hexdigest()[:12]  # noqa: S324 - a file name, not security
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:60]
        (folder / f"{safe}-{digest}").write_bytes(data)
    return folder


def _child(name: str, work: Path, max_len: int | None, libfuzzer_args: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=list(TARGETS[name])):
        target = load(name)
    target.seeds(work)  # targets that keep seed files beside their input set them up here
    seeds = work / "seeds" / name
    smallest = min(seeds.iterdir(), key=lambda p: p.stat().st_size)
    harness.check(target.one_input, smallest.read_bytes())  # warm up: pools, lazy imports
    harness.cap_address_space()
    tracemalloc.start()

    def test_one_input(data: bytes) -> None:
        harness.check(target.one_input, data)

    corpus = work / "corpus" / name
    artifacts = work / "artifacts" / name
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    dirs = [str(corpus), str(seeds)]
    if (CRASHERS / name).is_dir():
        dirs.append(str(CRASHERS / name))
    argv = [
        sys.argv[0],
        *dirs,
        f"-max_len={min(target.MAX_LEN, max_len or target.MAX_LEN)}",
        f"-timeout={int(harness.TIME_LIMIT_S * 4)}",  # wall clock: a hang, whatever the load
        f"-report_slow_units={int(harness.TIME_LIMIT_S * 4)}",
        "-rss_limit_mb=6144",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
        *libfuzzer_args,
    ]
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


def run_target(name: str, work: Path, child_args: list[str]) -> Result:
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    artifacts = work / "artifacts" / name
    before = set(artifacts.iterdir()) if artifacts.is_dir() else set()
    cmd = [sys.executable, "-m", "fuzz.run", "--child", name, "--work", str(work)]
    t0 = time.monotonic()
    scratch = new_scratch_dir()
    try:
        proc = subprocess.run(
            [*cmd, *child_args],
            cwd=ROOT.parent,
            capture_output=True,
            text=True,
            errors="replace",
            env={**os.environ, "PYTHONPATH": str(ROOT.parent), SCRATCH_ENV: str(scratch)},
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    (logs / f"{name}.log").write_text(log)
    result = Result(name, proc.returncode, round(seconds, 1), log=log[-4000:])
    stats = dict(_STAT.findall(log))
    result.executions = int(stats.get("number_of_executed_units", 0))
    result.exec_per_sec = int(stats.get("average_exec_per_sec", 0))
    result.new_units = int(stats.get("new_units_added", 0))
    result.peak_rss_mb = int(stats.get("peak_rss_mb", 0))
    status = _STATUS.findall(log)
    if status:
        cov, ft, units, _ = status[-1]
        result.coverage, result.features, result.corpus_units = int(cov), int(ft), int(units)
    result.seeds = len(list((work / "seeds" / name).iterdir()))
    after = set(artifacts.iterdir()) if artifacts.is_dir() else set()
    kinds = ("crash-", "timeout-", "oom-", "leak-")  # not libFuzzer's slow-unit notes
    result.artifacts = sorted(str(p) for p in after - before if p.name.startswith(kinds))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fuzz.run", description=__doc__.split("\n")[0], allow_abbrev=False
    )
    parser.add_argument("targets", nargs="*", help=f"targets (default all: {', '.join(TARGETS)})")
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time per target")
    parser.add_argument("--runs", type=int, help="stop each target after this many inputs")
    parser.add_argument("--jobs", type=int, default=2, help="targets fuzzed in parallel")
    parser.add_argument(
        "--max-len", type=int, help="cap every target's input size (larger seeds are cut)"
    )
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="seeds, corpus, logs")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--replay",
        type=Path,
        nargs="+",
        help="run these inputs of the one target given, in"
        " this process under the rule (no libFuzzer): reproduce a finding with its traceback",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args(argv)  # -flag=value: passed on to libFuzzer
    unknown = [a for a in extra if not a.startswith("-") or a.startswith("--")]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    work = args.work.resolve()
    if args.child:
        _child(args.child, work, args.max_len, extra)
        return 0
    names = args.targets or list(TARGETS)
    for name in names:
        load(name)
    if args.replay:
        if len(names) != 1:
            parser.error("--replay needs exactly one target")
        target = load(names[0])
        target.seeds(work)
        for path in args.replay:
            harness.replay(target.one_input, path.read_bytes())
            print(f"{path}: ok")
        return 0
    work.mkdir(parents=True, exist_ok=True)
    for name in names:
        write_seeds(name, work)
    child_args = [f"-max_total_time={args.seconds}", *extra]
    if args.runs:
        child_args.append(f"-runs={args.runs}")
    if args.max_len:
        child_args.append(f"--max-len={args.max_len}")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda n: run_target(n, work, child_args), names))
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    for r in results:
        if not r.ok:
            print(f"\n== {r.target}: exit {r.returncode}; log {work}/logs/{r.target}.log")
            print(r.log[-3000:])
            for a in r.artifacts:
                print(f"   input: {a}  (copy it to fuzz/crashers/{r.target}/ once fixed)")
    return 0 if all(r.ok for r in results) else 1


def render(results: list[Result]) -> str:
    head = f"{'target':16} {'execs':>9} {'exec/s':>7} {'cov':>6} {'ft':>6} {'corpus':>6} "
    head += f"{'seeds':>5} {'rss MB':>6} {'time s':>7}  result"
    lines = [head]
    for r in results:
        lines.append(
            f"{r.target:16} {r.executions:9d} {r.exec_per_sec:7d} {r.coverage:6d} "
            f"{r.features:6d} {r.corpus_units:6d} {r.seeds:5d} {r.peak_rss_mb:6d} "
            f"{r.seconds:7.1f}  {'ok' if r.ok else 'FINDING'}"
        )
    total = sum(r.executions for r in results)
    lines.append(f"{'total':16} {total:9d}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

"""The fuzz harnesses of fuzz/: the rule can fail, every recorded crasher stays fixed, and a
short coverage-guided run of every target (atheris) finds nothing new.

The long run is `make fuzz` (docs/fuzzing.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bridge_lake.errors import FormatError
from fuzz import harness
from fuzz.run import CRASHERS
from fuzz.targets import TARGETS, load

REPO = Path(__file__).resolve().parents[1]
RECORDED = sorted(p for p in CRASHERS.glob("*/*") if p.is_file())
SHORT_RUN_SECONDS = 1
SHORT_RUN_MAX_LEN = 16 << 10
"""The short run cuts larger seeds (the biggest real recordings take seconds per pass under
tracemalloc); `make fuzz` uses each target's own MAX_LEN."""


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def test_the_rule_lets_typed_errors_through_and_nothing_else():
    def typed(data: bytes) -> None:
        raise FormatError("bad", path="x", offset=len(data))

    harness.replay(typed, b"abc")
    with pytest.raises(IndexError):
        harness.replay(lambda data: [][len(data)], b"")
    with pytest.raises(harness.TooMuchMemory):
        harness.replay(lambda data: bytearray(harness.memory_limit(len(data)) + 1), b"x")
    with pytest.raises(harness.TooSlow):

        def spin(data: bytes) -> None:
            while True:
                pass

        harness.TIME_LIMIT_S, old = 0.2, harness.TIME_LIMIT_S
        try:
            harness.replay(spin, b"")
        finally:
            harness.TIME_LIMIT_S = old


@pytest.mark.parametrize("path", RECORDED, ids=[f"{p.parent.name}/{p.name}" for p in RECORDED])
def test_recorded_crasher_stays_fixed(path: Path, work: Path):
    target = load(path.parent.name)
    target.seeds(work)
    harness.replay(target.one_input, path.read_bytes())


def test_every_crasher_folder_is_a_target():
    assert {p.parent.name for p in RECORDED} <= set(TARGETS)


def test_short_fuzz_run_of_every_target(work: Path):
    out = work / "short.json"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "fuzz.run", "--seconds", str(SHORT_RUN_SECONDS)),
            *("--jobs", "2", "--max-len", str(SHORT_RUN_MAX_LEN)),
            *("--work", str(work), "--json", str(out)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    results = {r["target"]: r for r in json.loads(out.read_text())}
    assert set(results) == set(TARGETS)
    for name, r in results.items():
        assert r["seeds"] > 0, name
        assert r["executions"] >= r["seeds"] and r["coverage"] > 0, (name, r)

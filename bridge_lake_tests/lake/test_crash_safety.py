"""Killed runs and parallel runs (issue 16): a drive's steps are SIGKILLed at random points
and re-run, and drives are materialized side by side, in real processes.

The oracle is an uninterrupted run of the same drives into a reference lake: identical input
gives identical bytes, so at any moment every file a reader can see must be byte-identical to
the reference file of the same path (a half-written or stray file is not), and after the
re-run the lake must be the reference exactly.
"""

from __future__ import annotations

import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from bridge_lake.lake.paths import LOCKS_DIR, STAGING_DIR
from bridge_lake.synth import SynthDrive, synthesize
from bridge_lake_tests.lake.pipeline_runner import Runner, job, outcome

KILLS = 24
"""SIGKILLs per test run: 4 per (step, source), half on an empty layer, half on a full one."""
KILLED_STEPS = ("normalize", "calibrate", "export")
LAYER_OF = {"raw": "raw", "normalize": "normalized", "calibrate": "calibrated", "export": "exports"}
ORDER = list(LAYER_OF.values())
SIGKILL_EXIT = -9


@dataclass
class World:
    root: Path
    landing: Path
    drives: list[SynthDrive]
    reference: dict[str, bytes]
    """relative path → bytes of every visible file after uninterrupted runs"""
    seconds: dict[str, dict[str, float]]
    """source → step → seconds the step took in the reference run"""
    runner: Runner


def visible(lake: Path) -> dict[str, bytes]:
    """Every file a reader of the lake can come across (not the staging area or the locks)."""
    out = {}
    for p in sorted(lake.rglob("*")):
        rel = p.relative_to(lake).as_posix()
        if p.is_file() and not rel.startswith((f"{STAGING_DIR}/", f"{LOCKS_DIR}/")):
            out[rel] = p.read_bytes()
    return out


def layer(rel: str) -> str:
    return rel.split("/", 1)[0]


def drive_of(rel: str) -> str:
    found = re.search(r"/drive=([^/]+)/", rel)
    assert found, rel
    return found.group(1)


def copy_files(files: dict[str, bytes], lake: Path) -> None:
    for rel, data in files.items():
        (lake / rel).parent.mkdir(parents=True, exist_ok=True)
        (lake / rel).write_bytes(data)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("crash")
    drives = synthesize(root / "landing", drives=2, minutes=0.05, seed=0, light=True)
    with Runner() as runner:
        seconds = {}
        for d in drives:  # one after the other: the oracle
            j = job(root / "reference", root / "landing", d.drive_id, d.source, root / "ref.json")
            assert runner.run([j]) == [0], outcome(j).get("traceback")
            seconds[d.source] = outcome(j)["seconds"]
        reference = visible(root / "reference")
        assert {layer(r) for r in reference} == set(ORDER)
        yield World(root, root / "landing", drives, reference, seconds, runner)


def test_sigkill_at_random_points_then_rerun_gives_the_same_bytes(world: World) -> None:
    rng = random.Random(16)
    kills: list[tuple[str, str, bool, float]] = []
    attempt = 0
    while len(kills) < KILLS:
        attempt += 1
        assert attempt <= 2 * KILLS, f"only {len(kills)} of {attempt - 1} attempts were killed"
        n = len(kills)
        d = world.drives[n % 2]
        step = KILLED_STEPS[n % 3]
        full = (n // 6) % 2 == 1  # re-materializing over the reference, or a first write
        done = ORDER.index(LAYER_OF[step])
        before = {
            rel: data
            for rel, data in world.reference.items()
            if full or ORDER.index(layer(rel)) < done
        }
        lake = world.root / f"attempt-{attempt}"
        copy_files(before, lake)
        delay = rng.uniform(0.0, 0.9 * world.seconds[d.source][step])
        kill = job(
            lake,
            world.landing,
            d.drive_id,
            d.source,
            lake.with_suffix(".kill.json"),
            phases=(step,),
            kill_phase=step,
            kill_after_s=delay,
        )
        [code] = world.runner.run([kill])
        if code == 0:  # the step finished first: not a kill, try another point
            shutil.rmtree(lake)
            continue
        assert code == SIGKILL_EXIT, outcome(kill).get("traceback")
        assert outcome(kill)["killed_in"] == step
        kills.append((d.source, step, full, delay))
        state = "over a complete lake" if full else "first write"
        where = f"{d.source} {step} killed after {delay:.3f} s ({state})"

        seen = visible(lake)
        stray = sorted(rel for rel in seen if rel not in world.reference)
        assert not stray, f"{where}: files no run should leave visible: {stray}"
        partial = sorted(rel for rel, data in seen.items() if data != world.reference[rel])
        assert not partial, f"{where}: visible files differ from a complete run: {partial}"
        lost = sorted(set(before) - set(seen))
        assert not lost, f"{where}: files that were there before the run are gone: {lost}"

        rerun = job(
            lake,
            world.landing,
            d.drive_id,
            d.source,
            lake.with_suffix(".rerun.json"),
            phases=(step,),
            wait_s=5.0,
        )
        assert world.runner.run([rerun]) == [0], outcome(rerun).get("traceback")
        expected = {
            rel: data
            for rel, data in world.reference.items()
            if rel in before or (layer(rel) == LAYER_OF[step] and drive_of(rel) == d.drive_id)
        }
        after = visible(lake)
        assert sorted(after) == sorted(expected), where
        differ = sorted(rel for rel in expected if after[rel] != expected[rel])
        assert not differ, f"{where}: re-run is not byte-identical: {differ}"
        shutil.rmtree(lake)
    covered = {(source, step) for source, step, _, _ in kills}
    assert len(covered) == 6 and sum(full for *_, full, _ in kills) == KILLS // 2
    print(
        f"{len(kills)} SIGKILLs in {attempt} attempts; delays "
        f"{min(k[3] for k in kills):.3f}-{max(k[3] for k in kills):.3f} s"
    )


def _lake_with(world: World, name: str) -> Path:
    lake = world.root / name
    lake.mkdir()
    return lake


def test_two_drives_materialize_in_parallel(world: World) -> None:
    lake = _lake_with(world, "parallel-drives")
    jobs = [
        job(
            lake,
            world.landing,
            d.drive_id,
            d.source,
            lake.with_suffix(f".{d.source}.json"),
            wait_s=0.0,
        )
        for d in world.drives
    ]
    assert world.runner.run(jobs) == [0, 0], [outcome(j).get("traceback") for j in jobs]
    a, b = (outcome(j) for j in jobs)
    assert a["acquired"] < b["released"] and b["acquired"] < a["released"], "not in parallel"
    assert "waited_for" not in a and "waited_for" not in b
    assert visible(lake) == world.reference


def _same_drive(world: World, name: str, wait_s: float) -> tuple[Path, list[dict]]:
    lake = _lake_with(world, name)
    d = world.drives[1]
    jobs = [
        job(
            lake,
            world.landing,
            d.drive_id,
            d.source,
            lake.with_suffix(f".{i}.json"),
            wait_s=wait_s,
            owner=f"run-{i}",
        )
        for i in range(2)
    ]
    return lake, jobs


def _reference_of(world: World, drive_id: str) -> dict[str, bytes]:
    return {r: data for r, data in world.reference.items() if drive_of(r) == drive_id}


def test_same_drive_twice_the_second_run_waits_for_the_first(world: World) -> None:
    lake, jobs = _same_drive(world, "same-drive-wait", wait_s=120.0)
    assert world.runner.run(jobs) == [0, 0], [outcome(j).get("traceback") for j in jobs]
    outs = [outcome(j) for j in jobs]
    i, k = sorted(range(2), key=lambda n: outs[n]["acquired"])
    first, second = outs[i], outs[k]
    assert first["released"] <= second["acquired"], "the two runs overlapped"
    assert second["waited_for"].startswith(f"run-{i} (pid {first['pid']} on ")
    assert visible(lake) == _reference_of(world, world.drives[1].drive_id)


def test_same_drive_twice_without_waiting_one_fails_naming_the_holder(world: World) -> None:
    lake, jobs = _same_drive(world, "same-drive-nowait", wait_s=0.0)
    codes = world.runner.run(jobs)
    assert sorted(codes) == [0, 1]
    winner, loser = (outcome(j) for j in sorted(jobs, key=lambda j: codes[jobs.index(j)]))
    drive = world.drives[1].drive_id
    assert loser["error"].startswith(f"DriveLockedError: drive {drive} is being written by run-")
    assert f"(pid {winner['pid']} on " in loser["error"]
    assert "acquired" not in loser
    assert visible(lake) == _reference_of(world, drive)

"""`bridge-lake ingest` as a user runs it: the summary tells what the instance recorded,
Ctrl-C stops the whole ingest and a re-run resumes (issue 22, findings 1, 2, 6, 7, 11)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from bridge_lake.cli import main
from bridge_lake.synth import synthesize
from bridge_lake_tests.conftest import DRIVE_YAML, REPO, make_adtf_drive

DRIVE_HEAD = re.compile(r"^(\S+): (ok|warn|FAILED|canceled|skipped|not run)\b")
ASSET_LINE = re.compile(r"^  (\S+)\s+(ok|warn|FAILED|not run)\b")
PROBLEM = re.compile(r"^      (FAILED|warn): (\S+): (.+)$")
EVALUATION = dg.DagsterEventType.ASSET_CHECK_EVALUATION
COUNTS = re.compile(r"^(\d+) drives: (.*)\. (\d+) assets: (.*)\. Checks: (\d+) passed, (\d+) fail")


def parse_summary(out: str) -> tuple[dict, dict, dict, list[str]]:
    """drive → status, (drive, asset) → status, (drive, asset) → [(word, check, reason)],
    and the counts line, from the printed summary."""
    text = out[out.index("\nSummary (") :]
    drives, assets, problems = {}, {}, {}
    drive = asset = None
    counts = []
    for line in text.splitlines():
        if m := DRIVE_HEAD.match(line):
            drive = m[1]
            drives[drive] = m[2]
        elif m := ASSET_LINE.match(line):
            asset = m[1]
            assets[(drive, asset)] = m[2]
        elif m := PROBLEM.match(line):
            problems.setdefault((drive, asset), []).append((m[1], m[2], m[3]))
        elif m := COUNTS.match(line):
            counts = list(m.groups())
    return drives, assets, problems, counts


def recorded(home: Path, drive: str) -> tuple[dg.DagsterRunStatus, set[str], list, int]:
    """What the instance holds for a drive's latest run, read through other APIs than the
    CLI's (materialization records and the asset-check execution table): the run status,
    the assets materialized by it, its failed checks as (asset, check, severity, evaluation)
    and how many of its checks passed."""
    from bridge_lake.definitions import LAKE_ASSETS as ASSETS

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": drive}), limit=1)
        materialized = set()
        failed = []
        passed = 0
        for a in ASSETS:
            for key in a.keys:
                recs = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=key, asset_partitions=[drive]), limit=1
                ).records
                if recs and recs[0].run_id == run.run_id:
                    materialized.add(key.to_user_string())
            for spec in a.check_specs:
                history = instance.event_log_storage.get_asset_check_execution_history(
                    spec.key, limit=100
                )
                for h in history:
                    event = h.event.dagster_event if h.event else None
                    evaluated = event and event.event_type == EVALUATION
                    ev = event.asset_check_evaluation_data if evaluated else None
                    passed += h.run_id == run.run_id and ev is not None and ev.passed
                    if h.run_id == run.run_id and ev is not None and not ev.passed:
                        failed.append((spec.asset_key.to_user_string(), spec.name, ev.severity, ev))
        return run.status, materialized, failed, passed


def test_summary_statuses_and_counts_match_the_instance(tmp_path, capsys, monkeypatch):
    """A good drive, a drive.yaml typo, a drive without recordings (blocking check) and a
    real ADTF drive: every drive and asset listed with the status and reasons the instance
    recorded, counts that add up, exit 1, no stack trace, the log file named."""
    landing = tmp_path / "landing"
    (good,) = synthesize(landing, drives=1, minutes=0.05, light=True, source="adtf")
    make_adtf_drive(landing, "typo", drive_yaml=DRIVE_YAML.replace("vehicle:", "vehicel:"))
    empty = landing / "empty"
    empty.mkdir()
    (empty / "drive.yaml").write_text(DRIVE_YAML)
    (empty / "notes.txt").write_text("no recording here")
    make_adtf_drive(landing, "real")
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("BRIDGE_LAKE_RIGS", str(tmp_path / "rigs"))
    rc = main(["ingest", str(landing), "--lake", str(tmp_path / "lake")])
    cap = capsys.readouterr()
    out = cap.out
    assert rc == 1
    assert "Traceback" not in out + cap.err and "Stack Trace" not in out + cap.err
    drives, assets, problems, counts = parse_summary(out)
    assert set(drives) == {good.drive_id, "typo", "empty", "real"}

    from bridge_lake.definitions import LAKE_ASSETS

    all_assets = [k.to_user_string() for a in LAKE_ASSETS for k in a.keys]
    bad_drives = all_passed = 0
    for drive, status in drives.items():
        run_status, materialized, failed, passed = recorded(home, drive)
        all_passed += passed
        listed = {a: s for (d, a), s in assets.items() if d == drive}
        assert sorted(listed) == sorted(all_assets), drive  # every asset appears
        shown_ok = {a for a, s in listed.items() if s in ("ok", "warn")}
        errors = {(a, c) for a, c, sev, _ in failed if sev == dg.AssetCheckSeverity.ERROR}
        warnings = {(a, c) for a, c, sev, _ in failed if sev == dg.AssetCheckSeverity.WARN}
        assert shown_ok == {a for a in materialized if not any(e[0] == a for e in errors)}
        printed = {(a, c, w) for (d, a), ps in problems.items() if d == drive for w, c, _ in ps}
        assert {(a, c) for a, c, w in printed if w == "FAILED"} == errors, drive
        assert {(a, c) for a, c, w in printed if w == "warn"} == warnings, drive
        for a, c, _, ev in failed:  # each with the reason the check recorded
            reason = next(r for w, cc, r in problems[(drive, a)] if cc == c)
            if ev.description:
                assert reason == " ".join(ev.description.split())
        for a, s in listed.items():
            if s == "not run":
                assert a not in materialized
        if run_status == dg.DagsterRunStatus.SUCCESS:
            assert status in ("ok", "warn") and not errors
        else:
            assert status == "FAILED"
            bad_drives += 1
    assert drives["typo"] == "FAILED" and drives["empty"] == "FAILED"
    assert drives[good.drive_id] in ("ok", "warn")
    (typo,) = problems[("typo", "raw_manifest")]
    assert typo == (
        "FAILED",
        "drive_yaml_valid",
        f"{landing}/typo/drive.yaml: required field 'vehicle' is missing",
    )
    assert problems[("empty", "raw_manifest")][0][1] == "has_recording"
    assert assets[("typo", "normalized_imu")] == "not run"
    assert re.search(r"^  normalized_imu\s+not run: raw_manifest failed$", out, re.M)
    # the counts line adds up to what is listed
    n_drives, drive_counts, n_assets, asset_counts, passed_n, failed_n = counts
    assert int(passed_n) == all_passed
    assert int(n_drives) == 4 and int(n_assets) == 4 * len(all_assets)
    assert f"{bad_drives} FAILED" in drive_counts
    per_status = Counter(assets.values())
    for status, n in per_status.items():
        assert f"{n} {status}" in asset_counts
    assert int(failed_n) == sum(1 for ps in problems.values() for w, _, _ in ps if w == "FAILED")
    log = re.search(r"Full log of these runs \(every event, with stack traces\): (\S+)", out)
    assert log is not None
    text = Path(log[1]).read_text()
    assert "=== drive typo, run " in text and "STEP_FAILURE" in text and "Stack Trace" in text
    assert f"BRIDGE_LAKE_RIGS={tmp_path / 'rigs'}" in out  # finding 11: every setting


def test_missing_landing_folder_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert main(["ingest", str(tmp_path / "nowhere"), "--lake", str(tmp_path / "lake")]) == 2
    err = capsys.readouterr().err
    assert f"landing folder {tmp_path / 'nowhere'} is missing" in err


def test_a_rerun_skips_a_drive_done_unless_its_lake_output_is_gone(tmp_path, capsys, monkeypatch):
    """Unchanged inputs and code: skipped. The lake wiped under the same path: the instance
    still records the drive as done, but its outputs are gone, so the drive runs again."""
    import shutil

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    (made,) = synthesize(landing, drives=1, minutes=0.05, light=True, source="adtf")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    args = ["ingest", str(landing), "--lake", str(lake)]
    assert main(args) in (0, 1)
    capsys.readouterr()
    assert main(args) == 0
    drives, *_ = parse_summary(capsys.readouterr().out)
    assert drives == {made.drive_id: "skipped"}
    shutil.rmtree(lake)
    assert main(args) in (0, 1)
    drives, *_ = parse_summary(capsys.readouterr().out)
    assert drives[made.drive_id] in ("ok", "warn")
    assert list((lake / "raw").rglob("*.parquet"))


def _wait_for(stream, text: str, timeout_s: float) -> str:
    seen = ""
    end = time.monotonic() + timeout_s
    while text not in seen:
        ch = stream.read(1)
        if not ch or time.monotonic() > end:
            raise AssertionError(f"never printed {text!r}: {seen}")
        seen += ch
    return seen


@pytest.mark.timeout(600)
def test_ctrl_c_stops_the_ingest_and_a_rerun_resumes(tmp_path):
    """SIGINT during the second of four drives: gone within 10 s with exit 130, its run
    canceled in the instance, no drive after it started; every normalized and calibrated
    partition in the lake has the materialization and passed checks that let it through;
    the re-run skips the drive done and runs the rest."""
    landing, lake, home = tmp_path / "landing", tmp_path / "lake", tmp_path / "home"
    made = synthesize(landing, drives=4, minutes=0.05, light=True, source="adtf")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "bridge_lake.cli", "ingest", str(landing), "--lake", str(lake)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path)  # fmt: skip
    try:
        head = _wait_for(proc.stdout, "[2/4]", 300)
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
        gone = time.monotonic() - sent
    finally:
        proc.kill()
    out = head + rest
    assert proc.returncode == 130, out + err
    assert gone < 10, gone
    assert "Traceback" not in out + err
    drives, _, _, _ = parse_summary(out)
    ids = [d.drive_id for d in made]
    assert drives[ids[0]] in ("ok", "warn")
    assert drives[ids[1]] in ("canceled", "ok", "warn")  # a run may end before it hears
    assert drives[ids[2]] == drives[ids[3]] == "not run"
    assert "Stopped by SIGINT" in out
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = {r.tags["dagster/partition"]: r for r in instance.get_runs()}
        assert set(runs) == set(ids[:2])  # nothing started after the signal
        if drives[ids[1]] == "canceled":
            assert runs[ids[1]].status == dg.DagsterRunStatus.CANCELED
        _assert_published_passed(instance, lake, ids)
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    drives, _, _, _ = parse_summary(again.stdout)
    assert drives[ids[0]] == "skipped"
    assert all(drives[d] in ("ok", "warn") for d in ids[2:])
    assert drives[ids[1]] in ("ok", "warn", "skipped")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        _assert_published_passed(instance, lake, ids)
        ran = Counter(r.tags["dagster/partition"] for r in instance.get_runs())
        assert ran[ids[0]] == 1 and ran[ids[2]] == ran[ids[3]] == 1


def _assert_published_passed(instance: dg.DagsterInstance, lake: Path, ids: list[str]) -> None:
    """Every partition of the normalized and calibrated layers visible in the lake has a
    materialization in the instance, and each blocking check the asset declares has a
    passed result recorded by that run."""
    from bridge_lake.definitions import ASSETS
    from bridge_lake.defs.calibrated import TABLE_OF_ASSET

    blocking = {}
    for a in ASSETS:
        for spec in a.check_specs:
            if spec.blocking:
                blocking.setdefault(spec.asset_key.to_user_string(), set()).add(spec.name)
    for layer in ("normalized", "calibrated"):
        for part in sorted((lake / layer).glob("*/drive=*")):
            table, drive = part.parent.name, part.name.removeprefix("drive=")
            assert drive in ids
            asset = f"{layer}_{TABLE_OF_ASSET.get(table, table)}"
            recs = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[drive]),
                limit=1,
            ).records
            assert recs, f"{part} is published without a materialization"
            passed = {
                ev.check_name
                for e in instance.all_logs(recs[0].run_id, of_type=EVALUATION)
                if (ev := e.dagster_event.asset_check_evaluation_data).passed
                and ev.asset_key.to_user_string() == asset
            }
            assert blocking.get(asset, set()) <= passed, part

"""`bridge-lake ingest --launch`: drives as runs the instance of $DAGSTER_HOME launches."""

import os
import re

import dagster as dg
import polars as pl

from bridge_lake.cli import main
from bridge_lake.synth import synthesize

IMMEDIATE = """run_coordinator:
  module: dagster.core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""
"""An instance that launches submitted runs at once (no daemon needed), each in a process of
the default run launcher."""
QUEUED = "telemetry:\n  enabled: false\n"
"""Dagster's default: submitted runs wait in a queue for the daemon."""
RUN_ID = re.compile(r"run ([0-9a-f-]{36})")


def _home(tmp_path, name, yaml_text, monkeypatch):
    home = tmp_path / name
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml_text)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_launched_run_executes_out_of_process_and_is_summarized(tmp_path, capsys, monkeypatch):
    """The drive becomes a lake_job run launched by the instance (another process), the
    CLI waits for it, prints its run id and the summary, and the lake it wrote (relative
    paths, resolved against the caller's folder, not the code server's) is queryable."""
    (made,) = synthesize(tmp_path / "landing", drives=1, minutes=0.05, light=True, source="adtf")
    home = _home(tmp_path, "home", IMMEDIATE, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "landing", "--lake", "lake", "--launch"]) == 0
    out = capsys.readouterr().out
    (run_id,) = RUN_ID.findall(out)
    assert "submitted 1 runs of lake_job (launched at once)" in out
    assert f"[1/1 finished] {made.drive_id}: success after" in out
    assert "\n1 drives: " in out and ". 23 assets: " in out and ", 0 failed, " in out
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_run_by_id(run_id)
        assert run.job_name == "lake_job" and run.status == dg.DagsterRunStatus.SUCCESS
        assert run.tags["dagster/partition"] == made.drive_id
        assert run.tags["bridge_lake/source"] == "adtf"
        assert run.run_config["resources"]["lake"]["config"]["root"] == str(tmp_path / "lake")
        (start,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START)
        assert start.dagster_event.pid not in (None, os.getpid())
    poses = pl.scan_parquet(tmp_path / "lake" / "calibrated" / "poses" / "**" / "*.parquet")
    assert poses.select(pl.len()).collect().item() > 0


def test_launch_into_a_queue_without_daemon(tmp_path, capsys, monkeypatch):
    """With the default queued coordinator and no daemon, waiting would never end: refused
    up front, naming what to do; --no-wait queues the run and says it waits for a daemon."""
    synthesize(tmp_path / "landing", drives=1, minutes=0.05, light=True, source="adtf")
    home = _home(tmp_path, "home", QUEUED, monkeypatch)
    landing, lake = str(tmp_path / "landing"), str(tmp_path / "lake")
    assert main(["ingest", landing, "--lake", lake, "--launch"]) == 2
    err = capsys.readouterr().err
    assert "no dagster-daemon is running" in err and "--no-wait" in err and "Traceback" not in err
    assert main(["ingest", landing, "--lake", lake, "--launch", "--no-wait"]) == 0
    out = capsys.readouterr().out
    (run_id,) = RUN_ID.findall(out)
    assert "(queued)" in out and "start once a dagster-daemon runs" in out
    assert f"DAGSTER_HOME={home}" in out and " dev -w " in out  # how to watch them
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.QUEUED
        assert len(instance.get_runs()) == 1

"""Every drive is processed once, however it arrived (CLI ingest, sensor, a UI backfill, the
nightly schedule), and again only for what changed: Dagster's code versions, data versions
and staleness decide (defs/versions.py, defs/inputs.py, defs/staleness.py)."""

from __future__ import annotations

import io
from pathlib import Path

import dagster as dg
import pytest

from bridge_lake.definitions import ASSETS, LAKE_ASSETS, defs
from bridge_lake.defs.calibrated import calibrated
from bridge_lake.defs.ingest import run_drives, scan_landing
from bridge_lake.defs.inputs import INPUTS
from bridge_lake.defs.jobs import lake_job
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.defs.staleness import Staleness
from bridge_lake_tests.conftest import make_adtf_drive
from bridge_lake_tests.defs.test_sensor_schedule import _night, _tick

KEYS = [k for a in LAKE_ASSETS for k in a.keys]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    (h / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(h))
    return h


def _resources(landing: Path, lake: Path) -> dict[str, object]:
    return {
        "lake": LakeResource(root=str(lake)),
        "landing": LandingZoneResource(root=str(landing)),
    }


def _ingest(landing: Path, lake: Path, home: Path) -> str:
    out = io.StringIO()
    found = scan_landing(str(landing), None, out)
    result = run_drives(str(landing), str(lake), found, home, out)
    assert result.exit_code == 0, out.getvalue()
    return out.getvalue()


def _materializations(instance: dg.DagsterInstance, drive: str) -> dict[str, int]:
    return {
        k.to_user_string(): len(
            instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=k, asset_partitions=[drive]), limit=100
            ).records
        )
        for k in KEYS
    }


def test_a_drive_ingested_by_the_cli_is_not_run_again_by_the_sensor(landing, tmp_path, home):
    """Fails on 8bfc156: ingest recorded no landing_drive observation, so the sensor found the
    drive 'changed' and ran it again in full."""
    make_adtf_drive(landing, "d1")
    _ingest(landing, tmp_path / "lake", home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        first, _ = _tick(instance, landing)
        second, _ = _tick(instance, landing, first.cursor)
        assert first.run_requests == second.run_requests == []
        assert "no new or changed drives" in second.skip_reason.skip_message


def test_a_ui_backfill_is_recognised_like_any_other_run(landing, tmp_path, home):
    """A run launched as the UI's backfills are (the job, the partition, no bridge_lake tags):
    afterwards ingest skips the drive and the nightly schedule asks nothing."""
    make_adtf_drive(landing, "d1")
    lake = tmp_path / "lake"
    resources = _resources(landing, lake)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        first, _ = _tick(instance, landing)  # the sensor registers and observes it
        assert _tick(instance, landing, first.cursor)[0].run_requests  # and would run it
        job = dg.Definitions(
            assets=[*INPUTS, *ASSETS], jobs=[lake_job], resources=resources
        ).resolve_job_def(lake_job.name)
        run = job.execute_in_process(partition_key="d1", instance=instance)
        assert run.success
        assert not any(k.startswith("bridge_lake/") for k in run.dagster_run.tags)
        schedule = next(iter(defs.schedules))
        night = _night(schedule, instance, landing, 3, lake, LAKE_ASSETS)
        assert isinstance(night, dg.SkipReason) and "up to date" in night.skip_message
        before = _materializations(instance, "d1")
    out = _ingest(landing, lake, home)
    assert "d1: up to date" in out and "skipped" in out
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert _materializations(instance, "d1") == before


def test_a_new_code_version_reruns_that_asset_and_its_downstream_only(landing, tmp_path, home):
    make_adtf_drive(landing, "d1")
    lake = tmp_path / "lake"
    _ingest(landing, lake, home)
    bumped = dg.map_asset_specs(lambda s: s.replace_attributes(code_version="bumped"), [calibrated])
    assets = [a for a in ASSETS if a is not calibrated] + bumped
    graph = dg.Definitions(
        assets=[*INPUTS, *assets], resources=_resources(landing, lake)
    ).resolve_asset_graph()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert (
            not Staleness(instance, defs.resolve_asset_graph(), KEYS).drive("d1").keys
        )  # before the bump: up to date
        plan = Staleness(instance, graph, KEYS).drive("d1")
        todo = {k.to_user_string() for k in plan.keys}
        assert todo == {
            *(k.to_user_string() for k in calibrated.keys),
            "scene_catalog",
            "scene_sets",
            "waypoints",
        }
        assert {k.to_user_string() for k in plan.why} == {
            k.to_user_string() for k in calibrated.keys
        }
        assert all("new code version" in w for w in plan.why.values())
        before = _materializations(instance, "d1")
        resources = _resources(landing, lake)
        job = dg.Definitions(
            assets=[*INPUTS, *assets], jobs=[lake_job], resources=resources
        ).resolve_job_def(lake_job.name)
        assert job.execute_in_process(
            partition_key="d1", instance=instance, asset_selection=sorted(plan.keys)
        ).success
        after = _materializations(instance, "d1")
        assert {k for k in after if after[k] != before[k]} == todo  # nothing else ran
        assert not Staleness(instance, graph, KEYS).drive("d1").keys  # up to date again

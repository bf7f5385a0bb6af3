"""The scene_catalog asset in Dagster: drives with planted events become scenes, a calm drive
an empty catalog, every check passing; the asset is part of the lake job; a broken rule fails
the step with the rule file named."""

from __future__ import annotations

import shutil

import dagster as dg
import pytest

from bridge_lake.defs.resources import LakeResource
from bridge_lake.defs.scenes import scene_catalog
from bridge_lake.lake import Lake


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.check_name: e
        for e in result.get_asset_check_evaluations()
        if e.asset_key.to_user_string() == "scene_catalog"
    }


def _materialization(result: dg.ExecuteInProcessResult) -> dg.AssetMaterialization:
    (mat,) = [
        m.materialization
        for m in result.get_asset_materialization_events()
        if m.asset_key.to_user_string() == "scene_catalog"
    ]
    return mat


@pytest.fixture
def lake_copy(event_lake, tmp_path):
    """The event lake copied, so the asset's writes leave the shared one as it was."""
    shutil.copytree(event_lake.root / "lake", tmp_path / "lake")
    return str(tmp_path / "lake")


def test_scene_catalog_asset_on_event_and_calm_drives(event_lake, lake_copy):
    drives = [*event_lake.planted, event_lake.calm]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", drives)
        for drive in drives:
            result = dg.materialize(
                [scene_catalog],
                partition_key=drive,
                instance=instance,
                resources={"lake": LakeResource(root=lake_copy)},
            )
            assert result.success
            checks = _checks(result)
            assert set(checks) == {"catalog_valid", "inputs_present", "camera_frames_measured"}
            problems = {k: c.description for k, c in checks.items() if not c.passed}
            assert not problems, (drive, problems)
            planted = event_lake.planted.get(drive, [])
            mat = _materialization(result)
            assert mat.metadata["dagster/row_count"].value == len(planted)
            assert f"scenes/catalog/drive={drive}/part-" in mat.metadata["path"].value
            catalog = Lake(lake_copy).read_partition("scenes", "catalog", drive)
            tags = {t for tags in catalog.column("tags").to_pylist() for t in tags}
            assert {e.kind for e in planted} <= tags
            if not planted:  # the calm drive: a valid, empty catalog
                assert catalog.num_rows == 0
                assert "calm drive" in checks["catalog_valid"].description


def test_scene_catalog_is_in_the_lake_job():
    from bridge_lake.definitions import ASSETS
    from bridge_lake.defs.jobs import lake_job

    assert scene_catalog in ASSETS
    # resolved on the assets alone: building Definitions here would pick up the definitions
    # load context (and dead instance) another test left behind
    keys = lake_job.selection.resolve(ASSETS)
    assert dg.AssetKey("scene_catalog") in keys


def test_a_broken_rule_fails_the_step_naming_its_file(lake_copy, tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "broken.sql").write_text("SELECT $drive AS drive FROM nowhere")
    params = tmp_path / "params.yaml"
    params.write_text("rules: {}\n")
    config = {"rules_dir": str(rules), "params_file": str(params)}
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", ["adtf-s7"])
        result = dg.materialize(
            [scene_catalog],
            partition_key="adtf-s7",
            instance=instance,
            resources={"lake": LakeResource(root=lake_copy)},
            run_config={"ops": {"scene_catalog": {"config": config}}},
            raise_on_error=False,
        )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert str(rules / "broken.sql") in failure.step_failure_data.error.message

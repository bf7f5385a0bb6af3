"""The exports asset: an MCAP per drive in the lake, its health as blocking checks."""

import dagster as dg
import pytest

from bridge_lake.defs.calibrated import calibrated
from bridge_lake.defs.exports import exports
from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.export.health import check_file
from bridge_lake.synth import synthesize


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    made = synthesize(root, drives=2, minutes=0.1, seed=5, source="all", light=True)
    adtf = next(d for d in made if d.source == "adtf")
    # this drive brings its own topic mapping (drive.yaml `export_mapping`)
    (adtf.path / "topics.yaml").write_text(
        "topics:\n"
        "  - {topic: /imu, type: sensor_msgs/msg/Imu, table: imu}\n"
        "  - {topic: /tf_static, type: tf2_msgs/msg/TFMessage, table: calibrated/tf_static}\n"
    )
    with (adtf.path / "drive.yaml").open("a") as f:
        f.write("export_mapping: topics.yaml\n")
    return root, [d.drive_id for d in made]


def test_exports_in_the_lake_with_health_checks(landing, tmp_path):
    root, drive_ids = landing
    resources = {
        "lake": LakeResource(root=str(tmp_path / "lake")),
        "landing": LandingZoneResource(root=str(root)),
    }
    config = {"ops": {"exports": {"config": {"formats": ["mcap", "bag1"]}}}}
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", drive_ids)
        for drive_id in drive_ids:
            result = dg.materialize(
                [raw_manifest, normalized, calibrated, exports],
                partition_key=drive_id,
                instance=instance,
                resources=resources,
                run_config=config,
            )
            assert result.success
            logs = [e.user_message for e in instance.all_logs(result.run_id)]
            for step in ("normalize", "calibrate", "export"):  # progress lines, no silence
                assert any(m.startswith(f"{step} {drive_id}") and "(done)" in m for m in logs)
            checks = {
                e.check_name: e
                for e in result.get_asset_check_evaluations()
                if e.asset_key.to_user_string() == "exports"
            }
            assert checks["health"].passed, checks["health"].description
            assert checks["rates"].passed, checks["rates"].description
            (mat,) = [
                m.materialization
                for m in result.get_asset_materialization_events()
                if m.asset_key.to_user_string() == "exports"
            ]
            path = mat.metadata["path"].value
            assert path.endswith(f"exports/drive={drive_id}/{drive_id}.mcap")
            files = mat.metadata["files"].value
            assert set(files) == {"mcap", "bag1"}
            assert files["mcap"]["messages"] == files["bag1"]["messages"] > 0
            health = check_file(path)
            assert health.ok
            if drive_id.startswith("adtf"):
                assert set(health.topics) == {"/imu", "/tf_static"}
            else:
                assert "/velodyne_points" in health.topics

"""The calibrated multi-asset under Dagster: both sources, checks per table, the report."""

import dagster as dg
import pytest

from bridge_lake.calibrate.quality import CHECKS
from bridge_lake.defs.calibrated import ASSET_TABLES, calibrated
from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.lake.query import connect
from bridge_lake.synth import synthesize


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    made = synthesize(root, drives=2, minutes=0.1, seed=4, source="all", light=True)
    return root, [d.drive_id for d in made]


def test_calibrated_assets_for_both_sources(landing, tmp_path):
    root, drive_ids = landing
    lake_root = tmp_path / "lake"
    resources = {
        "lake": LakeResource(root=str(lake_root)),
        "landing": LandingZoneResource(root=str(root)),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", drive_ids)
        for drive_id in drive_ids:
            result = dg.materialize(
                [raw_manifest, normalized, calibrated],
                partition_key=drive_id,
                instance=instance,
                resources=resources,
            )
            assert result.success
            evals = result.get_asset_check_evaluations()
            cal = {
                (e.asset_key.to_user_string(), e.check_name): e
                for e in evals
                if e.asset_key.to_user_string().startswith("calibrated_")
            }
            assert set(cal) == {
                (f"calibrated_{t}", c) for t, checks in CHECKS.items() for c in checks
            }
            errors = [k for k, e in cal.items() if not e.passed and e.severity.value == "ERROR"]
            assert errors == []
            assert all(e.description for e in cal.values())  # a reason a person reads
            mats = {
                m.asset_key.to_user_string(): m.materialization
                for m in result.get_asset_materialization_events()
            }
            assert {f"calibrated_{t}" for t in ASSET_TABLES} <= set(mats)
            poses = mats["calibrated_poses"].metadata
            assert poses["dagster/row_count"].value > 0
            report = open(poses["report"].value, encoding="utf-8").read()
            assert 'id="trajectory"' in report and "<line" in report and " m</text>" in report
            schema = mats["calibrated_lidar_transforms"].metadata["dagster/column_schema"].value
            assert schema.columns[2].description == "rotation row 0, column 0 (sensor → base_link)"
    con = connect(str(lake_root))
    rows = dict(con.sql("select drive, count(*) from calibrated_poses group by all").fetchall())
    assert set(rows) == set(drive_ids) and min(rows.values()) > 100
    adtf = next(d for d in drive_ids if d.startswith("adtf"))
    per_frame = con.sql(
        "select count(*) / count(distinct scan_id) from calibrated_frames, unnest(matches) "
        "where drive = ?",
        params=[adtf],
    ).fetchall()
    assert per_frame == [(3.0,)]  # front_camera, imu and gnss matched for every key frame

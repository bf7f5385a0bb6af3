"""The normalized multi-asset end to end on synthetic drives of both sources."""

from pathlib import Path

import dagster as dg
import pytest

from bridge_lake.lake.query import connect, scan
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.normalize import drive as drive_module
from bridge_lake.synth import synthesize
from bridge_lake_tests.defs import materialize_normalized


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    made = synthesize(root, drives=2, minutes=0.1, seed=3, source="all", light=True)
    return root, [d.drive_id for d in made]


def test_both_sources_normalize_with_passing_checks(landing, tmp_path):
    root, drive_ids = landing
    lake_root = tmp_path / "lake"
    for drive_id in drive_ids:
        result = materialize_normalized(root, lake_root, drive_id)
        assert result.success, drive_id
        failed_errors = [
            (e.asset_key.to_user_string(), e.check_name)
            for e in result.get_asset_check_evaluations()
            if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
        ]
        assert failed_errors == []
        mats = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
        assert {f"normalized_{t}" for t in NORMALIZED} <= set(mats)
        report = mats["normalized_streams"].materialization.metadata["report"].value
        assert "<svg" in open(report, encoding="utf-8").read()
        link = mats["normalized_streams"].materialization.metadata["report_link"].value
        assert link == Path(report).resolve().as_uri()
    con = connect(str(lake_root))
    for table in ("imu", "gnss", "lidar_scans", "lidar_points", "camera_frames"):
        duck = dict(
            con.sql(f"select drive, count(*) from normalized_{table} group by all").fetchall()
        )
        polars = dict(scan(table, lake=str(lake_root)).group_by("drive").len().collect().rows())
        assert duck == polars and len(duck) == 2, table
    adtf = next(d for d in drive_ids if d.startswith("adtf"))
    assert set(
        dict(con.sql("select drive, count(*) from normalized_can_frames group by all").fetchall())
    ) == {adtf}
    balance = con.sql("select sum(unaccounted) from sensor_rates").fetchall()[0][0]
    assert balance == 0


def test_lost_records_fail_the_blocking_conservation_check(landing, tmp_path, monkeypatch):
    root, drive_ids = landing
    nclt = next(d for d in drive_ids if d.startswith("nclt"))
    real = drive_module.NORMALIZERS["nclt"]

    def lossy(drive_dir, sink):
        real(drive_dir, sink)
        stats = next(iter(sink._streams.values()))
        stats.records_read += 5  # five records that went nowhere

    lake_root = tmp_path / "lake"
    assert materialize_normalized(root, lake_root, nclt).success
    imu = lake_root / "normalized" / "imu" / f"drive={nclt}" / "part-00000.parquet"
    published = imu.read_bytes()
    monkeypatch.setitem(drive_module.NORMALIZERS, "nclt", lossy)
    result = materialize_normalized(root, lake_root, nclt)
    assert not result.success
    # write-audit-publish: the rejected run left the previous tables in place
    assert imu.read_bytes() == published
    assert not [
        m
        for m in result.get_asset_materialization_events()
        if m.asset_key.to_user_string().startswith("normalized_")
    ]
    conservation = [
        e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "conservation" and not e.passed
    ]
    assert len(conservation) == 1
    assert conservation[0].severity == dg.AssetCheckSeverity.ERROR


def test_rematerializing_gives_identical_bytes(landing, tmp_path):
    root, drive_ids = landing
    lake_root = tmp_path / "lake"

    def snapshot():
        return {
            p.relative_to(lake_root): p.read_bytes()
            for p in (lake_root / "normalized").rglob("*.parquet")
        }

    for drive_id in drive_ids:
        assert materialize_normalized(root, lake_root, drive_id).success
    first = snapshot()
    for drive_id in drive_ids:
        assert materialize_normalized(root, lake_root, drive_id).success
    second = snapshot()
    assert len(first) == 2 * len(NORMALIZED)
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []

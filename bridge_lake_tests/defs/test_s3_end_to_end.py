"""The whole pipeline with the landing zone and the lake on S3 (moto's server on 127.0.0.1),
configured the way a deployment is, through BRIDGE_LAKE_ROOT / _LANDING / _S3_ENDPOINT.

One tiny synthetic drive per source is uploaded under a prefix of a bucket; the landing-zone
sensor finds them, and each requested run materializes every asset (raw, normalized,
calibrated, exports, scene catalog and scene sets, waypoints). The lake is then read back by
readers that did not write it: DuckDB views, polars scans, pyarrow over s3fs, the mcap reader,
and the `bridge-lake query` command.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import posixpath
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest
import s3fs
import yaml
from mcap.reader import make_reader

from bridge_lake.cli import main
from bridge_lake.definitions import ASSETS
from bridge_lake.defs.resources import LandingZoneResource, default_resources
from bridge_lake.defs.sensors import landing_zone_sensor
from bridge_lake.lake import Lake
from bridge_lake.lake.paths import LAYERS
from bridge_lake.lake.query import connect, scan
from bridge_lake.lake.schemas import TABLES
from bridge_lake.scenes.rules import PARAMS_FILE
from bridge_lake.synth import synthesize

BUCKET = "bl-end-to-end"
LANDING = f"s3://{BUCKET}/fleet/landing"
LAKE = f"s3://{BUCKET}/fleet/lake"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class Fleet:
    fs: s3fs.S3FileSystem
    lake: Lake
    drives: dict[str, str]
    """drive id → source"""
    requested: list[dg.RunRequest]
    results: dict[str, dg.ExecuteInProcessResult]
    scene_counts: dict[str, int]


def _scene_params(path: Path) -> Path:
    """The shipped scene parameters with GNSS judged degraded below fix mode 9 (no receiver
    reaches it), so these few seconds of drive still give every drive a scene to export."""
    params = yaml.safe_load(PARAMS_FILE.read_text())
    params["rules"]["gnss_degraded"]["min_fix_mode"] = 9
    path.write_text(yaml.safe_dump(params))
    return path


def _apply(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """What the daemon does with a tick's result besides launching runs."""
    for req in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    for event in result.asset_events or []:
        instance.report_runless_asset_event(event)


@pytest.fixture(scope="module")
def fleet(s3_server, tmp_path_factory) -> Fleet:
    tmp = tmp_path_factory.mktemp("s3_end_to_end")
    with pytest.MonkeyPatch.context() as env, dg.instance_for_test() as instance:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "BRIDGE_LAKE_ROOT": LAKE,
            "BRIDGE_LAKE_LANDING": LANDING,
            "BRIDGE_LAKE_S3_ENDPOINT": s3_server,
        }.items():
            env.setenv(name, value)
        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
        fs.mkdir(BUCKET)
        made = synthesize(tmp / "landing", drives=2, minutes=0.05, seed=16, light=True)
        for d in made:
            fs.put(str(d.path), f"{BUCKET}/fleet/landing/{d.drive_id}", recursive=True)
        fs.pipe(  # beside the drives: an upload tool's scratch, a bad name, a loose file
            {
                f"{BUCKET}/fleet/landing/_upload_tmp/part.dat": b"x",
                f"{BUCKET}/fleet/landing/bad name/x.dat": b"x",
                f"{BUCKET}/fleet/landing/README.txt": b"x",
            }
        )
        resources = default_resources()  # from the BRIDGE_LAKE_* variables above
        landing = resources["landing"]
        assert isinstance(landing, LandingZoneResource) and landing.root == LANDING
        cursor, requested = None, []
        for _ in range(2):  # a drive is requested once its listing held still for a tick
            ctx = dg.build_sensor_context(
                instance=instance, cursor=cursor, resources={"landing": landing}
            )
            result = landing_zone_sensor(ctx)
            _apply(instance, result)
            requested += result.run_requests
            cursor = result.cursor
        config = {
            **QUIET,
            "ops": {
                "scene_catalog": {"config": {"params_file": str(_scene_params(tmp / "p.yaml"))}}
            },
        }
        results = {}
        for req in requested:
            results[req.partition_key] = dg.materialize(
                ASSETS,
                partition_key=req.partition_key,
                instance=instance,
                resources=resources,
                tags=req.tags,
                run_config=config,
                raise_on_error=False,
            )
        scene_counts = {
            key: next(
                m.metadata["dagster/row_count"].value
                for m in r.asset_materializations_for_node("scene_catalog")
            )
            for key, r in results.items()
            if r.success
        }
        lake = resources["lake"].get()
        yield Fleet(
            fs, lake, {d.drive_id: d.source for d in made}, requested, results, scene_counts
        )


def test_sensor_finds_the_drives_under_the_prefix(fleet):
    assert sorted(r.partition_key for r in fleet.requested) == sorted(fleet.drives)
    assert len({r.run_key for r in fleet.requested}) == len(fleet.requested)


def test_every_asset_of_every_drive_materializes_on_s3(fleet):
    for drive, result in fleet.results.items():
        failures = [e.step_key for e in result.all_events if e.is_step_failure]
        assert result.success, f"{drive}: failed steps {failures}"
        failed = [
            f"{c.asset_key.to_user_string()}.{c.check_name}"
            for c in result.get_asset_check_evaluations()
            if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR
        ]
        assert failed == [], drive
        paths = [
            str(m.metadata["path"].value)
            for node in ("raw_manifest", "exports", "scene_sets", "waypoints")
            for m in result.asset_materializations_for_node(node)
            if "path" in m.metadata
        ]
        assert paths and all(p.startswith(f"s3://{BUCKET}/fleet/lake/") for p in paths), paths


def test_every_layer_is_published_as_sets_named_by_manifests(fleet):
    lake, fs = fleet.lake, fleet.fs
    tables = 0
    for layer in LAYERS:
        for table in lake.tables(layer):
            published = lake.table_files(layer, table)
            assert sorted(published) == sorted(fleet.drives), f"{layer}/{table}"
            for drive, files in published.items():
                pdir = lake.partition_dir(layer, table, drive)
                manifest = json.loads(fs.cat_file(f"{pdir}/_manifest.json"))
                assert [posixpath.basename(f) for f in files] == manifest["parts"]
                assert {posixpath.dirname(f) for f in files} == {f"{pdir}/{manifest['set']}"}
                for f in files:  # pyarrow over s3fs, not our reader
                    pq.read_metadata(f, filesystem=fs)
            tables += 1
    assert tables >= len(TABLES)
    assert fs.find(f"{BUCKET}/fleet/lake/_staging") == []


def test_exports_scene_sets_waypoints_and_reports_on_s3(fleet):
    fs = fleet.fs
    con = connect(fleet.lake)
    routes = 0
    for drive in fleet.drives:
        root = f"{BUCKET}/fleet/lake/exports/drive={drive}"
        with fs.open(f"{root}/{drive}.mcap", "rb") as f:
            stats = make_reader(io.BytesIO(f.read())).get_summary().statistics
        imu = con.execute("select count(*) from normalized_imu where drive = ?", [drive])
        assert stats.message_count > imu.fetchone()[0] > 0
        scenes = sorted(p for p in fs.ls(f"{root}/scenes", detail=False) if p.endswith(".mcap"))
        assert fleet.scene_counts[drive] >= 1
        assert len(scenes) == 2 * fleet.scene_counts[drive]  # clean + the default variant
        for path in scenes:
            manifest = json.loads(fs.cat_file(path.removesuffix(".mcap") + ".json"))
            assert manifest["file"]["sha256"] == hashlib.sha256(fs.cat_file(path)).hexdigest()
        sets = con.execute("select count(*) from scenes_sets where drive = ?", [drive])
        assert sets.fetchone()[0] == len(scenes)
        (made,) = fleet.results[drive].asset_materializations_for_node("waypoints")
        if "no_route" in made.metadata:  # too few seconds of moving: a report, no CSV
            assert not fs.exists(f"{root}/waypoints.csv")
        else:
            routes += 1
            text = fs.cat_file(f"{root}/waypoints.csv").decode()
            rows = list(csv.reader(io.StringIO(text)))
            assert rows[0] == ["x", "y", "z", "yaw", "velocity", "change_flag"]
            assert len(rows) - 1 == made.metadata["dagster/row_count"].value > 0
            assert fs.cat_file(f"{root}/waypoints.svg").lstrip().startswith(b"<")
        for report in ("normalized", "calibrated", "waypoints"):
            page = fs.cat_file(f"{BUCKET}/fleet/lake/reports/drive={drive}/{report}.html")
            assert page.lstrip().lower().startswith(b"<!doctype html")
    assert routes >= 1


def test_duckdb_and_polars_read_the_lake_on_s3(fleet):
    con = connect(fleet.lake)
    for drive, result in fleet.results.items():
        recorded = {
            m.asset_key.to_user_string(): m.metadata["dagster/row_count"].value
            for m in result.get_asset_materialization_events()
            for m in [m.materialization]
            if "dagster/row_count" in m.metadata
        }
        for asset, table in (("normalized_imu", "imu"), ("normalized_gnss", "gnss")):
            sql = f"select count(*) from normalized_{table} where drive = ?"
            in_duckdb = con.execute(sql, [drive]).fetchone()[0]
            in_polars = scan(table, lake=fleet.lake, drives=[drive]).collect().height
            assert in_duckdb == in_polars == recorded[asset] > 0, (drive, table)
    summary = con.execute("select drive, source from drive_summary order by drive").fetchall()
    assert summary == sorted(fleet.drives.items())
    poses = scan("poses", lake=fleet.lake, layer="calibrated").collect()
    assert set(poses["drive"]) == set(fleet.drives)


def test_query_command_on_s3_from_the_settings(fleet, capsys, monkeypatch, s3_server):
    monkeypatch.setenv("BRIDGE_LAKE_S3_ENDPOINT", s3_server)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    sql = "select drive, count(*) as n from raw_manifest group by drive order by drive"
    assert main(["query", sql, "--lake", LAKE, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["drive"] for r in rows] == sorted(fleet.drives)
    assert all(r["n"] > 0 for r in rows)

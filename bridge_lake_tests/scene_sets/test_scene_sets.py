"""Scene sets: each scene equals a plain export of its window, carries /tf_static and the
last /tf, and a re-made set is byte-identical; manifests in JSON and in scenes/sets."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from mcap.reader import make_reader

from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas.scene_sets import SCENE_SETS
from bridge_lake.scenes.sets import (
    DEFAULT_VARIANT,
    SceneSetError,
    read_catalog,
    scene_set_to_lake,
    scenes_folder,
    table_snapshot,
)
from bridge_lake_tests.scene_sets import CATALOG_SCHEMA, scene_lake, write_catalog


@pytest.fixture(scope="module")
def lake_and_sets(synthetic_lake, tmp_path_factory):
    lake, drives = scene_lake(synthetic_lake, tmp_path_factory.mktemp("sets") / "lake")
    sets = {src: scene_set_to_lake(lake, drive) for src, drive in drives.items()}
    return lake, drives, sets


def _messages(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    out: dict[str, list[tuple[int, bytes]]] = {}
    with path.open("rb") as f:
        for _, ch, m in make_reader(f, validate_crcs=True).iter_messages(log_time_order=False):
            out.setdefault(ch.topic, []).append((m.log_time, m.data))
    return out


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("src", ["nclt", "adtf"])
def test_scenes_equal_a_plain_export_of_their_window(lake_and_sets, src, tmp_path):
    lake, drives, sets = lake_and_sets
    made = sets[src]
    clean = [f for f in made.files if f.variant == "clean"]
    assert [f.scene.scene_id for f in clean] == [
        s.scene_id for s in read_catalog(lake, drives[src])
    ]
    for f in clean:
        plain = tmp_path / f"{f.scene.scene_id}.mcap"
        export_drive(
            lake,
            drives[src],
            plain,
            ExportRequest(spans=[(f.scene.t_start_ns, f.scene.t_end_ns)]),
        )
        scene, reference = _messages(f.path), _messages(plain)
        assert set(scene) == set(reference) and len(scene) > 5
        for topic in reference:
            assert scene[topic] == reference[topic], topic  # same messages, same order
        # the scene starts with its transforms: /tf_static latched, the last /tf before it
        start, end = f.scene.t_start_ns, f.scene.t_end_ns
        assert [t for t, _ in scene["/tf_static"]] == [start]
        tf_times = [t for t, _ in scene["/tf"]]
        assert tf_times[0] < start <= tf_times[1]
        for topic, msgs in scene.items():
            if topic not in ("/tf", "/tf_static"):
                assert all(start <= t < end for t, _ in msgs), topic
        counts = {t: v["messages"] for t, v in f.manifest["topics"].items()}
        assert counts == {t: len(v) for t, v in scene.items()}


def test_manifest_json_and_table(lake_and_sets):
    lake, drives, sets = lake_and_sets
    made = sets["adtf"]
    first = made.files[0]
    doc = json.loads(first.manifest_path.read_text())
    scene = first.scene
    assert doc["scene_id"] == scene.scene_id and doc["drive"] == drives["adtf"]
    assert doc["window"]["start_ns"] == scene.t_start_ns
    assert doc["window"]["end_ns"] == scene.t_end_ns
    assert doc["tags"] == ["braking"] and doc["score"] == 0.5
    assert doc["rules"] == [{"file": "hard_braking.sql", "sha256": "ab" * 32}]
    assert doc["file"]["sha256"] == hashlib.sha256(first.path.read_bytes()).hexdigest()
    assert doc["format"]["mapping"]["file"] == "adtf.yaml" and doc["format"]["mapping"]["shipped"]
    tables = doc["lake_snapshot"]["tables"]
    assert {
        "normalized/imu",
        "normalized/lidar_points",
        "calibrated/poses",
        "raw/drives",
        "scenes/catalog",
        "calibrated/tf_static",
    } <= set(tables)
    imu = tables["normalized/imu"]
    assert imu["rows"] == lake.read_partition("normalized", "imu", drives["adtf"]).num_rows
    assert imu["files"] == 1 and len(imu["fingerprint"]) == 64
    # the default variant: the first scene only, faults listed
    variants = [f for f in made.files if f.variant != "clean"]
    assert [(f.scene.scene_id, f.variant) for f in variants] == [(scene.scene_id, "faults")]
    assert variants[0].manifest["faults"]["seed"] == DEFAULT_VARIANT.seed
    assert variants[0].path.name == f"{scene.scene_id}--faults.mcap"

    table = lake.read_partition("scenes", "sets", drives["adtf"])
    assert table.schema.equals(SCENE_SETS.schema, check_metadata=False)
    rows = {(r["scene_id"], r["variant"]): r for r in table.to_pylist()}
    assert set(rows) == {(f.scene.scene_id, f.variant) for f in made.files}
    v = rows[(scene.scene_id, "faults")]
    assert v["source_file"] == first.path.name and v["source_sha256"] == first.sha256
    assert len(v["faults"]) == variants[0].manifest["faults"]["count"]
    assert v["sha256"] == variants[0].sha256
    assert (
        v["manifest_sha256"] == hashlib.sha256(variants[0].manifest_path.read_bytes()).hexdigest()
    )
    assert rows[(scene.scene_id, "clean")]["faults"] is None


def test_remaking_a_scene_set_gives_identical_bytes(lake_and_sets):
    lake, drives, sets = lake_and_sets
    for src, drive in drives.items():
        folder = Path(scenes_folder(lake, drive))
        before = _digests(folder)
        table = lake.read_partition("scenes", "sets", drive)
        assert len(before) == 2 * len(sets[src].files)  # an MCAP and a manifest each
        scene_set_to_lake(lake, drive)
        assert _digests(folder) == before
        assert lake.read_partition("scenes", "sets", drive).equals(table)


def test_snapshot_follows_the_partitions(lake_and_sets, tmp_path):
    lake, drives, _ = lake_and_sets
    drive = drives["nclt"]
    before = {t: table_snapshot(lake, t, drive) for t in ("normalized/imu", "raw/drives")}
    assert before == {t: table_snapshot(lake, t, drive) for t in before}
    full = table_snapshot(lake, "normalized/imu", drive, content=True)
    assert full.rows == before["normalized/imu"].rows
    assert full.fingerprint != before["normalized/imu"].fingerprint
    imu = lake.read_partition("normalized", "imu", drive)
    other = Lake(str(tmp_path / "other"))
    other.write_partition("normalized", "imu", drive, imu)
    assert table_snapshot(other, "normalized/imu", drive) == before["normalized/imu"]
    other.write_partition("normalized", "imu", drive, imu.slice(1))
    assert table_snapshot(other, "normalized/imu", drive).fingerprint != (
        before["normalized/imu"].fingerprint
    )


def test_stale_files_go_and_errors_are_clear(synthetic_lake, tmp_path):
    lake, drives = scene_lake(synthetic_lake, tmp_path / "lake")
    drive = drives["adtf"]
    first = scene_set_to_lake(lake, drive, variants=())
    folder = Path(scenes_folder(lake, drive))
    assert len(list(folder.glob("*.mcap"))) == 2
    write_catalog(lake, drive, [(f"{drive}-b", 5.0, 7.0, ["turn"])])
    second = scene_set_to_lake(lake, drive, variants=())
    assert sorted(p.name for p in folder.iterdir()) == [f"{drive}-b.json", f"{drive}-b.mcap"]
    assert second.files[0].sha256 == first.files[1].sha256  # the same window, the same bytes
    assert second.files[0].manifest_sha256 != first.files[1].manifest_sha256  # new snapshot
    assert lake.read_partition("scenes", "sets", drive).num_rows == 1
    with pytest.raises(SceneSetError, match="no scene catalog"):
        scene_set_to_lake(lake, drives["nclt"].replace("nclt", "nope"))
    bad = pa.Table.from_pylist(
        [
            {
                "scene_id": "../x",
                "t_start_ns": 0,
                "t_end_ns": 1,
                "tags": [],
                "score": 0.0,
                "rules": [],
                "rule_hashes": [],
            }
        ],
        CATALOG_SCHEMA,
    )
    lake.write_partition("scenes", "catalog", drive, bad)
    with pytest.raises(SceneSetError, match="cannot name a file"):
        scene_set_to_lake(lake, drive)


def test_the_asset_writes_and_checks_the_set(synthetic_lake, tmp_path):
    from bridge_lake.defs.resources import LakeResource, LandingZoneResource
    from bridge_lake.defs.scene_sets import scene_sets

    lake, drives = scene_lake(synthetic_lake, tmp_path / "lake")
    drive = drives["adtf"]
    resources = {
        "lake": LakeResource(root=lake.root),
        "landing": LandingZoneResource(root=synthetic_lake.landing.root),
    }
    config = {
        "ops": {
            "scene_sets": {
                "config": {
                    "variants": [
                        {
                            "name": "late-imu",
                            "faults": ["imu:delay=30ms", "camera:black=1"],
                            "scenes": ["tag:turn"],
                            "seed": 3,
                        }
                    ]
                }
            }
        }
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", [drive])
        result = dg.materialize(
            [scene_sets],
            partition_key=drive,
            instance=instance,
            resources=resources,
            run_config=config,
        )
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert check.passed, check.description
    assert check.description == "3 files pass replay-check"
    (mat,) = [m.materialization for m in result.get_asset_materialization_events()]
    assert mat.metadata["dagster/row_count"].value == 3
    assert mat.metadata["variants"].value == 1
    assert mat.metadata["dagster/uri"].value.endswith(f"exports/drive={drive}/scenes")
    names = sorted(p.name for p in Path(scenes_folder(lake, drive)).glob("*.mcap"))
    assert names == [f"{drive}-a.mcap", f"{drive}-b--late-imu.mcap", f"{drive}-b.mcap"]

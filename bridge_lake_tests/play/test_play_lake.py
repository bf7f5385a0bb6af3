"""`bridge-lake play --drive` serves what `bridge-lake export` writes, without a file; a scene
manifest plays its scene, `--variant` its fault-injected variant."""

from __future__ import annotations

import pytest

from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.scenes.faults import VariantSpec, parse_compact
from bridge_lake.scenes.sets import build_scene, build_variant, read_catalog
from bridge_lake_tests.play.support import by_topic
from bridge_lake_tests.play.test_play import mcap_truth, receive_all
from bridge_lake_tests.scene_sets import scene_lake


def _same(client, truth) -> None:
    got = by_topic(client.messages)
    want: dict[str, list] = {}
    for topic, t, data in truth:
        want.setdefault(topic, []).append((t, data))
    assert sorted(got) == sorted(want)
    for topic, items in want.items():
        assert [(m.log_time, m.data) for m in got[topic]] == items, topic


def test_drive_plays_what_the_export_writes(synthetic_lake, tmp_path):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "d.mcap"
    export_drive(lake, drive, out, ExportRequest())
    client, summary = receive_all("--drive", drive, "--lake", str(lake.root))
    _same(client, mcap_truth(out))
    types = {c["topic"]: c["schemaName"] for c in client.channels.values()}
    assert types["/tf_static"] == "tf2_msgs/msg/TFMessage"
    assert "total" in summary


@pytest.fixture(scope="module")
def scenes(synthetic_lake, tmp_path_factory):
    root = tmp_path_factory.mktemp("play_scenes")
    lake, drives = scene_lake(synthetic_lake, root / "lake")
    folder = root / "scenes"
    folder.mkdir()
    clean = build_scene(lake, read_catalog(lake, drives["adtf"])[0], folder)
    variant = build_variant(
        clean, VariantSpec("drops", tuple(parse_compact("imu:drop=5%")), seed=3), folder
    )
    return clean, variant


def test_scene_manifest_and_its_variant_play(scenes):
    clean, variant = scenes
    manifest = clean.manifest_path
    client, _ = receive_all(str(manifest))
    _same(client, mcap_truth(clean.path))
    client, _ = receive_all(str(manifest), "--variant", "drops")
    _same(client, mcap_truth(variant.path))
    assert (
        len(by_topic(client.messages)["/sensor/imu/data"])
        < clean.manifest["topics"]["/sensor/imu/data"]["messages"]
    )

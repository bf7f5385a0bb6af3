"""Bags that real ROS 1 wrote, read count for count (and byte for byte) with rosbag's own
API: health, the readers play and waypoints open bags with, recover (whole and cut files,
whose rebuilt chunks `rosbag check` must pass), `waypoints --bag` and `play --ros1`.

The bags are made here from an uncompressed export of the synthetic NCLT drive:
`rosbag compress --lz4` / `--bz2` (ROS's Python writer) and `rosbag record --lz4` while
`rosbag play` plays it (ROS's C++ recorder; once with its default 768 KB chunks, once with
3 MB chunks, whose LZ4 frames hold several independent 1 MB blocks)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from bridge_lake.cli import main
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.health import check_file
from bridge_lake.formats.ros.bag1_recover import recover_bag1, scan_bag1
from bridge_lake.formats.ros.readers import open_recording
from bridge_lake.waypoints.sources import poses_from_bag
from bridge_lake_tests.ros1_graph import (
    Subscriber,
    build_subscriber,
    rosbag_check,
    rosbag_compress,
    rosbag_read,
    rosbag_record,
    roscore,
)

pytestmark = pytest.mark.usefixtures("ros1")
REPO = Path(__file__).resolve().parents[2]
BAGS = ["compress-lz4", "compress-bz2", "record-lz4", "record-lz4-3mb"]


@pytest.fixture(scope="module")
def ros_bags(ros1, synthetic_lake, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("ros_written")
    base = out / "base.bag"
    drive = synthetic_lake.drives["nclt"].drive_id
    result = export_drive(
        synthetic_lake.lake,
        drive,
        base,
        ExportRequest(format="bag1", compression="none", start=0.0, end=5.0),
    )
    bags = {
        "compress-lz4": rosbag_compress(base, out / "compress-lz4.bag", "lz4"),
        "compress-bz2": rosbag_compress(base, out / "compress-bz2.bag", "bz2"),
    }
    topics = sorted(result.topics)
    with roscore(out) as env:
        bags["record-lz4"] = rosbag_record(env, base, topics, out / "record-lz4.bag", "--lz4")
        bags["record-lz4-3mb"] = rosbag_record(
            env, base, topics, out / "record-lz4-3mb.bag", "--lz4", "--chunksize=3072"
        )
    return bags


@pytest.fixture(scope="module")
def truth(ros_bags) -> dict[str, dict[str, dict]]:
    return {name: rosbag_read(path) for name, path in ros_bags.items()}


def counts(per_topic: dict[str, dict]) -> dict[str, int]:
    return {t: v["messages"] for t, v in per_topic.items()}


def test_the_bags_are_what_ros_writes(ros_bags, truth):
    """The test data is real: ROS compressed the chunks, and the recorder got messages."""
    for name, path in ros_bags.items():
        info = subprocess.run(
            ["/usr/bin/python3", "/usr/bin/rosbag", "info", "--yaml", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"compression: {name.split('-')[1]}" in info, name
        assert sum(counts(truth[name]).values()) > 1000, name


@pytest.mark.parametrize("name", BAGS)
def test_health_counts_every_message_rosbag_reads(ros_bags, truth, name):
    health = check_file(ros_bags[name])
    assert scan_bag1(ros_bags[name]).ok
    assert {t: h.messages for t, h in health.topics.items()} == counts(truth[name])
    assert {t: h.decoded for t, h in health.topics.items()} == counts(truth[name])


@pytest.mark.parametrize("name", BAGS)
def test_the_reader_gives_rosbags_bytes(ros_bags, truth, name):
    """`open_recording`, which play, waypoints and health read bags with."""
    hashes: dict[str, hashlib._Hash] = {}
    n: dict[str, int] = {}
    with open_recording(ros_bags[name]) as recording:
        for m in recording.messages():
            hashes.setdefault(m.channel.topic, hashlib.sha256()).update(m.data)
            n[m.channel.topic] = n.get(m.channel.topic, 0) + 1
    assert n == counts(truth[name])
    assert {t: h.hexdigest() for t, h in hashes.items()} == {
        t: v["raw"] for t, v in truth[name].items()
    }


@pytest.mark.parametrize("name", BAGS)
def test_recover_keeps_every_message_in_a_bag_rosbag_reads(ros_bags, truth, name, tmp_path):
    out = tmp_path / "recovered.bag"
    report = recover_bag1(ros_bags[name], out)
    assert {t: c.kept for t, c in report.topics.items()} == counts(truth[name])
    assert rosbag_check(out).returncode == 0
    assert rosbag_read(out) == truth[name]


def test_a_cut_bag_recovers_to_one_rosbag_reads(ros_bags, tmp_path):
    """Cut at 80 % of the first 3 MB chunk: its whole 1 MB LZ4 blocks become a new chunk,
    compressed by our codec, which ROS must read (lz4's default frames it refuses)."""
    from rosbags.rosbag1 import Reader

    path = ros_bags["record-lz4-3mb"]
    with Reader(path) as reader:
        first, second = (c.pos for c in reader.chunk_infos[:2])
    cut = tmp_path / "cut.bag"
    cut.write_bytes(path.read_bytes()[: first + (second - first) * 4 // 5])
    out = tmp_path / "recovered.bag"
    report = recover_bag1(cut, out)
    assert report.partial_chunk_messages > 0
    check = rosbag_check(out)
    assert check.returncode == 0, check.stderr[-2000:]
    assert counts(rosbag_read(out)) == {t: c.kept for t, c in report.topics.items() if c.kept}


@pytest.mark.parametrize("name", BAGS)
def test_waypoints_from_the_bag_take_every_odometry_message(ros_bags, truth, name, tmp_path):
    track = poses_from_bag(ros_bags[name], "/odom")
    assert len(track.time_ns) == truth[name]["/odom"]["messages"]
    csv = tmp_path / "wp.csv"
    bag = str(ros_bags[name])
    args = ["--pose-topic", "/odom", "--spacing-m", "0.1", "--out", str(csv)]
    rc = main(["waypoints", "--bag", bag, *args])
    assert rc == 0 and csv.is_file()


@pytest.mark.parametrize("name", ["compress-lz4", "record-lz4-3mb"])
def test_play_ros1_sends_every_message_rosbag_reads(ros_bags, truth, name, tmp_path):
    want = truth[name]
    exe = build_subscriber(tmp_path)
    with roscore(tmp_path) as env:
        sub = Subscriber(exe, env, sorted(want), sum(counts(want).values()), 60)
        cmd = ["play", str(ros_bags[name]), "--ros1", "--wait-for-client"]
        play = subprocess.run(
            [sys.executable, "-m", "bridge_lake.cli", *cmd],
            env=dict(env, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        got = sub.results()
    assert play.returncode == 0, play.stderr[-2000:]
    hashes: dict[str, hashlib._Hash] = {}
    for g in got:
        hashes.setdefault(g.topic, hashlib.sha256()).update(g.data)
        assert (g.datatype, g.md5sum) == (want[g.topic]["type"], want[g.topic]["md5sum"])
    assert {t: h.hexdigest() for t, h in hashes.items()} == {t: v["raw"] for t, v in want.items()}

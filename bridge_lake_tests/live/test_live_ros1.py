"""`bridge-lake live --ros1` into a real ROS 1 graph (Debian's roscore on a free port) with a
roscpp ShapeShifter subscriber as the oracle: every message the bridge wrote into its live
MCAP reaches the subscriber, in order, with the ROS 1 type and md5sum, and bytes that
rosbags' Noetic types decode to the CDR message's fields."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bridge_lake.synth.adtf import write_adtf_drive
from bridge_lake_tests.live.live_support import DRIVE_YAML, ENV, mcap_messages
from bridge_lake_tests.play.test_play_ros1 import _fields
from bridge_lake_tests.ros1_graph import Subscriber, build_subscriber, roscore

pytestmark = pytest.mark.usefixtures("ros1")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A finished recording in a drive folder (drive.yaml names the vehicle's rig)."""
    [src] = write_adtf_drive(tmp_path_factory.mktemp("src"), minutes=0.05, seed=8)
    (src.parent / "drive.yaml").write_text(DRIVE_YAML)
    return src


def _live(env, src: Path, out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "bridge_lake.cli", "live", str(src), "--ros1"]
    cmd += ["--catalog-from", str(src), "--out", str(out), "--force", "--idle-s", "1"]
    return subprocess.run(cmd, env=dict(ENV, **env), capture_output=True, text=True, timeout=180)


def test_a_finished_recording_reaches_roscpp_in_ros1_form(tmp_path, source):
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    exe = build_subscriber(tmp_path)
    with roscore(tmp_path) as env:
        first = _live(env, source, tmp_path / "first.mcap")  # the topics this drive has
        assert first.returncode == 0, first.stdout + first.stderr
        assert "publishing into ROS 1 at " + env["ROS_MASTER_URI"] in first.stdout
        want, complete = mcap_messages(tmp_path / "first.mcap")
        assert complete and want
        total = sum(len(v) for v in want.values())
        sub = Subscriber(exe, env, sorted(want), total, 40)
        r = _live(env, source, tmp_path / "live.mcap")
        assert r.returncode == 0, r.stdout + r.stderr
        got = sub.results()
    assert "Traceback" not in r.stderr
    live, _ = mcap_messages(tmp_path / "live.mcap")
    assert {t: len(v) for t, v in live.items()} == {t: len(v) for t, v in want.items()}
    with (tmp_path / "live.mcap").open("rb") as f:
        types = {c.topic: s.name for s, c, _ in make_reader(f).iter_messages()}
    noetic, humble = get_typestore(Stores.ROS1_NOETIC), get_typestore(Stores.ROS2_HUMBLE)
    checked = 0
    for topic, messages in live.items():
        arrived = [g for g in got if g.topic == topic]
        assert len(arrived) == len(messages), (
            topic,
            {t: sum(g.topic == t for g in got) for t in live},
        )
        typ = types[topic]
        assert {g.datatype for g in arrived} == {typ.replace("/msg/", "/")}, topic
        if typ in noetic.types and typ in humble.types:
            assert {g.md5sum for g in arrived} == {noetic.generate_msgdef(typ)[1]}, topic
            for g, (_t, cdr) in zip(arrived, messages, strict=True):
                want_fields = _fields(humble.deserialize_cdr(cdr, typ))
                assert _fields(noetic.deserialize_ros1(g.data, typ)) == want_fields, topic
            checked += 1
    assert checked >= 2, "at least two topics decoded by the independent types"

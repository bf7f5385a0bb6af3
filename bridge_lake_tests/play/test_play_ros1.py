"""`bridge-lake play --ros1` into a real ROS 1 graph: Debian's roscore on a free port, a
roscpp subscriber (ShapeShifter: raw bytes, announced datatype and md5sum) and `rostopic
echo` as the oracles; the bag's own connection headers (read by rosbags) are the truth."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bridge_lake_tests.play.support import REPO, write_bag1, write_mcap
from bridge_lake_tests.ros1_graph import Subscriber, build_subscriber, roscore

pytestmark = pytest.mark.usefixtures("ros1")


@pytest.fixture(scope="module")
def sub_exe(tmp_path_factory):
    return build_subscriber(tmp_path_factory.mktemp("ros1sub"))


def _bag_truth(path):
    from rosbags.rosbag1 import Reader

    with Reader(path) as r:
        # rosbags names types the ROS 2 way (pkg/msg/Name); the header says pkg/Name
        meta = {c.topic: (c.msgtype.replace("/msg/", "/"), c.digest) for c in r.connections}
        msgs = [(c.topic, bytes(data)) for c, _t, data in r.messages()]
    return meta, msgs


def _play(env, *args, timeout=120):
    env = dict(env, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "bridge_lake.cli", "play", *args, "--ros1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def test_every_message_reaches_roscpp_with_the_bag_bytes_type_and_md5(tmp_path, sub_exe):
    bag = write_bag1(tmp_path / "a.bag", seconds=2.0)
    meta, truth = _bag_truth(bag)
    topics = sorted(meta)
    with roscore(tmp_path) as env:
        sub = Subscriber(sub_exe, env, [*topics, "/clock"], len(truth) + 10**6, 25)
        echo = subprocess.Popen(
            ["/usr/bin/python3", "/usr/bin/rostopic", "echo", "-n", "1", "/chatter"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        r = _play(env, str(bag), "--clock", "--wait-for-client")
        assert r.returncode == 0, r.stderr
        got = sub.results()
        echo_out, _ = echo.communicate(timeout=30)
    assert "Traceback" not in r.stderr
    for topic in topics:
        want = [d for t, d in truth if t == topic]
        arrived = [g for g in got if g.topic == topic]
        assert [g.data for g in arrived] == want, topic
        assert {(g.datatype, g.md5sum) for g in arrived} == {meta[topic]}, topic
    clock = [g for g in got if g.topic == "/clock"]
    assert clock and {(g.datatype, g.md5sum) for g in clock} == {
        ("rosgraph_msgs/Clock", "a9c97c1d230cfc112e270351a944ee47")
    }
    assert 'data: "hello 0"' in echo_out


def test_latched_tf_static_reaches_a_late_subscriber(tmp_path, sub_exe):
    bag = write_bag1(tmp_path / "a.bag", seconds=4.0)
    meta, truth = _bag_truth(bag)
    tf = [d for t, d in truth if t == "/tf_static"]
    with roscore(tmp_path) as env:
        env2 = dict(env, PYTHONPATH=str(REPO))
        play = subprocess.Popen(
            [sys.executable, "-m", "bridge_lake.cli", "play", str(bag), "--ros1"],
            env=env2,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        time.sleep(2.0)  # /tf_static was published at the start, before this one joined
        sub = Subscriber(sub_exe, env, ["/tf_static"], 1, 15)
        got = sub.results()
        _out, err = play.communicate(timeout=60)
    assert play.returncode == 0, err
    assert [g.data for g in got] == tf[:1]
    assert got[0].datatype == meta["/tf_static"][0]


def test_a_topic_without_a_ros1_form_is_named(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=1.0)  # has a JSON /status channel
    with roscore(tmp_path) as env:
        r = _play(env, str(path))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "/status" in r.stderr + r.stdout


def test_no_master_is_a_clear_error(tmp_path):
    bag = write_bag1(tmp_path / "a.bag", seconds=0.5)
    env = dict(os.environ, ROS_MASTER_URI="http://127.0.0.1:1")
    r = _play(env, str(bag), timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "127.0.0.1:1" in r.stderr + r.stdout


def _fields(msg):
    """A message as nested plain values, ROS 1's Header.seq left out (ROS 2 has none)."""
    if hasattr(msg, "__dataclass_fields__"):
        return {k: _fields(getattr(msg, k)) for k in msg.__dataclass_fields__ if k != "seq"}
    if isinstance(msg, list | tuple):
        return [_fields(v) for v in msg]
    if hasattr(msg, "tolist"):
        return msg.tolist()
    return msg


def test_ros2_mcap_arrives_in_ros1_form(tmp_path, sub_exe):
    """An MCAP of CDR messages (ros2msg schemas) goes out in ROS 1 form: the md5sum of the
    ROS 1 (Noetic) type, and bytes that rosbags' Noetic types decode to the same fields."""
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    noetic, humble = get_typestore(Stores.ROS1_NOETIC), get_typestore(Stores.ROS2_HUMBLE)
    mcap = write_mcap(tmp_path / "a.mcap", seconds=1.0)
    topics = ["/chatter", "/imu"]  # Noetic's store has no tf2_msgs to check /tf_static with
    with mcap.open("rb") as f:
        truth = [
            (c.topic, s.name, humble.deserialize_cdr(m.data, s.name))
            for s, c, m in make_reader(f).iter_messages(topics=topics)
        ]
    with roscore(tmp_path) as env:
        sub = Subscriber(sub_exe, env, topics, len(truth), 25)
        r = _play(env, str(mcap), "--topics", *topics, "--wait-for-client")
        assert r.returncode == 0, r.stderr
        got = sub.results()
    assert len(got) == len(truth)
    for topic in topics:
        want = [(typ, msg) for t, typ, msg in truth if t == topic]
        arrived = [g for g in got if g.topic == topic]
        typ = want[0][0]
        assert {(g.datatype, g.md5sum) for g in arrived} == {
            (typ.replace("/msg/", "/"), noetic.generate_msgdef(typ)[1])
        }, topic
        for g, (_typ, msg) in zip(arrived, want, strict=True):
            assert _fields(noetic.deserialize_ros1(g.data, typ)) == _fields(msg), topic

"""`waypoints --bag` on this project's own exports of a moving NCLT drive: /odom carries the
drive's speed in its twist; a copy whose twist is zero on every message (as the exports were
before they carried one, and as many writers leave it) still gives the route, its speed taken
from the pose differences, instead of "the vehicle never moves"."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag1 import Writer as Writer1

from bridge_lake.cli import main
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.messages import typestore
from bridge_lake.waypoints import KMH_PER_MPS, read_csv

FORMATS = {"mcap": ("mcap", "ros2", ".mcap"), "bag1": ("bag1", "ros1", ".bag")}


@pytest.fixture(scope="module")
def exports(synthetic_lake, tmp_path_factory) -> dict[str, Path]:
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["nclt"].drive_id
    out = tmp_path_factory.mktemp("odom_exports")
    made = {}
    for name, (fmt, enc, suffix) in FORMATS.items():
        path = out / f"nclt{suffix}"
        export_drive(lake, drive, path, ExportRequest(format=fmt, encoding=enc, topics=["/odom"]))
        made[name] = path
    return made


def _wheel_speed_max(synthetic_lake) -> float:
    """The generator's own top speed (wheels.csv, v = (left + right) / 2) in m/s."""
    path = next(synthetic_lake.drives["nclt"].path.rglob("wheels.csv"))
    rows = np.genfromtxt(path, delimiter=",", invalid_raise=False)
    rows = rows[np.isfinite(rows).all(axis=1)]
    return float(((rows[:, 1] + rows[:, 2]) / 2).max())


def _waypoints(bag: Path, out: Path, capsys) -> tuple[int, str]:
    code = main(["waypoints", "--bag", str(bag), "--pose-topic", "/odom", "--out", str(out)])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("name", FORMATS)
def test_waypoints_from_the_exported_odom(synthetic_lake, exports, tmp_path, capsys, name):
    out = tmp_path / "route.csv"
    code, printed = _waypoints(exports[name], out, capsys)
    assert code == 0, printed
    assert "pose differences" not in printed  # the twist gave the speed
    wp = read_csv(out)
    assert len(wp["x"]) >= 5
    # the route's top speed is the drive's (odometry is the truth scaled by 1.01)
    top = 1.01 * _wheel_speed_max(synthetic_lake) * KMH_PER_MPS
    assert wp["velocity"].max() == pytest.approx(top, rel=0.05)


def test_waypoints_when_the_twist_is_zero(synthetic_lake, exports, tmp_path, capsys):
    """A ROS 1 bag whose /odom twist is all zeros (rosbags' writer, our poses): the speed
    comes from the pose differences and the route is the one the twist gives."""
    zeroed = tmp_path / "zero_twist.bag"
    store = typestore(1)
    with AnyReader([exports["bag1"]], default_typestore=store) as reader, Writer1(zeroed) as out:
        (conn,) = [c for c in reader.connections if c.topic == "/odom"]
        target = out.add_connection("/odom", conn.msgtype, typestore=store)
        n = 0
        for _, t, raw in reader.messages(connections=[conn]):
            msg = reader.deserialize(raw, conn.msgtype)
            still = store.types["geometry_msgs/msg/Twist"](
                linear=dataclasses.replace(msg.twist.twist.linear, x=0.0, y=0.0, z=0.0),
                angular=dataclasses.replace(msg.twist.twist.angular, x=0.0, y=0.0, z=0.0),
            )
            msg = dataclasses.replace(
                msg,
                twist=dataclasses.replace(msg.twist, twist=still, covariance=np.zeros(36)),
            )
            out.write(target, t, store.serialize_ros1(msg, conn.msgtype))
            n += 1
    assert n > 100
    code, printed = _waypoints(zeroed, tmp_path / "zero.csv", capsys)
    assert code == 0, printed
    assert "never moves" not in printed
    assert "speed from pose differences: the twist of /odom is zero on every message" in printed
    assert _waypoints(exports["bag1"], tmp_path / "twist.csv", capsys)[0] == 0
    zero, twist = read_csv(tmp_path / "zero.csv"), read_csv(tmp_path / "twist.csv")
    assert len(zero["x"]) >= 5 and abs(len(zero["x"]) - len(twist["x"])) <= 1
    top = 1.01 * _wheel_speed_max(synthetic_lake) * KMH_PER_MPS
    assert zero["velocity"].max() == pytest.approx(top, rel=0.1)

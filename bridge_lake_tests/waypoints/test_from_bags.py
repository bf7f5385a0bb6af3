"""Waypoints from bags written by another tool (rosbags' writers): ROS 1 and ROS 2 (sqlite3
and MCAP storage), a bare MCAP file; PoseStamped, PoseWithCovarianceStamped, Odometry, TF.
A bag without the pose topic (or frame pair) is an error that names what the bag has."""

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from scipy.spatial import cKDTree

from bridge_lake.cli import main
from bridge_lake.waypoints import (
    WaypointSourceError,
    build_waypoints,
    check_waypoints,
    poses_from_bag,
    read_csv,
)
from bridge_lake_tests.waypoints import drive, u_turn

NS = 1_000_000_000


@pytest.fixture(scope="module")
def track():
    """A U-turn (30 m straights, R = 10 m) from standstill to standstill, 20 Hz."""
    return drive(u_turn(30.0, 10.0), 60 + np.pi * 10, v=5.0, stand_start_s=2, stand_end_s=2)


class Messages:
    """Messages of one ROS version built from rosbags' own typestore."""

    def __init__(self, ros: int) -> None:
        self.ros = ros
        self.store = get_typestore(Stores.ROS1_NOETIC if ros == 1 else Stores.ROS2_HUMBLE)
        if "tf2_msgs/msg/TFMessage" not in self.store.fielddefs:  # rosbags' Noetic store
            self.store.register(
                get_types_from_msg(
                    "geometry_msgs/TransformStamped[] transforms", "tf2_msgs/msg/TFMessage"
                )
            )
        self.t = self.store.types

    def header(self, t_ns: int, frame: str):
        stamp = self.t["builtin_interfaces/msg/Time"](sec=t_ns // NS, nanosec=t_ns % NS)
        extra = {"seq": 0} if self.ros == 1 else {}
        return self.t["std_msgs/msg/Header"](**extra, stamp=stamp, frame_id=frame)

    def pose(self, x: float, y: float, z: float):
        point = self.t["geometry_msgs/msg/Point"](x=x, y=y, z=z)
        q = self.t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)
        return self.t["geometry_msgs/msg/Pose"](position=point, orientation=q)

    def twist(self, speed: float):
        vec = self.t["geometry_msgs/msg/Vector3"]
        return self.t["geometry_msgs/msg/Twist"](
            linear=vec(x=speed, y=0.0, z=0.0), angular=vec(x=0.0, y=0.0, z=0.0)
        )

    def pose_stamped(self, t, x, y, z, speed):
        return self.t["geometry_msgs/msg/PoseStamped"](
            header=self.header(t, "map"), pose=self.pose(x, y, z)
        )

    def pose_cov(self, t, x, y, z, speed):
        cov = self.t["geometry_msgs/msg/PoseWithCovariance"](
            pose=self.pose(x, y, z), covariance=np.zeros(36)
        )
        return self.t["geometry_msgs/msg/PoseWithCovarianceStamped"](
            header=self.header(t, "map"), pose=cov
        )

    def twist_stamped(self, t, x, y, z, speed):
        return self.t["geometry_msgs/msg/TwistStamped"](
            header=self.header(t, "base_link"), twist=self.twist(speed)
        )

    def odometry(self, t, x, y, z, speed):
        return self.t["nav_msgs/msg/Odometry"](
            header=self.header(t, "map"),
            child_frame_id="base_link",
            pose=self.t["geometry_msgs/msg/PoseWithCovariance"](
                pose=self.pose(x, y, z), covariance=np.zeros(36)
            ),
            twist=self.t["geometry_msgs/msg/TwistWithCovariance"](
                twist=self.twist(speed), covariance=np.zeros(36)
            ),
        )

    def tf(self, t, x, y, z, speed):
        """map → base_link, plus base_link → lidar in the same message."""
        vec, quat = self.t["geometry_msgs/msg/Vector3"], self.t["geometry_msgs/msg/Quaternion"]

        def stamped(parent, child, px, py, pz):
            return self.t["geometry_msgs/msg/TransformStamped"](
                header=self.header(t, parent),
                child_frame_id=child,
                transform=self.t["geometry_msgs/msg/Transform"](
                    translation=vec(x=px, y=py, z=pz), rotation=quat(x=0.0, y=0.0, z=0.0, w=1.0)
                ),
            )

        return self.t["tf2_msgs/msg/TFMessage"](
            transforms=[
                stamped("map", "base_link", x, y, z),
                stamped("base_link", "lidar", 1, 0, 2),
            ]
        )

    def serialize(self, msg) -> bytes:
        if self.ros == 1:
            return self.store.serialize_ros1(msg, msg.__msgtype__)
        return self.store.serialize_cdr(msg, msg.__msgtype__)


def write_bag(path: Path, ros: int, topics: dict[str, str], track, storage=None) -> Path:
    """One message per pose sample on every topic; `topics`: name → Messages method."""
    m = Messages(ros)
    samples = list(
        zip(track.time_ns.tolist(), track.x, track.y, track.z, track.speed_mps, strict=True)
    )
    writer = Writer1(path) if ros == 1 else Writer2(path, version=9, storage_plugin=storage)
    with writer:
        conns = {}
        for topic, kind in topics.items():
            msgtype = getattr(m, kind)(*samples[0]).__msgtype__
            conns[topic] = writer.add_connection(topic, msgtype, typestore=m.store)
        for t, x, y, z, speed in samples:
            for topic, kind in topics.items():
                msg = getattr(m, kind)(t, float(x), float(y), float(z), float(speed))
                writer.write(conns[topic], t, m.serialize(msg))
    return path


@pytest.fixture(scope="module")
def bags(tmp_path_factory, track):
    root = tmp_path_factory.mktemp("bags")
    made = {
        "bag2-sqlite": write_bag(
            root / "bag2_sqlite",
            2,
            {"/current_pose": "pose_stamped", "/current_velocity": "twist_stamped"},
            track,
            StoragePlugin.SQLITE3,
        ),
        "bag2-mcap": write_bag(
            root / "bag2_mcap", 2, {"/odom": "odometry", "/tf": "tf"}, track, StoragePlugin.MCAP
        ),
        "bag1": write_bag(
            root / "drive.bag",
            1,
            {"/tf": "tf", "/ndt_pose": "pose_cov", "/vehicle/twist": "twist_stamped"},
            track,
        ),
    }
    # a bare MCAP: the storage file of the rosbag2 folder without its metadata.yaml
    (mcap_file,) = made["bag2-mcap"].glob("*.mcap")
    made["mcap"] = root / "poses.mcap"
    shutil.copy(mcap_file, made["mcap"])
    # the kind is read from the content: names that say nothing (or the wrong thing)
    made["bag1-renamed"] = root / "drive.bag1"
    shutil.copy(made["bag1"], made["bag1-renamed"])
    made["mcap-renamed"] = root / "poses.bag"
    shutil.copy(mcap_file, made["mcap-renamed"])
    made["bag2-storage-file"] = mcap_file  # listed by the folder's metadata.yaml: the bag
    return made


CASES = {
    "ros2 sqlite3 PoseStamped + TwistStamped": (
        "bag2-sqlite",
        "/current_pose",
        "/current_velocity",
    ),
    "ros2 mcap Odometry": ("bag2-mcap", "/odom", None),
    "bare mcap Odometry": ("mcap", "/odom", None),
    "bare mcap TF": ("mcap", "/tf", None),
    "ros1 TF": ("bag1", "/tf", None),
    "ros1 PoseWithCovarianceStamped + TwistStamped": ("bag1", "/ndt_pose", "/vehicle/twist"),
    "ros1 named .bag1": ("bag1-renamed", "/ndt_pose", "/vehicle/twist"),
    "mcap named .bag": ("mcap-renamed", "/odom", None),
    "ros2 bag by its storage file": ("bag2-storage-file", "/odom", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_waypoints_from_bags_equal_the_direct_ones(case, bags, track):
    name, pose_topic, velocity_topic = CASES[case]
    poses = poses_from_bag(bags[name], pose_topic, velocity_topic=velocity_topic)
    np.testing.assert_array_equal(poses.time_ns, track.time_ns)
    np.testing.assert_allclose(
        np.column_stack([poses.x, poses.y]), np.column_stack([track.x, track.y])
    )
    reference = build_waypoints(track)
    wp = build_waypoints(poses)
    assert all(f.passed for f in check_waypoints(wp)), check_waypoints(wp)
    if not np.isnan(poses.speed_mps).all():  # the speed came with the poses: same waypoints
        np.testing.assert_allclose(poses.speed_mps, track.speed_mps, atol=1e-9)
        np.testing.assert_allclose(wp.x, reference.x, atol=1e-9)
        np.testing.assert_allclose(wp.velocity_mps, reference.velocity_mps, atol=1e-9)
        return
    # PoseStamped / TF alone: speed from positions; the ends move by a few centimetres
    assert abs(len(wp) - len(reference)) <= 1
    assert abs(wp.length_m - reference.length_m) < 0.1


ZERO_TWIST = [
    (2, {"/odom": "odometry"}, "/odom", None),
    (
        1,
        {"/ndt_pose": "pose_cov", "/vehicle/twist": "twist_stamped"},
        "/ndt_pose",
        "/vehicle/twist",
    ),
]


@pytest.mark.parametrize(("ros", "topics", "pose", "velocity"), ZERO_TWIST)
def test_a_twist_zero_everywhere_is_no_speed(tmp_path, track, ros, topics, pose, velocity):
    """Odometry or a velocity topic whose twist was never filled in: the speed comes from the
    positions (as for PoseStamped alone), not "the vehicle never moves"."""
    still = dataclasses.replace(track, speed_mps=np.zeros(len(track.time_ns)))
    path = tmp_path / ("zero.bag" if ros == 1 else "zero")
    write_bag(path, ros, topics, still, None if ros == 1 else StoragePlugin.MCAP)
    poses = poses_from_bag(path, pose, velocity_topic=velocity)
    assert np.isnan(poses.speed_mps).all()
    assert f"speed from pose differences: the twist of {velocity or pose} is zero" in poses.source
    wp = build_waypoints(poses)
    reference = build_waypoints(track)
    assert abs(len(wp) - len(reference)) <= 1 and abs(wp.length_m - reference.length_m) < 0.1
    assert wp.velocity_mps.max() == pytest.approx(reference.velocity_mps.max(), rel=0.05)
    off, _ = cKDTree(np.column_stack([reference.x, reference.y])).query(
        np.column_stack([wp.x, wp.y])
    )
    assert off.max() < 0.6  # nearest reference waypoint (1 m apart): same path
    np.testing.assert_allclose(
        wp.velocity_mps, np.interp(wp.s, reference.s, reference.velocity_mps), atol=0.3
    )


def test_cli_writes_csv_and_plot_from_a_bag(bags, tmp_path, capsys):
    out = tmp_path / "route.csv"
    code = main(["waypoints", "--bag", str(bags["bag1"]), "--pose-topic", "/tf", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "point_count" in printed and "FAIL" not in printed
    table = read_csv(out)
    assert table["change_flag"][0] == table["change_flag"][-1] == 1
    assert table["velocity"].max() == pytest.approx(5.0 * 3.6, abs=0.5)  # km/h
    assert out.with_suffix(".svg").read_text().startswith("<svg")


def test_a_bag_without_the_pose_topic_fails_listing_its_topics(bags, tmp_path, capsys):
    with pytest.raises(WaypointSourceError) as err:
        poses_from_bag(bags["bag2-sqlite"], "/ndt_pose")
    message = str(err.value)
    assert "no pose topic /ndt_pose" in message
    assert "/current_pose (geometry_msgs/msg/PoseStamped)" in message
    assert "/current_velocity (geometry_msgs/msg/TwistStamped)" in message
    out = tmp_path / "w.csv"
    code = main(
        ["waypoints", "--bag", str(bags["mcap"]), "--pose-topic", "/gnss", "--out", str(out)]
    )
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err_lines) == 1
    assert (
        err_lines[0].startswith("bridge-lake: error: ")
        and "/odom (nav_msgs/msg/Odometry)" in err_lines[0]
    )
    assert not out.exists() and not list(tmp_path.iterdir())  # never an empty file


def test_missing_transforms_and_wrong_types_are_clear(bags):
    with pytest.raises(WaypointSourceError, match=r"no transform odom → base_link.*map→base_link"):
        poses_from_bag(bags["bag1"], "/tf", parent_frame="odom")
    with pytest.raises(WaypointSourceError, match="is geometry_msgs/msg/TwistStamped, not one of"):
        poses_from_bag(bags["bag2-sqlite"], "/current_velocity")
    with pytest.raises(WaypointSourceError, match="no velocity topic /twist"):
        poses_from_bag(bags["bag2-sqlite"], "/current_pose", velocity_topic="/twist")
    with pytest.raises(WaypointSourceError, match="no such bag"):
        poses_from_bag(bags["bag1"].with_name("nothing.bag"), "/tf")


def test_an_empty_pose_topic_is_an_error(tmp_path, track):
    m = Messages(2)
    with Writer2(tmp_path / "empty", version=9) as writer:
        writer.add_connection("/current_pose", "geometry_msgs/msg/PoseStamped", typestore=m.store)
    with pytest.raises(WaypointSourceError, match="topic /current_pose has no messages"):
        poses_from_bag(tmp_path / "empty", "/current_pose")

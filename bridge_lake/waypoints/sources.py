"""Pose tracks for waypoints: a drive's calibrated poses, or any bag or MCAP a user has.

Files are opened by content with `formats.ros` (ROS 1 bags, ROS 2 bag folders with sqlite3
or MCAP storage, MCAP files; a storage file of a bag folder is read as the bag) and decoded
with rosbags' CDR / ROS 1 deserializers: a bag with the types it defines, an MCAP with
rosbags' shipped types (the file's definitions for the others). Pose topics may be
geometry_msgs/PoseStamped, PoseWithCovarianceStamped, nav_msgs/Odometry (its twist gives the
speed) or tf2_msgs/TFMessage (one frame pair, map → base_link unless told otherwise); an
optional velocity topic (TwistStamped, TwistWithCovarianceStamped or Odometry) gives the speed
instead. A twist that is zero on every message (many writers leave it unset, as this project's
own exports did before they carried one) or NaN is no speed: the waypoints then take it from
the pose differences, and the track's source says so. Times are header stamps (the log time
where a stamp is zero).

A missing topic, a topic of another type, an empty topic or a TF stream without the frame
pair is an error naming what the file does have: an empty waypoint file is never written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bridge_lake.clock import NS_PER_S
from bridge_lake.formats.ros.bag2_recover import read_metadata
from bridge_lake.formats.ros.decoding import RosbagsDecoder, file_types, shipped_stores
from bridge_lake.formats.ros.files import RecordingError
from bridge_lake.formats.ros.readers import open_recording
from bridge_lake.lake import Lake
from bridge_lake.waypoints.path import PoseTrack, WaypointError

POSE_TYPES = (
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/PoseWithCovarianceStamped",
    "nav_msgs/msg/Odometry",
    "tf2_msgs/msg/TFMessage",
)
VELOCITY_TYPES = (
    "geometry_msgs/msg/TwistStamped",
    "geometry_msgs/msg/TwistWithCovarianceStamped",
    "nav_msgs/msg/Odometry",
)

Messages = Callable[[list[str]], Iterator[tuple[str, int, object]]]
"""(topics) → (topic, log time ns, decoded message), in log-time order."""


class WaypointSourceError(WaypointError):
    """A bag or MCAP that does not hold the poses asked for."""


def poses_from_lake(lake: Lake, drive: str) -> PoseTrack:
    """base_link in the drive's map frame (ENU at calibrated/map_origin), with its speed."""
    table = lake.read_partition(
        "calibrated", "poses", drive, columns=["time_ns", "x_m", "y_m", "z_m", "speed_mps"]
    )
    if table.num_rows == 0:
        raise WaypointSourceError(f"drive {drive}: calibrated/poses is empty")
    col = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    speed = np.asarray(col["speed_mps"], dtype=np.float64)  # nulls arrive as NaN
    return PoseTrack(
        col["time_ns"], col["x_m"], col["y_m"], col["z_m"], speed, f"drive {drive} calibrated/poses"
    )


def poses_from_bag(
    path: str | Path,
    pose_topic: str,
    *,
    velocity_topic: str | None = None,
    parent_frame: str = "map",
    child_frame: str = "base_link",
) -> PoseTrack:
    """The pose track of `pose_topic` in a ROS 1 bag, ROS 2 bag folder or MCAP file."""
    path = Path(path)
    if not path.exists():
        raise WaypointSourceError(f"{path}: no such bag or MCAP file")
    frames = (parent_frame.strip("/"), child_frame.strip("/"))
    with _open(path) as (topics, messages):
        pose_type = _require(path, topics, pose_topic, POSE_TYPES, "pose")
        wanted = [pose_topic]
        if velocity_topic is not None:
            _require(path, topics, velocity_topic, VELOCITY_TYPES, "velocity")
            wanted.append(velocity_topic)
        poses: list[tuple[int, float, float, float, float]] = []
        twists: list[tuple[int, float]] = []
        pairs: dict[tuple[str, str], int] = {}
        for topic, log_ns, msg in messages(wanted):
            if topic == pose_topic:
                poses.extend(_poses(msg, pose_type, log_ns, frames, pairs))
            if topic == velocity_topic:
                twists.append(_twist(msg, log_ns))
    where = f"{path} {pose_topic}"
    if pose_type == "tf2_msgs/msg/TFMessage":
        where += f" {frames[0]}→{frames[1]}"
        if not poses:
            seen = ", ".join(f"{p}→{c} ({n})" for (p, c), n in sorted(pairs.items())) or "none"
            raise WaypointSourceError(
                f"{path}: no transform {frames[0]} → {frames[1]} on {pose_topic}; frame "
                f"pairs present: {seen} (give the pair with --parent-frame/--child-frame)"
            )
    if not poses:
        raise WaypointSourceError(f"{path}: topic {pose_topic} has no messages")
    arr = np.array(poses, dtype=np.float64)
    time_ns = np.array([p[0] for p in poses], dtype=np.int64)
    speed, speed_topic = arr[:, 4], pose_topic
    if velocity_topic is not None:
        if not twists:
            raise WaypointSourceError(f"{path}: velocity topic {velocity_topic} has no messages")
        tw = np.array(twists, dtype=np.float64)
        order = np.argsort(tw[:, 0], kind="stable")
        speed = np.interp(
            time_ns.astype(np.float64), tw[order, 0], tw[order, 1], left=np.nan, right=np.nan
        )
        speed_topic = velocity_topic
        where += f" (speed from {velocity_topic})"
    if pose_type == "nav_msgs/msg/Odometry" or velocity_topic is not None:
        speed, note = _unset_twist(speed, speed_topic)
        where += note
    return PoseTrack(time_ns, arr[:, 1], arr[:, 2], arr[:, 3], speed, where)


def _unset_twist(speed: np.ndarray, topic: str) -> tuple[np.ndarray, str]:
    """A twist zero on every message (or NaN) was never filled in: unknown speed (NaN), which
    the path derives from the pose differences, rather than "the vehicle never moves"."""
    known = speed[np.isfinite(speed)]
    if known.size and (known != 0).any():
        return speed, ""
    why = "zero on every message" if known.size else "absent (NaN)"
    return np.full(
        speed.shape, np.nan
    ), f" (speed from pose differences: the twist of {topic} is {why})"


# --- reading --------------------------------------------------------------------------------


def _require(
    path: Path, topics: dict[str, str], topic: str, types: tuple[str, ...], what: str
) -> str:
    present = ", ".join(f"{t} ({ty})" for t, ty in sorted(topics.items())) or "none"
    if topic not in topics:
        raise WaypointSourceError(f"{path}: no {what} topic {topic}; topics present: {present}")
    if topics[topic] not in types:
        raise WaypointSourceError(
            f"{path}: {what} topic {topic} is {topics[topic]}, not one of "
            f"{', '.join(t.replace('/msg/', '/') for t in types)}; topics present: {present}"
        )
    return topics[topic]


@contextmanager
def _open(path: Path) -> Iterator[tuple[dict[str, str], Messages]]:
    """Topics (name → ROS 2 style type) and a message iterator of any bag or MCAP file,
    opened by content (`formats.ros`)."""
    try:
        recording = open_recording(_recording_path(path))
    except RecordingError as exc:
        raise WaypointSourceError(str(exc)) from None
    with recording:
        topics = {c.topic: c.type for c in recording.channels.values()}
        if recording.kind == "mcap":  # rosbags' shipped types, the file's for the others
            decode = RosbagsDecoder(shipped_stores())
        else:
            key = "ros1" if recording.kind == "bag1" else "cdr"
            decode = RosbagsDecoder({key: file_types(recording.channels.values())})

        def messages(wanted: list[str]) -> Iterator[tuple[str, int, object]]:
            stream = recording.messages(topics=wanted)
            if not recording.time_ordered:  # MCAP in file order: in log time order, stably
                stream = iter(sorted(stream, key=lambda m: m.log_time))
            try:
                for m in stream:
                    yield m.channel.topic, m.log_time, decode(m)
            except RecordingError as exc:
                raise WaypointSourceError(str(exc)) from None

        yield topics, messages


def _recording_path(path: Path) -> Path:
    """A storage file that its folder's rosbag2 metadata.yaml lists is read as that bag."""
    if path.is_file():
        info = read_metadata(path.parent)
        if info is not None and path.name in (info.get("relative_file_paths") or []):
            return path.parent
    return path


# --- message fields -------------------------------------------------------------------------


def _stamp(header, log_ns: int) -> int:
    ns = int(header.stamp.sec) * NS_PER_S + int(header.stamp.nanosec)
    return ns if ns > 0 else int(log_ns)


def _poses(
    msg, msgtype: str, log_ns: int, frames: tuple[str, str], pairs: dict[tuple[str, str], int]
) -> list[tuple[int, float, float, float, float]]:
    nan = float("nan")
    if msgtype == "tf2_msgs/msg/TFMessage":
        out = []
        for tr in msg.transforms:
            pair = (tr.header.frame_id.strip("/"), tr.child_frame_id.strip("/"))
            pairs[pair] = pairs.get(pair, 0) + 1
            if pair == frames:
                p = tr.transform.translation
                out.append((_stamp(tr.header, log_ns), p.x, p.y, p.z, nan))
        return out
    if msgtype == "nav_msgs/msg/Odometry":
        p, v = msg.pose.pose.position, msg.twist.twist.linear
        return [(_stamp(msg.header, log_ns), p.x, p.y, p.z, float(np.hypot(v.x, v.y)))]
    pose = msg.pose.pose if msgtype.endswith("PoseWithCovarianceStamped") else msg.pose
    p = pose.position
    return [(_stamp(msg.header, log_ns), p.x, p.y, p.z, nan)]


def _twist(msg, log_ns: int) -> tuple[int, float]:
    """Horizontal speed of a twist (forward and lateral components of the body frame)."""
    twist = msg.twist.twist if hasattr(msg.twist, "twist") else msg.twist
    v = twist.linear
    return _stamp(msg.header, log_ns), float(np.hypot(v.x, v.y))

"""A channel's ROS 1 form: what a ROS 1 publisher announces for it, and how its payload
becomes ROS 1 bytes.

A ROS 1 topic is advertised with its type (`pkg/Type`), md5sum and full message definition
(the connection header, `tcpros`). Where they come from:

- a ROS 1 bag: its connection header (md5sum and definition as the recorder wrote them);
- an MCAP with ros1msg schemas: the schema text, md5sum computed from it (rosbags' genmsg
  algorithm);
- ROS 2 (CDR with ros2msg / ros2idl schemas): the types the file defines with ROS 1's
  std_msgs/Header (which has `seq`), as rosbags' own converter does; the payload goes through
  rosbags' `cdr_to_ros1` (`seq` 0). A type ROS 1 Noetic ships with another layout
  (sensor_msgs/CameraInfo's D, K, R, P are d, k, r, p in ROS 2) has no ROS 1 form: a ROS 1
  node would refuse its md5sum, and renaming fields by guess would lose data silently.

Anything else (protobuf, JSON, flatbuffers, a definition ROS 1 cannot express) has none
either: `NoRos1FormError` names the topic and why.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.ros.readers import RosChannel

CLOCK_TOPIC = "/clock"
CLOCK_TYPE = "rosgraph_msgs/msg/Clock"
HEADER_TYPE = "std_msgs/msg/Header"
_TIME = struct.Struct("<II")


class NoRos1FormError(BridgeLakeError):
    """A channel that cannot be published into ROS 1 (see the module)."""


@dataclass(frozen=True)
class Ros1Form:
    type: str
    """as ROS 1 spells it: sensor_msgs/Imu"""
    md5sum: str
    definition: str
    """the full definition: the type's text, then each dependency after a line of '='"""
    convert: Callable[[bytes], bytes | memoryview] | None = None
    """payload → ROS 1 bytes; None when the payload is ROS 1 already"""


def ros1_form(channel: RosChannel) -> Ros1Form:
    """The channel's ROS 1 form (see the module), or NoRos1FormError naming its topic."""
    try:
        if channel.message_encoding == "ros1":
            md5 = channel.metadata.get("md5sum")
            text = channel.schema_data.decode("utf-8")
            if md5:  # a bag's connection header: announced as recorded
                return Ros1Form(_ros1_name(channel.schema_name), md5, text)
            return _from_ros1msg(channel.schema_name, text)
        if channel.message_encoding == "cdr" and channel.schema_encoding in ("ros2msg", "ros2idl"):
            return _from_ros2(channel.schema_name, channel.schema_encoding, channel.schema_data)
    except NoRos1FormError as exc:
        raise NoRos1FormError(f"{channel.topic}: {exc}") from None
    what = channel.schema_encoding or "no schema"
    raise NoRos1FormError(
        f"{channel.topic}: {channel.schema_name or 'its type'} ({channel.message_encoding} "
        f"messages, {what}) has no ROS 1 form; leave it out with --topics"
    )


def clock_form() -> Ros1Form:
    """rosgraph_msgs/Clock, for the /clock a player publishes with --clock."""
    return _from_ros1msg(CLOCK_TYPE, "time clock\n")


def clock_message(log_ns: int) -> bytes:
    """A rosgraph_msgs/Clock at `log_ns` (time: uint32 seconds, uint32 nanoseconds)."""
    return _TIME.pack(log_ns // 1_000_000_000, log_ns % 1_000_000_000)


def _ros1_name(name: str) -> str:
    return name.replace("/msg/", "/")


def _ros2_name(name: str) -> str:
    return name if "/msg/" in name or "/" not in name else name.replace("/", "/msg/", 1)


def _store(types: dict[str, Any]) -> Any:
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.EMPTY)
    store.register(types)
    return store


@functools.lru_cache(maxsize=256)
def _from_ros1msg(name: str, text: str) -> Ros1Form:
    from rosbags.typesys import get_types_from_msg

    full = _ros2_name(name)
    try:
        store = _store(get_types_from_msg(text, full))
        definition, md5 = store.generate_msgdef(full, ros_version=1)
    except Exception as exc:  # rosbags' TypesysError on a definition it cannot parse
        raise NoRos1FormError(f"{name}: its ros1msg definition does not parse: {exc}") from None
    return Ros1Form(_ros1_name(full), md5, text or definition)


@functools.lru_cache(maxsize=256)
def _from_ros2(name: str, encoding: str, data: bytes) -> Ros1Form:
    from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

    full = _ros2_name(name)
    text = data.decode("utf-8", "replace")
    try:
        types = (
            get_types_from_idl(text) if encoding == "ros2idl" else get_types_from_msg(text, full)
        )
        source = _store(types)
        noetic = get_typestore(Stores.ROS1_NOETIC)
        target = _store({**source.fielddefs, HEADER_TYPE: noetic.fielddefs[HEADER_TYPE]})
        definition, md5 = target.generate_msgdef(full, ros_version=1)
    except Exception as exc:  # wstring, unknown names, ...: what ROS 1 cannot express
        raise NoRos1FormError(f"{name} has no ROS 1 form: {exc}") from None
    if full in noetic.fielddefs:
        differs = _first_difference(target, noetic, full)
        if differs is not None:
            raise NoRos1FormError(f"{name} has no ROS 1 form: {differs}")
    return Ros1Form(
        _ros1_name(full), md5, definition, functools.partial(_cdr_to_ros1, source, full)
    )


def _cdr_to_ros1(store: Any, typename: str, payload: bytes) -> memoryview:
    return store.cdr_to_ros1(payload, typename)


def _first_difference(ours: Any, noetic: Any, typename: str) -> str | None:
    """Where `typename` (and the types it holds) differs from ROS 1 Noetic's, or None."""
    a, b = ours.fielddefs[typename][1], noetic.fielddefs[typename][1]
    if [(n, _shape(d)) for n, d in a] != [(n, _shape(d)) for n, d in b]:
        theirs = ", ".join(n for n, _ in b)
        mine = ", ".join(n for n, _ in a)
        return f"ROS 1's {_ros1_name(typename)} has the fields {theirs}; the source: {mine}"
    for _, desc in a:
        inner = _named(desc)
        if inner is not None and inner in noetic.fielddefs and inner != HEADER_TYPE:
            found = _first_difference(ours, noetic, inner)
            if found is not None:
                return found
    return None


def _shape(desc: tuple) -> tuple:
    """A field's kind and element type, without bounds ROS 1 does not have."""
    kind, rest = desc
    if kind.name in ("ARRAY", "SEQUENCE"):
        (inner_kind, inner), count = rest
        return kind.name, inner_kind.name, inner, count if kind.name == "ARRAY" else 0
    return kind.name, rest if kind.name == "NAME" else rest[0]


def _named(desc: tuple) -> str | None:
    kind, rest = desc
    if kind.name in ("ARRAY", "SEQUENCE"):
        (inner_kind, inner), _ = rest
        return inner if inner_kind.name == "NAME" else None
    return rest if kind.name == "NAME" else None


__all__ = [
    "CLOCK_TOPIC",
    "CLOCK_TYPE",
    "NoRos1FormError",
    "Ros1Form",
    "clock_form",
    "clock_message",
    "ros1_form",
]

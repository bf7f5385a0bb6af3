"""rosbags typestores for ROS 1 (Noetic) and ROS 2 (Humble), with the two message types they
lack registered, and the message definitions bags and MCAP files must carry.

Humble is the ROS 2 baseline: every type exported here has the same wire layout, definition
text (up to constants) and RIHS01 hash from Humble to the newest distributions, and Humble is
the oldest ROS 2 still in use that can play the bags.

Registered from their upstream sources (ROS 1 md5sums as the packages generate them):
- can_msgs/msg/Frame: ros-industrial/ros_canopen can_msgs/msg/Frame.msg, same text in ROS 1
  and ROS 2 (md5sum 64ae5cebf967dc6aae4e78f5683a5b25).
- foxglove_msgs/msg/CompressedVideo: foxglove/schemas ros_foxglove_msgs/ros1 and /ros2.
- tf2_msgs/msg/TFMessage, ROS 1 only: geometry2's definition (md5sum
  94810edda583a504dfda3829e70d7eec); rosbags' Noetic store lacks the tf2_msgs package.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from bridge_lake.export.messages import arguments as arg

STORES = {1: Stores.ROS1_NOETIC, 2: Stores.ROS2_HUMBLE}

CAN_FRAME = """std_msgs/Header header
uint32 id
bool is_rtr
bool is_extended
bool is_error
uint8 dlc
uint8[8] data
"""

COMPRESSED_VIDEO = "string frame_id\nuint8[] data\nstring format\n"

ADTF_SAMPLE_TYPE = "bridge_lake_msgs/msg/AdtfSample"
ADTF_SAMPLE = """# An ADTF sample kept as bytes: a stream without a DDL (or a DDL with no ROS type)
std_msgs/Header header  # stamp: master clock; frame_id: the stream
string stream  # ADTF stream name (stream/substream)
string meta_type  # ADTF meta type (adtf/anonymous, ...); application/json: a lake row as JSON
uint8[] data  # the sample's payload as the vendor reader returns it
"""

EXTRA_TYPES = {
    1: {
        "can_msgs/msg/Frame": CAN_FRAME,
        "foxglove_msgs/msg/CompressedVideo": "time timestamp\n" + COMPRESSED_VIDEO,
        "tf2_msgs/msg/TFMessage": "geometry_msgs/TransformStamped[] transforms\n",
        ADTF_SAMPLE_TYPE: ADTF_SAMPLE,
    },
    2: {
        "can_msgs/msg/Frame": CAN_FRAME,
        "foxglove_msgs/msg/CompressedVideo": "builtin_interfaces/Time timestamp\n"
        + COMPRESSED_VIDEO,
        ADTF_SAMPLE_TYPE: ADTF_SAMPLE,
    },
}


@functools.cache
def typestore(ros: int) -> Typestore:
    """The typestore of ROS 1 Noetic or ROS 2 Humble plus the extra types (one per process)."""
    return _new_store(ros)


def _new_store(ros: int) -> Typestore:
    store = get_typestore(STORES[arg.ros_version(ros)])
    for name, text in EXTRA_TYPES[ros].items():
        store.register(get_types_from_msg(text, name))
    return store


class ExportTypes:
    """The message types one export writes: the shipped ones plus types generated for it
    (DDL structs, `ddl_types`), in typestores of its own (generated names are per export,
    so they never enter the process-wide stores). `texts` keeps the generated definitions
    as written, with their comments (rosbags' generated text drops comments)."""

    def __init__(
        self, generated: Mapping[str, str] | None = None, structs: Mapping | None = None
    ) -> None:
        self.texts = dict(generated or {})
        self.structs = dict(structs or {})
        """type name -> ddl_types.RosStruct of each stream's generated type (protobuf needs
        the tree to build its descriptor)"""
        self._stores: dict[int, Typestore] = {}

    def add(self, generated: Mapping[str, str], structs: Mapping) -> None:
        """More generated types (the live bridge meets streams one after another)."""
        self.texts.update(generated)
        self.structs.update(structs)
        self._stores.clear()

    def typestore(self, ros: int) -> Typestore:
        if not self.texts:
            return typestore(ros)
        if ros not in self._stores:
            store = _new_store(ros)
            types: dict = {}
            for name, text in self.texts.items():
                types.update(get_types_from_msg(text, name))
            store.register(types)
            self._stores[ros] = store
        return self._stores[ros]

    def definition(self, typename: str, ros: int) -> MessageDefinition:
        """As `message_definition` (rosbags' text and MD5 / RIHS01), with the blocks of
        generated types replaced by their commented text (comments change neither hash)."""
        d = message_definition(typename, ros, self.typestore(ros))
        if not self.texts:
            return d
        rule = "\n" + "=" * 80 + "\n"
        blocks = d.text.rstrip("\n").split(rule)
        out = []
        for i, block in enumerate(blocks):
            head, _, _ = block.partition("\n")
            name = _ros2(d.name) if i == 0 else _ros2(head.removeprefix("MSG: ").strip())
            text = self.texts.get(name)
            if text is None:
                out.append(block)
            elif i == 0:
                out.append(text.rstrip("\n"))
            else:
                out.append(f"{head}\n{text.rstrip(chr(10))}")
        return MessageDefinition(d.name, d.encoding, rule.join(out) + "\n", d.md5sum, d.rihs01)


def _ros2(name: str) -> str:
    return name if "/msg/" in name else name.replace("/", "/msg/", 1)


@dataclass(frozen=True)
class MessageDefinition:
    """What a bag or MCAP schema records about a message type.

    name: as that ROS version spells it ("sensor_msgs/Imu" in ROS 1, "sensor_msgs/msg/Imu" in
    ROS 2); encoding: the MCAP schema encoding; text: the definition with its dependencies
    appended in the ROS 1 / ros2msg format; md5sum (ROS 1 connection header) or rihs01 (ROS 2
    type hash for rosbag2 metadata), the other None.
    """

    name: str
    encoding: Literal["ros1msg", "ros2msg"]
    text: str
    md5sum: str | None
    rihs01: str | None


def message_definition(
    typename: str, ros: int, store: Typestore | None = None
) -> MessageDefinition:
    """Definition of `typename` ("pkg/msg/Name" or "pkg/Name") for ROS 1 or ROS 2 (from the
    process-wide store, or `store`)."""
    ros = arg.ros_version(ros)
    package, _, name = typename.partition("/")
    full = f"{package}/msg/{name.removeprefix('msg/')}"
    store = store or typestore(ros)
    if full not in store.fielddefs:
        raise ValueError(f"unknown message type {typename!r} for ROS {ros}")
    if ros == 1:
        text, md5sum = store.generate_msgdef(full, ros_version=1)
        return MessageDefinition(full.replace("/msg/", "/"), "ros1msg", text, md5sum, None)
    text, _ = store.generate_msgdef(full, ros_version=2)
    return MessageDefinition(full, "ros2msg", text, None, store.hash_rihs01(full))

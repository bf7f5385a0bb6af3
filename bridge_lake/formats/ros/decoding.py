"""Decoded messages of a recording, by libraries we did not write.

`readers.open_recording` yields messages as stored; a checker that judges them (health) or
a tool that reads their fields (waypoints) decodes them here, per channel:

- `RosbagsDecoder`: rosbags' ROS 1 and CDR deserializers. Types come from the typestore it
  is given; a type the store lacks comes from the channel's own definition text (ros1msg,
  ros2msg or ros2idl, concatenated definitions included). `file_types(recording)` is the
  store a bag reader uses: exactly the types the file defines (rosbags' AnyReader rule).
- `McapDecoder`: what the MCAP ecosystem decodes with: `mcap_ros2` for CDR, `mcap_protobuf`
  for protobuf, json for JSON, rosbags for ROS 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from bridge_lake.formats.ros.files import RecordingError

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

    from bridge_lake.formats.ros.readers import RosChannel, RosMessage

DEFINITION_SEPARATOR = "\n" + "=" * 80 + "\n"
"""Between the blocks of a concatenated message definition (ROS 1, rosbag2, MCAP)."""


def ros2_name(name: str) -> str:
    """pkg/Type → pkg/msg/Type; names already in ROS 2 style or without a package as given."""
    return name if "/msg/" in name or "/" not in name else name.replace("/", "/msg/", 1)


def definition_types(text: str, name: str, encoding: str = "ros1msg") -> dict[str, Any]:
    """rosbags' field definitions of a (concatenated) definition text: the main type, then
    the `MSG: pkg/Type` (or `IDL: ...`) blocks."""
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    types: dict[str, Any] = {}
    if encoding == "ros2idl":
        blocks = text.split("=" * 80 + "\n")
        if text.startswith("=" * 80 + "\nIDL: "):
            for block in blocks[1:]:
                types.update(get_types_from_idl(block.split("\n", 1)[1]))
        else:
            types.update(get_types_from_idl(text))
        return types
    blocks = text.split(DEFINITION_SEPARATOR)
    types.update(get_types_from_msg(blocks[0], name))
    for block in blocks[1:]:
        first, _, body = block.partition("\n")
        types.update(get_types_from_msg(body, ros2_name(first.removeprefix("MSG: ").strip())))
    return types


def file_types(channels: Iterable[RosChannel]) -> Typestore:
    """A typestore of exactly the types the channels' definitions give (what rosbags'
    AnyReader decodes a bag with: the file's own definitions, not the shipped ones)."""
    from rosbags.typesys import Stores, get_typestore

    types: dict[str, Any] = {}
    for c in channels:
        if c.schema_data:
            types.update(definition_types(c.schema_data.decode(), c.type, c.schema_encoding))
    store = get_typestore(Stores.EMPTY)
    store.register(types)
    return store


class RosbagsDecoder:
    """rosbags' deserializers by message encoding (`ros1`, `cdr`), one typestore each."""

    def __init__(self, stores: Mapping[str, Typestore]) -> None:
        self.stores = dict(stores)

    def __call__(self, message: RosMessage) -> object:
        channel = message.channel
        store = self.stores.get(channel.message_encoding)
        if store is None or not channel.schema_encoding:
            raise RecordingError(
                f"channel {channel.topic}: message encoding {channel.message_encoding!r} is "
                "not ROS (cdr or ros1)"
            )
        name = channel.type
        if name not in store.fielddefs:
            text = channel.schema_data.decode()
            store.register(definition_types(text, name, channel.schema_encoding))
        if channel.message_encoding == "cdr":
            return store.deserialize_cdr(message.data, name)
        return store.deserialize_ros1(message.data, name)


def shipped_stores() -> dict[str, Typestore]:
    """rosbags' ROS 2 Humble and ROS 1 Noetic stores by message encoding (fresh ones: a
    decoder registers the types it meets)."""
    from rosbags.typesys import Stores, get_typestore

    return {"cdr": get_typestore(Stores.ROS2_HUMBLE), "ros1": get_typestore(Stores.ROS1_NOETIC)}


class McapDecoder:
    """Decoders by schema and message encoding, as MCAP tools decode: mcap_ros2 (cdr),
    mcap_protobuf (protobuf), json, rosbags (ros1)."""

    def __init__(self) -> None:
        from mcap_protobuf.decoder import DecoderFactory as ProtobufFactory
        from mcap_ros2.decoder import DecoderFactory as Ros2Factory
        from rosbags.typesys import Stores, get_typestore

        self.factories = [Ros2Factory(), ProtobufFactory()]
        self.cache: dict[int, Any] = {}
        self.ros1 = RosbagsDecoder({"ros1": get_typestore(Stores.ROS1_NOETIC)})

    def __call__(self, message: RosMessage) -> object:
        channel = message.channel
        if channel.message_encoding == "json":
            return json.loads(message.data)
        if channel.message_encoding == "ros1":
            return self.ros1(message)
        decode = self.cache.get(channel.id)
        if decode is None:
            from mcap.records import Schema

            schema = Schema(
                id=channel.id,
                name=channel.schema_name,
                encoding=channel.schema_encoding,
                data=channel.schema_data,
            )
            for f in self.factories:
                decode = f.decoder_for(channel.message_encoding, schema)
                if decode is not None:
                    self.cache[channel.id] = decode
                    break
            else:
                raise RecordingError(f"no decoder for encoding {channel.message_encoding!r}")
        return decode(message.data)


__all__ = [
    "DEFINITION_SEPARATOR",
    "McapDecoder",
    "RosbagsDecoder",
    "definition_types",
    "file_types",
    "ros2_name",
    "shipped_stores",
]

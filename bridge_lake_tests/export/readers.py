"""Reading an export back with readers we did not write, as plain Python values.

bag1 / bag2: rosbags' AnyReader, which builds its types from the bag's own definitions;
MCAP ros2: the mcap reader with mcap_ros2's decoder; MCAP ros1: rosbags with the types parsed
from the file's schema text; MCAP protobuf: mcap_protobuf's decoder (types from the file's
FileDescriptorSet). Each message becomes a dict of its fields (header / timestamp and
frame_id kept apart), nested messages dicts, arrays lists.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from mcap.reader import make_reader
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

RULE = "\n" + "=" * 80 + "\n"


def plain(value: object) -> object:
    """A decoded message (rosbags dataclass, mcap_ros2 object, protobuf message) as dicts,
    lists and scalars; enum constants (upper-case names) left out."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, bytes | bytearray):
        return list(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "DESCRIPTOR") and hasattr(value, "ListFields"):  # protobuf
        out = {}
        for f in value.DESCRIPTOR.fields:
            v = getattr(value, f.name)
            if f.type == f.TYPE_BYTES:
                out[f.name] = list(v)
            elif f.message_type is not None and f.message_type.full_name.startswith("google."):
                out[f.name] = v.seconds * 1_000_000_000 + v.nanos
            elif f.is_repeated:
                out[f.name] = [plain(x) for x in v]
            else:
                out[f.name] = plain(v)
        return out
    if dataclasses.is_dataclass(value):
        names = [f.name for f in dataclasses.fields(value)]
    elif hasattr(value, "__slots__"):
        names = list(value.__slots__)
    else:
        return value.item() if isinstance(value, np.generic) else value
    return {n: plain(getattr(value, n)) for n in names if not n.isupper() and not n.startswith("_")}


def stamp_ns(header: dict) -> int:
    stamp = header["stamp"]
    sec = stamp.get("sec", stamp.get("secs"))
    nsec = stamp.get("nanosec", stamp.get("nsecs"))
    return int(sec) * 1_000_000_000 + int(nsec)


def _ros1_store(text: str, name: str):
    store = get_typestore(Stores.EMPTY)
    types = {}
    blocks = text.split(RULE)
    types.update(get_types_from_msg(blocks[0], name))
    for block in blocks[1:]:
        head, _, body = block.partition("\n")
        dep = head.removeprefix("MSG: ").strip().replace("/", "/msg/", 1)
        types.update(get_types_from_msg(body, dep))
    store.register(types)
    return store


def read(path: Path) -> dict[str, list[tuple[int, str, dict]]]:
    """topic -> [(log time, type name, message as dict)] in file order."""
    out: dict[str, list[tuple[int, str, dict]]] = {}
    if path.is_dir() or path.suffix == ".bag":
        with AnyReader([path]) as reader:
            for conn, t, raw in reader.messages():
                msg = reader.deserialize(raw, conn.msgtype)
                out.setdefault(conn.topic, []).append((t, conn.msgtype, plain(msg)))
        return out
    from mcap_protobuf.decoder import DecoderFactory as Protobuf
    from mcap_ros2.decoder import DecoderFactory as Ros2

    stores: dict[int, object] = {}
    with path.open("rb") as f:
        factories = [Ros2(), Protobuf()]
        decoders: dict[int, object] = {}
        reader = make_reader(f)
        for schema, channel, message in reader.iter_messages():
            if channel.message_encoding == "ros1":
                name = schema.name.replace("/", "/msg/", 1)
                if schema.id not in stores:
                    stores[schema.id] = _ros1_store(schema.data.decode(), name)
                decoded = stores[schema.id].deserialize_ros1(message.data, name)
            elif channel.message_encoding == "json":
                continue
            else:
                if schema.id not in decoders:
                    decoders[schema.id] = next(
                        d
                        for d in (
                            fac.decoder_for(channel.message_encoding, schema) for fac in factories
                        )
                        if d is not None
                    )
                decoded = decoders[schema.id](message.data)
            out.setdefault(channel.topic, []).append(
                (message.log_time, schema.name, plain(decoded))
            )
    return out


def fields_of(message: dict) -> dict:
    """The message's own fields: without header (ROS) or timestamp / frame_id (protobuf)."""
    return {k: v for k, v in message.items() if k not in ("header", "timestamp", "frame_id")}


def time_of(message: dict) -> tuple[int, str]:
    """(stamp ns, frame id) of a ROS header or a protobuf timestamp + frame_id."""
    if "header" in message:
        return stamp_ns(message["header"]), message["header"]["frame_id"]
    return message["timestamp"], message["frame_id"]

"""Bags and MCAP files written by writers we did not write, and their truth per chunk read
back with readers we did not write (issue 25's oracles)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

STRING_DEF = "string data"
BLOB_DEF = "uint8[] data"


def write_mcap(
    path: Path, compression: str = "zstd", *, chunk_size: int = 64 << 10, n: int = 1500
) -> Path:
    """An MCAP of ROS 2 messages (mcap_ros2's writer): small strings and 5-20 KB blobs."""
    from mcap.writer import CompressionType
    from mcap_ros2.writer import Writer

    rng = np.random.default_rng(0)
    with path.open("wb") as f:
        w = Writer(f, compression=CompressionType[compression.upper()], chunk_size=chunk_size)
        text = w.register_msgdef("std_msgs/msg/String", STRING_DEF)
        blob = w.register_msgdef("test_msgs/msg/Blob", BLOB_DEF)
        for i in range(n):
            w.write_message(
                "/chatter", text, {"data": f"hello {i}"}, log_time=10**9 + i * 10**6, publish_time=i
            )
            if i % 7 == 0:
                size = int(rng.integers(5000, 20000))
                data = rng.integers(0, 40, size, dtype=np.uint8).tobytes()
                w.write_message(
                    "/blob", blob, {"data": data}, log_time=10**9 + i * 10**6 + 1, publish_time=i
                )
        w.finish()
    return path


def write_bag1(
    path: Path, compression: str = "lz4", *, chunk: int = 64 << 10, n: int = 1500
) -> Path:
    """A ROS 1 bag written by rosbags (lz4, bz2 or none chunks)."""
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS1_NOETIC)
    string = ts.types["std_msgs/msg/String"]
    array = ts.types["std_msgs/msg/UInt8MultiArray"]
    layout = ts.types["std_msgs/msg/MultiArrayLayout"]
    rng = np.random.default_rng(1)
    w = Writer(path)
    if compression != "none":
        w.set_compression(Writer.CompressionFormat[compression.upper()])
    w.chunk_threshold = chunk
    with w:
        c1 = w.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
        c2 = w.add_connection("/blob", "std_msgs/msg/UInt8MultiArray", typestore=ts)
        for i in range(n):
            raw = ts.serialize_ros1(string(data=f"hello {i}"), "std_msgs/msg/String")
            w.write(c1, 10**9 + i * 10**6, raw)
            if i % 7 == 0:
                data = rng.integers(0, 40, int(rng.integers(5000, 20000)), dtype=np.uint8)
                msg = array(layout=layout(dim=[], data_offset=0), data=data)
                w.write(
                    c2,
                    10**9 + i * 10**6 + 1,
                    ts.serialize_ros1(msg, "std_msgs/msg/UInt8MultiArray"),
                )
    return path


def write_bag2(folder: Path, *, n: int = 6000) -> Path:
    """A ROS 2 bag (rosbags writer, MCAP storage, zstd chunks)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    string = ts.types["std_msgs/msg/String"]
    w = Writer(folder, version=9, storage_plugin=StoragePlugin.MCAP)
    w.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with w:
        conn = w.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
        for i in range(n):
            payload = f"hello {i} " + "x" * 400
            w.write(
                conn,
                10**9 + i * 10**6,
                ts.serialize_cdr(string(data=payload), "std_msgs/msg/String"),
            )
    return folder


Message = tuple[str, int, bytes]


def mcap_messages(path: Path) -> list[Message]:
    """Every message in file order (mcap reader, CRCs checked); decoded with mcap_ros2 as a
    check that the file is readable with ROS 2 decoding."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    out = []
    with path.open("rb") as f:
        reader = make_reader(f, validate_crcs=True, decoder_factories=[DecoderFactory()])
        assert reader.get_summary() is not None, f"{path} has no summary"
        for _, channel, message, _ in reader.iter_decoded_messages(log_time_order=False):
            out.append((channel.topic, message.log_time, bytes(message.data)))
    return out


def any_messages(path: Path) -> list[Message]:
    """Every message via rosbags' AnyReader (bag, bag folder or MCAP), each deserialized."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    out = []
    store = get_typestore(Stores.ROS1_NOETIC if path.suffix == ".bag" else Stores.ROS2_HUMBLE)
    with AnyReader([path], default_typestore=store) as reader:
        for conn, t, raw in reader.messages():
            reader.deserialize(raw, conn.msgtype)
            out.append((conn.topic, t, bytes(raw)))
    return out


@dataclass
class McapChunk:
    start: int
    end: int
    messages: list[Message]


def mcap_chunks(path: Path) -> list[McapChunk]:
    """The chunks of an intact MCAP from its summary, each with its messages in record order
    (the library's chunk reader: `StreamReader` on the chunk record, `breakup_chunk`)."""
    import io

    from mcap.data_stream import ReadDataStream
    from mcap.reader import make_reader
    from mcap.records import Channel, Chunk
    from mcap.records import Message as McapMessage
    from mcap.stream_reader import breakup_chunk

    with path.open("rb") as f:
        summary = make_reader(f).get_summary()
    channels = summary.channels
    out = []
    data = path.read_bytes()
    for ci in sorted(summary.chunk_indexes, key=lambda c: c.chunk_start_offset):
        raw = data[ci.chunk_start_offset + 9 : ci.chunk_start_offset + ci.chunk_length]
        chunk = Chunk.read(ReadDataStream(io.BytesIO(raw)))
        msgs = []
        for record in breakup_chunk(chunk, validate_crc=True):
            if isinstance(record, Channel):
                channels.setdefault(record.id, record)
            if isinstance(record, McapMessage):
                msgs.append(
                    (channels[record.channel_id].topic, record.log_time, bytes(record.data))
                )
        out.append(McapChunk(ci.chunk_start_offset, ci.chunk_start_offset + ci.chunk_length, msgs))
    return out


@dataclass
class BagChunk:
    start: int
    end: int
    messages: set[tuple[str, int]]
    data_start: int


def bag1_chunks(path: Path) -> list[BagChunk]:
    """The chunks of an intact ROS 1 bag from rosbags' reader: each chunk's span in the file
    and the (topic, time) of its messages from the bag's index."""
    from rosbags.rosbag1 import Reader

    with Reader(path) as reader:
        topics = {c.id: c.topic for c in reader.connections}
        chunks = {
            pos: BagChunk(pos, c.datapos + c.datasize, set(), c.datapos)
            for pos, c in reader.chunks.items()
        }
        for cid, entries in reader.indexes.items():
            for entry in entries:
                chunks[entry.chunk_pos].messages.add((topics[cid], entry.time))
    return sorted(chunks.values(), key=lambda c: c.start)

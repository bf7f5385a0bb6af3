"""formats/ros/readers: what the mcap library and rosbags read, streamed one chunk at a time."""

from __future__ import annotations

import itertools
import struct
import tracemalloc
import zlib

import numpy as np
import pytest

from bridge_lake.formats.ros.files import RecordingError
from bridge_lake.formats.ros.readers import open_recording
from bridge_lake_tests.play.support import NS, T0, write_bag1, write_bag2, write_mcap


def _big_mcap(path, messages: int, size: int) -> None:
    from mcap.writer import CompressionType, Writer

    rng = np.random.default_rng(0)
    with path.open("wb") as f:
        w = Writer(f, compression=CompressionType.ZSTD, chunk_size=size)
        w.start(profile="", library="test")
        sid = w.register_schema("Blob", "jsonschema", b"{}")
        cid = w.register_channel("/blob", "json", sid)
        for i in range(messages):
            w.add_message(cid, T0 + i * 1000, rng.bytes(size), T0 + i * 1000)
        w.finish()


def test_mcap_streams_one_chunk_at_a_time(tmp_path):
    path = tmp_path / "big.mcap"
    _big_mcap(path, 60, 1 << 20)  # 60 MB of incompressible payloads, 1 MB chunks
    rec = open_recording(path)
    tracemalloc.start()
    n = sum(1 for _ in rec.messages())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 60
    assert peak < 8 << 20, peak  # a few chunks' worth, never the file


def test_mcap_seek_starts_at_the_chunk_reaching_the_time(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=2.0)
    rec = open_recording(path)
    every = list(rec.messages())
    t = T0 + NS
    after = list(rec.messages(t))
    assert after == [m for m in every if m.log_time >= t]
    assert rec.start_ns == T0 and rec.end_ns == every[-1].log_time
    latched = {c.topic for c in rec.channels.values() if c.latched}
    assert latched == {"/tf_static"}


def _stream_by_stream_mcap(path, per_topic: int) -> None:
    """Each topic's messages in turn, as the live bridge writes a poll: chunks overlap."""
    from mcap.writer import CompressionType, Writer

    with path.open("wb") as f:
        w = Writer(f, compression=CompressionType.NONE, chunk_size=4096)
        w.start(profile="", library="test")
        sid = w.register_schema("Blob", "jsonschema", b"{}")
        for k, topic in enumerate(("/a", "/b", "/c")):
            cid = w.register_channel(topic, "json", sid)
            for i in range(per_topic):
                t = T0 + (i * 3 + k % 2) * 1000  # /a and /c share their times
                w.add_message(cid, t, b"%d" % i * 50, t)
        w.finish()


def test_mcap_in_time_order_through_its_chunk_index(tmp_path):
    path = tmp_path / "overlap.mcap"
    _stream_by_stream_mcap(path, 400)
    rec = open_recording(path)
    every = list(rec.messages())
    assert any(b.log_time < a.log_time for a, b in itertools.pairwise(every))
    ordered = sorted(every, key=lambda m: m.log_time)  # stable: /a before /c at equal times
    assert list(rec.messages_in_time_order()) == ordered
    t = T0 + 600_000
    assert list(rec.messages_in_time_order(t, ["/b", "/c"])) == [
        m for m in ordered if m.log_time >= t and m.channel.topic in ("/b", "/c")
    ]
    # a file of disjoint chunks in time order is not held: one chunk at a time
    big = tmp_path / "big.mcap"
    _big_mcap(big, 30, 1 << 20)
    tracemalloc.start()
    n = sum(1 for _ in open_recording(big).messages_in_time_order())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 30 and peak < 8 << 20, peak


@pytest.mark.parametrize("kind", ["bag1", "bag2"])
def test_bags_in_time_order_with_their_schemas(tmp_path, kind):
    from rosbags.highlevel import AnyReader

    path = write_bag1(tmp_path / "a.bag") if kind == "bag1" else write_bag2(tmp_path / "b")
    rec = open_recording(path)
    got = [(m.channel.topic, m.log_time, m.data) for m in rec.messages()]
    with AnyReader([path]) as r:
        want = [(c.topic, t, bytes(d)) for c, t, d in r.messages()]
    assert got == want
    imu = next(c for c in rec.channels.values() if c.topic == "/imu")
    assert imu.type == "sensor_msgs/msg/Imu"
    assert imu.schema_encoding == ("ros1msg" if kind == "bag1" else "ros2msg")
    assert b"orientation" in imu.schema_data


def test_not_a_recording(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"hello")
    with pytest.raises(RecordingError, match="neither an MCAP"):
        open_recording(tmp_path / "x.bin")
    with pytest.raises(RecordingError, match="no such file"):
        open_recording(tmp_path / "missing.mcap")


def _records(*records: tuple[int, bytes]) -> bytes:
    return b"".join(struct.pack("<BQ", op, len(body)) + body for op, body in records)


def test_a_chunk_is_walked_one_record_at_a_time_and_checked():
    from bridge_lake.formats.ros.damage import RosFormatError
    from bridge_lake.formats.ros.mcap_scan import chunk_records, message_fields

    message = struct.pack("<HIQQ", 3, 7, 11, 12) + b"payload"
    content = _records((5, message), (9, b"ignored"), (5, message))
    walk = chunk_records("", content, len(content), zlib.crc32(content))
    op, body = next(walk)  # lazily: the first record before the rest is looked at
    assert (op, message_fields(body)) == (5, (3, 7, 11, 12, b"payload"))
    assert [op for op, _ in walk] == [9, 5]
    with pytest.raises(RosFormatError, match="CRC mismatch"):
        next(chunk_records("", content, len(content), zlib.crc32(content) ^ 1))
    cut = content[:-3]
    with pytest.raises(RosFormatError, match="runs past its content"):
        list(chunk_records("", cut, len(cut), 0))
    with pytest.raises(RosFormatError, match="22"):
        message_fields(memoryview(message[:20]))

"""The health check keeps 8 bytes a message (its log time), not a Python int in a list (~40):
a 60-minute ADTF export has 8 M messages, and the list grew the exports step by 500 MB."""

from __future__ import annotations

import struct
import tracemalloc

from mcap.writer import CompressionType, Writer

from bridge_lake.export.health import check_file

MESSAGES = 100_000


def _small_messages(path, count: int) -> None:
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=64 << 10, compression=CompressionType.NONE)
        w.start("ros2", "test")
        schema = w.register_schema("std_msgs/msg/UInt8", "ros2msg", b"uint8 data")
        channel = w.register_channel("/u8", "cdr", schema)
        for i in range(count):
            t = 1_700_000_000_000_000_000 + i * 1_000_000
            w.add_message(channel, t, b"\x00\x01\x00\x00" + struct.pack("<B", i % 256), t)
        w.finish()


def test_memory_per_message_is_its_log_time(tmp_path):
    path, warm = tmp_path / "many.mcap", tmp_path / "few.mcap"
    _small_messages(path, MESSAGES)
    _small_messages(warm, 10)
    check_file(warm)  # the decoders' imports and caches, before counting
    tracemalloc.start()
    try:
        health = check_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    t = health.topics["/u8"]
    assert (t.messages, t.decoded, t.decode_errors) == (MESSAGES, MESSAGES, 0)
    assert t.times is not None and len(t.times) == MESSAGES
    # measured: a list of ints peaked at 77 bytes a message; the int64 buffer at 33 (8 for
    # the times, the rest the gap judgement's differences and median, after the decoding)
    assert peak < 48 * MESSAGES, peak

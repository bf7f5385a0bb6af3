"""The batch path of the ROS 1 bag writer writes the very bytes rosbags' own writer writes
message by message (given our chunk codec: rosbags' LZ4 frames are ones ROS cannot read),
read back by rosbags' reader: every chunking and compression."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.rosbag1 import Reader, Writer
from rosbags.typesys import Stores, get_typestore

from bridge_lake.export.bag1_writer import BulkBag1Writer
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.formats.ros import compression as comp

STORE = get_typestore(Stores.ROS1_NOETIC)


def batch(
    rng: np.random.Generator, n: int, conns: int
) -> tuple[np.ndarray, np.ndarray, Serialized]:
    lengths = rng.integers(0, 300, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8)
    times = 1_700_000_000 * 10**9 + np.sort(rng.integers(0, 10**10, n))
    return rng.integers(0, conns, n), times, Serialized(data, offsets)


def write(cls, path, compression, threshold, batches, *, batch: bool) -> bytes:
    w = cls(path)
    if compression:
        w.set_compression(compression)
        w.compressor = lambda data: comp.compress(w.compression_format, data)
    w.chunk_threshold = threshold
    w.open()
    conns = [w.add_connection(f"/t{i}", "std_msgs/msg/String", typestore=STORE) for i in range(3)]
    for ids, times, msgs in batches:
        if batch:
            w.write_batch(ids, times, msgs)
        else:
            for i in range(len(times)):
                w.write(conns[int(ids[i])], int(times[i]), msgs.message(i).tobytes())
    w.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "compression", [None, Writer.CompressionFormat.LZ4, Writer.CompressionFormat.BZ2]
)
@pytest.mark.parametrize("threshold", [1, 2_000, 1 << 20])
def test_batches_write_the_bytes_rosbags_writes(tmp_path, compression, threshold) -> None:
    rng = np.random.default_rng(threshold)
    batches = [batch(rng, n, 3) for n in (0, 1, 57, 400)]
    ours = write(BulkBag1Writer, tmp_path / "ours.bag", compression, threshold, batches, batch=True)
    ref = write(Writer, tmp_path / "ref.bag", compression, threshold, batches, batch=False)
    assert ours == ref
    with Reader(tmp_path / "ours.bag") as reader:
        got = [(c.topic, t, bytes(d)) for c, t, d in reader.messages()]
    assert len(got) == sum(len(b[1]) for b in batches)


def test_bad_batches_are_refused(tmp_path) -> None:
    w = BulkBag1Writer(tmp_path / "x.bag")
    w.open()
    w.add_connection("/t", "std_msgs/msg/String", typestore=STORE)
    ids, times, msgs = batch(np.random.default_rng(0), 3, 1)
    with pytest.raises(ValueError, match="connection ids"):
        w.write_batch(ids + 1, times, msgs)
    with pytest.raises(ValueError, match="differ in length"):
        w.write_batch(ids[:2], times, msgs)
    w.close()

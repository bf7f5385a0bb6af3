"""rosbags' ROS 1 bag writer, fed a batch of messages at a time.

rosbags' `Writer.write` takes one message per call and builds its record header from
Python objects (~15 us a message), and `write_chunk` writes each index entry with its own
call: for small messages the bag writer was the export's bottleneck (docs/benchmarks.md,
issue 21). `BulkBag1Writer.write_batch` lays out the
message records of a whole batch with numpy (the same bytes `write` produces: a header of
op, conn and time fields, the data length, the data), appends them to rosbags' open chunk,
closes chunks at the same threshold rule, and writes each chunk's index with one call. The
bag header, connections, chunk records and the summary stay rosbags' own code; a test
checks the file is byte-identical to the one rosbags writes message by message. Chunks are
compressed by `formats.ros.compression.compress`, whose LZ4 frames ROS's roslz4 reads
(rosbags' own are refused by `rosbag check`).
"""

from __future__ import annotations

from collections import defaultdict
from io import BytesIO

import numpy as np
from rosbags.rosbag1 import Writer
from rosbags.rosbag1.reader import RecordType
from rosbags.rosbag1.writer import MAXSIZE, Header, WriteChunk, serialize_uint32

from bridge_lake.export.messages.serialized import Serialized, fixed_part, join, ragged_part
from bridge_lake.formats.ros import compression as comp

NS_PER_S = 1_000_000_000
_RECORD = np.dtype(
    {
        "names": ["conn", "sec", "nsec", "length"],
        "formats": ["<u4", "<u4", "<u4", "<u4"],
        "offsets": [21, 34, 38, 42],
        "itemsize": 46,
    }
)
_TEMPLATE = (
    serialize_uint32(38)
    + serialize_uint32(4)
    + b"op="
    + bytes([int(RecordType.MSGDATA)])
    + serialize_uint32(9)
    + b"conn="
    + bytes(4)
    + serialize_uint32(13)
    + b"time="
    + bytes(8)
    + bytes(4)
)
"""A message record before its data: header length 38, fields op, conn, time (as rosbags'
Header.write lays them out), then the data length."""
_INDEX = np.dtype([("sec", "<u4"), ("nsec", "<u4"), ("offset", "<u4")])


class _Index:
    """One connection's index entries in an open chunk (rosbags keeps a list of tuples; its
    `close` only asks their number)."""

    def __init__(self) -> None:
        self.times: list[np.ndarray] = []
        self.offsets: list[np.ndarray] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, times: np.ndarray, offsets: np.ndarray) -> None:
        self.times.append(times)
        self.offsets.append(offsets)
        self.count += len(times)


class BulkBag1Writer(Writer):
    """rosbags' ROS 1 writer with `write_batch` (see the module docstring)."""

    def write_batch(self, conns: np.ndarray, times: np.ndarray, messages: Serialized) -> None:
        """Messages in order: connection id, log time (ns) and data of each."""
        if not self.bio:
            raise ValueError("bag is not open")
        n = len(times)
        if n == 0:
            return
        if len(conns) != n or len(messages) != n:
            raise ValueError("connections, times and messages differ in length")
        known = len(self.connections)
        if int(conns.min()) < 0 or int(conns.max()) >= known:
            raise ValueError(f"connection ids must be in 0 .. {known - 1}")
        lengths = np.diff(messages.offsets)
        heads = np.empty((n, _RECORD.itemsize), np.uint8)
        heads[:] = np.frombuffer(_TEMPLATE, np.uint8)
        rec = heads.view(_RECORD).reshape(n)
        rec["conn"] = conns
        rec["sec"], rec["nsec"] = np.divmod(times, NS_PER_S)
        rec["length"] = lengths
        records = join([fixed_part(heads), ragged_part(messages.data, messages.offsets)])
        sizes = np.diff(records.offsets)
        start = 0
        while start < n:
            chunk = self.chunks[-1]
            base = chunk.data.tell()
            ends = base + np.cumsum(sizes[start:])
            # rosbags closes the chunk after the first message that takes it past the threshold
            over = np.flatnonzero(ends > self.chunk_threshold)
            stop = start + (int(over[0]) + 1 if over.size else n - start)
            a, b = int(records.offsets[start]), int(records.offsets[stop])
            chunk.data.write(memoryview(records.data[a:b]))
            offsets = base + records.offsets[start:stop] - a
            self._index(chunk, conns[start:stop], times[start:stop], offsets)
            if chunk.data.tell() > self.chunk_threshold:
                self.write_chunk(chunk)
            start = stop

    @staticmethod
    def _index(chunk: WriteChunk, conns, times, offsets) -> None:
        chunk.start = min(int(times.min()), chunk.start)
        chunk.end = max(int(times.max()), chunk.end)
        ids, first = np.unique(conns, return_index=True)
        for cid in ids[np.argsort(first)].tolist():  # in order of first message, as rosbags
            sel = conns == cid
            index = chunk.connections.get(cid)
            if not isinstance(index, _Index):
                index = chunk.connections[cid] = _Index()  # type: ignore[assignment]
            index.add(times[sel], offsets[sel])

    def write_chunk(self, chunk: WriteChunk) -> None:
        """rosbags' chunk record, then each connection's index in one write."""
        assert self.bio
        if (size := chunk.data.tell()) <= 0:
            return
        chunk.pos = self.bio.tell()
        header = Header()
        header.set_string("compression", self.compression_format)
        header.set_uint32("size", size)
        header.write(self.bio, RecordType.CHUNK)
        # not rosbags' compressor: its LZ4 frames are ones roslz4 (rosbag) cannot read
        with chunk.data.getbuffer() as content:  # released before the chunk is closed
            data = comp.compress(self.compression_format, content)
        self.bio.write(serialize_uint32(len(data)))
        self.bio.write(data)
        for cid, items in chunk.connections.items():
            header = Header()
            header.set_uint32("ver", 1)
            header.set_uint32("conn", cid)
            header.set_uint32("count", len(items))
            header.write(self.bio, RecordType.IDXDATA)
            self.bio.write(serialize_uint32(len(items) * 12))
            entries = np.empty(len(items), _INDEX)
            if isinstance(items, _Index):
                t = np.concatenate(items.times)
                entries["offset"] = np.concatenate(items.offsets)
            else:  # written by rosbags' own `write`
                t = np.array([x[0] for x in items], np.int64)
                entries["offset"] = [x[1] for x in items]
            entries["sec"], entries["nsec"] = np.divmod(t, NS_PER_S)
            self.bio.write(entries.tobytes())
        chunk.data.close()
        self.chunks.append(WriteChunk(BytesIO(), -1, MAXSIZE, 0, defaultdict(list)))


__all__ = ["BulkBag1Writer"]

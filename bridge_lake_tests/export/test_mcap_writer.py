"""McapWriter against readers we did not write.

Oracles: `mcap.reader.make_reader` with CRC validation (summary, iteration, queries,
attachments, metadata), `mcap_ros2`'s decoder on rosbags-serialized ROS 2 messages, and the mcap
library's own record classes: every top-level record of every file written here, and every
record inside every chunk, is parsed with the library's `read` and must re-serialize with its
`write` to exactly the bytes in the file. The Python reader does not use MessageIndex records,
so `audit` checks them itself and `query_via_indexes` answers a topic/time query by seeking
through the chunk and message indexes alone, the way an indexed reader does.
"""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import lz4.frame
import numpy as np
import pytest
import zstandard
from mcap.data_stream import ReadDataStream, RecordBuilder
from mcap.opcode import Opcode
from mcap.reader import NonSeekingReader, make_reader
from mcap.records import (
    Attachment,
    AttachmentIndex,
    Channel,
    Chunk,
    ChunkIndex,
    DataEnd,
    Footer,
    Header,
    McapRecord,
    Message,
    MessageIndex,
    Metadata,
    MetadataIndex,
    Schema,
    Statistics,
    SummaryOffset,
)
from mcap_ros2.decoder import DecoderFactory
from rosbags.typesys import Stores, get_typestore

from bridge_lake.export.mcap_writer import McapWriter
from bridge_lake.formats.ros.files import MCAP_MAGIC as MAGIC

TS = get_typestore(Stores.ROS2_HUMBLE)
READERS: dict[int, type[McapRecord]] = {
    Opcode.ATTACHMENT: Attachment,
    Opcode.ATTACHMENT_INDEX: AttachmentIndex,
    Opcode.CHANNEL: Channel,
    Opcode.CHUNK: Chunk,
    Opcode.CHUNK_INDEX: ChunkIndex,
    Opcode.DATA_END: DataEnd,
    Opcode.FOOTER: Footer,
    Opcode.HEADER: Header,
    Opcode.MESSAGE_INDEX: MessageIndex,
    Opcode.METADATA: Metadata,
    Opcode.METADATA_INDEX: MetadataIndex,
    Opcode.SCHEMA: Schema,
    Opcode.STATISTICS: Statistics,
    Opcode.SUMMARY_OFFSET: SummaryOffset,
}


@dataclass(frozen=True)
class Packed:
    data: np.ndarray
    offsets: np.ndarray


def pack(payloads: list[bytes]) -> Packed:
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in payloads])]).astype(np.int64)
    return Packed(np.frombuffer(b"".join(payloads), np.uint8).copy(), offsets)


@dataclass
class Input:
    """Messages as the test means them, in write order."""

    channel_ids: list[int] = field(default_factory=list)
    log_times: list[int] = field(default_factory=list)
    publish_times: list[int] = field(default_factory=list)
    sequences: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)

    def add(self, ids, log, pub, seq, payloads) -> None:
        self.channel_ids += [int(x) for x in ids]
        self.log_times += [int(x) for x in log]
        self.publish_times += [int(x) for x in pub]
        self.sequences += [int(x) for x in seq]
        self.payloads += list(payloads)

    def write(self, w: McapWriter, a: int, b: int) -> None:
        w.write_messages(
            np.array(self.channel_ids[a:b], np.uint16),
            np.array(self.log_times[a:b], np.int64),
            np.array(self.publish_times[a:b], np.uint64),
            np.array(self.sequences[a:b], np.uint32),
            pack(self.payloads[a:b]),
        )

    def tuples(self) -> list[tuple[int, int, int, int, bytes]]:
        return list(
            zip(
                self.channel_ids,
                self.log_times,
                self.publish_times,
                self.sequences,
                self.payloads,
                strict=True,
            )
        )


def serialize(record: McapRecord) -> bytes:
    builder = RecordBuilder()
    record.write(builder)
    return builder.end()


def walk(buf: bytes, start: int, stop: int | None = None) -> list[tuple[int, int, McapRecord]]:
    """(offset, size, record) of the records in buf[start:stop] (to the Footer if stop is None),
    each parsed by the library and required to re-serialize to the same bytes."""
    out = []
    pos = start
    while stop is None or pos < stop:
        opcode, length = struct.unpack_from("<BQ", buf, pos)
        body = ReadDataStream(io.BytesIO(buf[pos + 9 : pos + 9 + length]))
        if opcode == Opcode.MESSAGE:
            record: McapRecord = Message.read(body, length)
        else:
            record = READERS[opcode].read(body)
        assert body.count == length, (opcode, pos)
        assert serialize(record) == buf[pos : pos + 9 + length], (type(record).__name__, pos)
        out.append((pos, 9 + length, record))
        pos += 9 + length
        if isinstance(record, Footer):
            break
    return out


def decompress(chunk: Chunk) -> bytes:
    if chunk.compression == "zstd":
        params = zstandard.get_frame_parameters(chunk.data)
        assert params.content_size == chunk.uncompressed_size  # readers can allocate up front
        return zstandard.ZstdDecompressor().decompress(chunk.data)
    if chunk.compression == "lz4":
        info = lz4.frame.get_frame_info(chunk.data)  # the spec's lz4 is the frame format
        assert info["content_size"] == chunk.uncompressed_size
        return lz4.frame.decompress(chunk.data)
    assert chunk.compression == ""
    return chunk.data


@dataclass
class Audit:
    header: Header
    messages: list[tuple[int, int, int, int, bytes]]  # file order
    chunks: list[tuple[int, Chunk, bytes]]  # offset, record, uncompressed
    summary: list[McapRecord]
    data_definitions: list[McapRecord]  # Schema/Channel records in the data section


def audit(buf: bytes, compression: str = "zstd") -> Audit:
    """Check the whole layout against the spec and the summary against the data section."""
    assert buf[:8] == MAGIC and buf[-8:] == MAGIC
    records = walk(buf, 8)
    footer = records[-1][2]
    assert isinstance(footer, Footer) and records[-1][0] + records[-1][1] == len(buf) - 8
    header = records[0][2]
    assert isinstance(header, Header)
    data_end_at = next(i for i, r in enumerate(records) if isinstance(r[2], DataEnd))
    assert records[data_end_at][2].data_section_crc == 0
    summary_at = records[data_end_at + 1][0]
    assert footer.summary_start == summary_at
    # summary CRC: summary start through the footer's summary_offset_start field
    assert footer.summary_crc == zlib.crc32(buf[summary_at : len(buf) - 8 - 4])
    summary = [r[2] for r in records[data_end_at + 1 : -1]]
    # summary offsets: each group is a contiguous run of records of its opcode
    offsets = [r for r in records if isinstance(r[2], SummaryOffset)]
    assert offsets and offsets[0][0] == footer.summary_offset_start
    opcode_of = {v: k for k, v in READERS.items()}
    grouped = 0
    for _, _, so in offsets:
        group = walk(buf, so.group_start, so.group_start + so.group_length)
        assert group and all(opcode_of[type(r)] == so.group_opcode for _, _, r in group)
        grouped += len(group)
    assert grouped == len(summary) - len(offsets)

    messages: list[tuple[int, int, int, int, bytes]] = []
    chunks: list[tuple[int, Chunk, bytes]] = []
    definitions: list[McapRecord] = []
    chunk_indexes = [r for r in summary if isinstance(r, ChunkIndex)]
    known_schemas: set[int] = set()
    known_channels: set[int] = set()

    def define(record: McapRecord) -> None:
        if isinstance(record, Schema):
            known_schemas.add(record.id)
        else:
            assert record.schema_id == 0 or record.schema_id in known_schemas
            known_channels.add(record.id)

    i = 1
    while i < data_end_at:
        pos, size, record = records[i]
        i += 1
        if isinstance(record, Schema | Channel):
            definitions.append(record)
            define(record)
            continue
        if isinstance(record, Attachment | Metadata):
            continue
        assert isinstance(record, Chunk), type(record)
        assert record.compression == compression
        data = decompress(record)
        assert len(data) == record.uncompressed_size
        assert zlib.crc32(data) == record.uncompressed_crc
        inner = walk(data, 0, len(data))
        in_chunk = {}
        for offset, _, r in inner:
            if isinstance(r, Schema | Channel):
                define(r)
            else:
                assert isinstance(r, Message)
                assert r.channel_id in known_channels  # defined before first use
                in_chunk[offset] = r
                messages.append((r.channel_id, r.log_time, r.publish_time, r.sequence, r.data))
        chunks.append((pos, record, data))
        # the chunk's message indexes follow it, one per channel present
        index_at = {}
        while isinstance(records[i][2], MessageIndex):
            index_at[records[i][2].channel_id] = records[i]
            i += 1
        present = {m.channel_id for m in in_chunk.values()}
        assert set(index_at) == present
        for cid, (_, _, mi) in index_at.items():
            assert mi.records == sorted(mi.records)  # by log time, then offset
            assert sorted(off for _, off in mi.records) == sorted(
                off for off, m in in_chunk.items() if m.channel_id == cid
            )
            for t, off in mi.records:
                assert in_chunk[off].log_time == t
        ci = chunk_indexes[len(chunks) - 1]
        times = [m.log_time for m in in_chunk.values()]
        assert ci.chunk_start_offset == pos and ci.chunk_length == size
        assert (ci.message_start_time, ci.message_end_time) == (min(times), max(times))
        assert (record.message_start_time, record.message_end_time) == (min(times), max(times))
        assert ci.message_index_offsets == {cid: r[0] for cid, r in index_at.items()}
        assert ci.message_index_length == sum(r[1] for r in index_at.values())
        assert ci.compression == record.compression
        assert ci.compressed_size == len(record.data)
        assert ci.uncompressed_size == record.uncompressed_size
    assert len(chunks) == len(chunk_indexes)
    return Audit(header, messages, chunks, summary, definitions)


def query_via_indexes(buf: bytes, topics: list[str], start: int, end: int) -> list[tuple]:
    """Messages on `topics` with start <= log_time < end, found by seeking: summary ->
    chunk indexes -> message indexes -> only the records they point at."""
    f = io.BytesIO(buf)
    summary = make_reader(f).get_summary()
    wanted = {c.id for c in summary.channels.values() if c.topic in topics}
    hits = []
    for ci in summary.chunk_indexes:
        if ci.message_end_time < start or ci.message_start_time >= end:
            continue
        chunk = None
        for cid in sorted(wanted & set(ci.message_index_offsets)):
            at = ci.message_index_offsets[cid]
            opcode, length = struct.unpack_from("<BQ", buf, at)
            assert opcode == Opcode.MESSAGE_INDEX
            mi = MessageIndex.read(ReadDataStream(io.BytesIO(buf[at + 9 : at + 9 + length])))
            for t, off in mi.records:
                if not start <= t < end:
                    continue
                if chunk is None:
                    at = ci.chunk_start_offset
                    raw = ReadDataStream(io.BytesIO(buf[at + 9 : at + ci.chunk_length]))
                    chunk = decompress(Chunk.read(raw))
                opcode, length = struct.unpack_from("<BQ", chunk, off)
                assert opcode == Opcode.MESSAGE
                m = Message.read(ReadDataStream(io.BytesIO(chunk[off + 9 :])), length)
                hits.append((m.log_time, ci.chunk_start_offset, off, m))
    return [
        (m.channel_id, m.log_time, m.publish_time, m.sequence, m.data) for *_, m in sorted(hits)
    ]


def mixed_input(rng: np.random.Generator, channels: int = 3) -> Input:
    """Batches hitting every layout path: equal sizes, small variable sizes, large variable
    sizes, empty messages, a message larger than the chunk; interleaved channels."""
    inp = Input()
    t = 1_000_000_000

    def batch(lengths: np.ndarray) -> None:
        nonlocal t
        n = lengths.size
        times = t + np.cumsum(rng.integers(0, 3_000_000, n))  # repeats included
        t = int(times[-1]) + 1
        inp.add(
            rng.integers(1, channels + 1, n),
            times,
            times - rng.integers(0, 1000, n),
            rng.integers(0, 2**32, n, dtype=np.uint64),
            [rng.integers(0, 256, int(k), dtype=np.uint8).tobytes() for k in lengths],
        )

    batch(np.full(300, 316))  # equal sizes
    batch(rng.integers(0, 600, 700))  # small, variable, some empty
    batch(rng.integers(2_000, 40_000, 12))  # large, variable
    batch(np.array([150_000]))  # larger than a chunk
    batch(np.array([5, 200_000, 7]))  # one inside a batch
    batch(rng.integers(0, 2_000, 900))  # a batch larger than a chunk
    return inp


def batch_bounds(n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n, 12)]))
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))


def write_mixed(
    target, inp: Input, bounds: list[tuple[int, int]], channels: int = 3, **kw
) -> McapWriter:
    w = McapWriter(target, chunk_size=64 << 10, **kw)
    sid = w.add_schema("test/msg/Blob", "ros2msg", b"uint8[] data")
    for c in range(channels):
        w.add_channel(f"/topic{c}", "cdr", sid if c else 0, {"index": str(c)})
    for a, b in bounds:
        inp.write(w, a, b)
    return w


@pytest.mark.parametrize("compression", ["zstd", "lz4", "none"])
def test_every_layout_path_round_trips_with_exact_indexes(tmp_path: Path, compression: str):
    rng = np.random.default_rng(1)
    inp = mixed_input(rng)
    path = tmp_path / "out.mcap"
    w = write_mixed(path, inp, batch_bounds(len(inp.payloads), rng), compression=compression)
    stats = w.finish()
    buf = path.read_bytes()
    result = audit(buf, "" if compression == "none" else compression)

    assert result.messages == inp.tuples()  # file order is write order
    assert result.header == Header(profile="ros2", library="bridge_lake")
    assert len(result.chunks) > 10
    big_chunks = [c for _, c, _ in result.chunks if c.uncompressed_size > 64 << 10]
    assert all(c.uncompressed_size <= (64 << 10) + 200_000 + 31 + 300 for c in big_chunks)
    with path.open("rb") as f:
        reader = make_reader(f, validate_crcs=True)
        summary = reader.get_summary()
        s = summary.statistics
        assert s.message_count == len(inp.payloads) == stats.message_count
        assert (s.schema_count, s.channel_count, s.chunk_count) == (1, 3, len(result.chunks))
        assert stats.chunk_count == s.chunk_count
        assert (
            s.channel_message_counts
            == {c: inp.channel_ids.count(c) for c in (1, 2, 3)}
            == stats.channel_message_counts
        )
        assert (s.message_start_time, s.message_end_time) == (
            min(inp.log_times),
            max(inp.log_times),
        )
        assert (stats.message_start_time, stats.message_end_time) == (
            s.message_start_time,
            s.message_end_time,
        )
        assert stats.bytes_written == len(buf)
        assert summary.channels[1].schema_id == 0 and summary.channels[2].schema_id == 1
        assert summary.channels[3].metadata == {"index": "2"}
        assert summary.schemas[1].data == b"uint8[] data"
        got = [
            (m.channel_id, m.log_time, m.publish_time, m.sequence, m.data)
            for _, _, m in reader.iter_messages()
        ]
    assert got == inp.tuples()  # times never go backwards here: log-time order is write order


def test_topic_and_time_queries_seek_through_the_indexes(tmp_path: Path):
    rng = np.random.default_rng(2)
    inp = mixed_input(rng)
    w = write_mixed(tmp_path / "q.mcap", inp, batch_bounds(len(inp.payloads), rng))
    w.finish()
    buf = (tmp_path / "q.mcap").read_bytes()
    lo, hi = sorted(rng.choice(inp.log_times, 2, replace=False).tolist())
    expected = [
        m for m in inp.tuples() if m[0] in (1, 3) and lo <= m[1] < hi
    ]  # write order == log-time order, ties in file order
    assert 20 < len(expected) < len(inp.payloads) // 2
    assert query_via_indexes(buf, ["/topic0", "/topic2"], lo, hi) == expected
    with io.BytesIO(buf) as f:
        reader = make_reader(f, validate_crcs=True)
        got = [
            (m.channel_id, m.log_time, m.publish_time, m.sequence, m.data)
            for _, _, m in reader.iter_messages(
                topics=["/topic0", "/topic2"], starting_at=lo, ending_before=hi
            )
        ]
    assert got == expected


def test_ros2_messages_decode_with_mcap_ros2(tmp_path: Path):
    m = TS.types
    imu_name, cloud_name = "sensor_msgs/msg/Imu", "sensor_msgs/msg/PointCloud2"

    def header(ns: int, frame: str):
        stamp = m["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
        return m["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)

    def imu(ns: int, az: float):
        v3, q = m["geometry_msgs/msg/Vector3"], m["geometry_msgs/msg/Quaternion"]
        cov = np.zeros(9)
        return m[imu_name](
            header=header(ns, "imu"),
            orientation=q(x=0.0, y=0.0, z=0.0, w=1.0),
            orientation_covariance=cov,
            angular_velocity=v3(x=0.01, y=0.0, z=0.0),
            angular_velocity_covariance=cov,
            linear_acceleration=v3(x=0.0, y=0.0, z=az),
            linear_acceleration_covariance=cov,
        )

    def cloud(ns: int, points: np.ndarray):
        fields = [
            m["sensor_msgs/msg/PointField"](name=n, offset=o, datatype=7, count=1)
            for n, o in (("x", 0), ("y", 4), ("z", 8))
        ]
        return m[cloud_name](
            header=header(ns, "velodyne"),
            height=1,
            width=points.shape[0],
            fields=fields,
            is_bigendian=False,
            point_step=12,
            row_step=12 * points.shape[0],
            data=points.astype("<f4").view(np.uint8).ravel(),
            is_dense=True,
        )

    rng = np.random.default_rng(3)
    t0 = 1_700_000_000_000_000_000
    imu_times = t0 + np.arange(200) * 5_000_000
    cloud_times = t0 + 2_000_000 + np.arange(10) * 100_000_000
    clouds = [rng.normal(0, 10, (2000, 3)) for _ in cloud_times]
    msgs = [
        (int(t), 1, bytes(TS.serialize_cdr(imu(int(t), 9.81 + i), imu_name)))
        for i, t in enumerate(imu_times)
    ]
    msgs += [
        (int(t), 2, bytes(TS.serialize_cdr(cloud(int(t), p), cloud_name)))
        for t, p in zip(cloud_times, clouds, strict=True)
    ]
    msgs.sort()
    path = tmp_path / "ros2.mcap"
    with McapWriter(path, chunk_size=32 << 10) as w:
        for name in (imu_name, cloud_name):
            text = TS.generate_msgdef(name, ros_version=2)[0]
            assert "builtin_interfaces/Time" in text  # the ROS 2 text, not ROS 1's `time`
            w.add_channel(
                "/imu" if name == imu_name else "/points",
                "cdr",
                w.add_schema(name, "ros2msg", text.encode()),
            )
        times = np.array([t for t, _, _ in msgs])
        w.write_messages(
            np.array([c for _, c, _ in msgs]), times, times, None, pack([d for *_, d in msgs])
        )
    audit(path.read_bytes())
    with path.open("rb") as f:
        decoded = list(
            make_reader(
                f, validate_crcs=True, decoder_factories=[DecoderFactory()]
            ).iter_decoded_messages()
        )
    assert len(decoded) == len(msgs)
    imus = [d for d in decoded if d.channel.topic == "/imu"]
    pcs = [d for d in decoded if d.channel.topic == "/points"]
    assert [d.decoded_message.linear_acceleration.z for d in imus] == [9.81 + i for i in range(200)]
    assert [d.decoded_message.header.stamp.nanosec for d in imus] == [
        int(t) % 10**9 for t in imu_times
    ]
    assert all(d.schema.name == imu_name for d in imus)
    for d, points in zip(pcs, clouds, strict=True):
        assert d.decoded_message.width == 2000 and d.decoded_message.header.frame_id == "velodyne"
        got = np.frombuffer(bytes(d.decoded_message.data), "<f4").reshape(-1, 3)
        np.testing.assert_array_equal(got, points.astype("<f4"))


def test_log_times_may_go_backwards_within_a_batch(tmp_path: Path):
    rng = np.random.default_rng(4)
    n = 3000
    times = 10_000 + rng.permutation(n) * 1000
    payloads = [
        rng.integers(0, 256, int(k), dtype=np.uint8).tobytes() for k in rng.integers(10, 200, n)
    ]
    ids = rng.integers(1, 3, n)
    path = tmp_path / "back.mcap"
    with McapWriter(path, chunk_size=16 << 10) as w:
        w.add_channel("/a", "cdr", 0)
        w.add_channel("/b", "cdr", 0)
        w.write_messages(ids, times, times, None, pack(payloads))
    result = audit(path.read_bytes())  # chunk start/end are min/max, indexes sorted by time
    assert [m[1] for m in result.messages] == times.tolist()
    assert len(result.chunks) > 5
    with path.open("rb") as f:
        reader = make_reader(f, validate_crcs=True)
        s = reader.get_summary().statistics
        assert (s.message_start_time, s.message_end_time) == (10_000, 10_000 + (n - 1) * 1000)
        got = [(m.log_time, m.data) for _, _, m in reader.iter_messages()]
    order = np.argsort(times)
    assert got == [(int(times[i]), payloads[i]) for i in order]
    lo, hi = 10_000 + 500 * 1000, 10_000 + 900 * 1000
    expected = [
        (1, int(times[i]), int(times[i]), 0, payloads[i])
        for i in order
        if ids[i] == 1 and lo <= times[i] < hi
    ]
    assert query_via_indexes(path.read_bytes(), ["/a"], lo, hi) == expected


def test_bytes_do_not_depend_on_threads_or_run(tmp_path: Path):
    rng = np.random.default_rng(5)
    inp = mixed_input(rng)
    bounds = batch_bounds(len(inp.payloads), rng)
    outputs = []
    for threads in (1, 4, 1, 4):
        f = io.BytesIO()
        w = write_mixed(f, inp, bounds[:3], threads=threads)
        w.add_metadata("calibration", {"lidar": "velodyne"})
        w.add_attachment("a.txt", "text/plain", b"hello", log_time=5, create_time=6)
        for a, b in bounds[3:]:
            inp.write(w, a, b)
        w.finish()
        outputs.append(f.getvalue())
    assert len(set(outputs)) == 1
    assert audit(outputs[0]).messages == inp.tuples()


def test_empty_file_has_definitions_and_a_summary(tmp_path: Path):
    path = tmp_path / "empty.mcap"
    with McapWriter(path, profile="ros1", library="me", compression="lz4") as w:
        sid = w.add_schema("std_msgs/String", "ros1msg", b"string data")
        w.add_channel("/chatter", "ros1", sid)
        w.add_metadata("drive", {"id": "d1"})
    buf = path.read_bytes()
    result = audit(buf, "lz4")
    assert result.messages == [] and result.chunks == []
    assert result.header == Header(profile="ros1", library="me")
    assert [type(r) for r in result.data_definitions] == [Schema, Channel]
    with path.open("rb") as f:
        reader = make_reader(f, validate_crcs=True)
        s = reader.get_summary().statistics
        assert (s.message_count, s.chunk_count, s.channel_count, s.schema_count) == (0, 0, 1, 1)
        assert (s.message_start_time, s.message_end_time, s.metadata_count) == (0, 0, 1)
        assert list(reader.iter_messages()) == []
        assert [md.metadata for md in reader.iter_metadata()] == [{"id": "d1"}]
    # a linear reader sees every channel too (it never reads the summary)
    with path.open("rb") as f:
        summary = NonSeekingReader(f, validate_crcs=True).get_summary()
    assert summary.channels[1].topic == "/chatter"


def test_unused_channel_is_still_defined_in_the_data_section(tmp_path: Path):
    path = tmp_path / "unused.mcap"
    with McapWriter(path) as w:
        used = w.add_channel("/used", "json", 0)
        w.add_channel("/unused", "json", w.add_schema("s", "jsonschema", b"{}"))
        w.write_message(used, 10, b"{}")
    result = audit(path.read_bytes())
    assert [(type(r), r.id) for r in result.data_definitions] == [(Schema, 1), (Channel, 2)]
    with path.open("rb") as f:
        assert NonSeekingReader(f).get_summary().statistics.channel_message_counts == {1: 1}


def test_attachments_metadata_and_write_message(tmp_path: Path):
    path = tmp_path / "misc.mcap"
    blob = bytes(range(256)) * 1000
    with McapWriter(path, compression="none") as w:
        ch = w.add_channel("/log", "json", 0)
        w.write_message(ch, 100, b'{"a": 1}')
        w.add_attachment("calib.yaml", "application/yaml", blob, log_time=7, create_time=3)
        w.write_message(ch, 90, bytearray(b'{"a": 2}'), publish_time=95, sequence=4)
        w.add_metadata("drive", {"vehicle": "test-car", "route": "ring road"})
        w.add_attachment("empty", "application/octet-stream", b"")
    buf = path.read_bytes()
    result = audit(buf, "")
    assert result.messages == [(1, 100, 100, 0, b'{"a": 1}'), (1, 90, 95, 4, b'{"a": 2}')]
    with path.open("rb") as f:
        reader = make_reader(f, validate_crcs=True)
        attachments = list(reader.iter_attachments())
        assert [(a.name, a.media_type, a.log_time, a.create_time) for a in attachments] == [
            ("calib.yaml", "application/yaml", 7, 3),
            ("empty", "application/octet-stream", 0, 0),
        ]
        assert attachments[0].data == blob and attachments[1].data == b""
        assert [(md.name, md.metadata) for md in reader.iter_metadata()] == [
            ("drive", {"vehicle": "test-car", "route": "ring road"})
        ]
        s = reader.get_summary().statistics
        assert (s.attachment_count, s.metadata_count, s.message_count) == (2, 1, 2)
    # the attachment CRC is the library's (walk re-serializes each record and compares bytes)
    attachment_at = reader.get_summary().attachment_indexes[0].offset
    ((_, _, att),) = walk(buf, attachment_at, attachment_at + 1)
    assert att.data == blob


def test_writes_to_a_stream_from_its_current_position():
    f = io.BytesIO()
    f.write(b"not mcap: ")
    w = McapWriter(f, chunk_size=1 << 10)
    ch = w.add_channel("/x", "raw", 0)
    w.write_messages(
        np.full(100, ch),
        np.arange(100),
        np.arange(100),
        None,
        pack([bytes([i]) * 50 for i in range(100)]),
    )
    stats = w.finish()
    assert not f.closed
    buf = f.getvalue()[len(b"not mcap: ") :]
    assert stats.bytes_written == len(buf)
    result = audit(buf)
    assert [m[4] for m in result.messages] == [bytes([i]) * 50 for i in range(100)]


def test_an_exception_leaves_no_summary_and_closes_the_file(tmp_path: Path):
    path = tmp_path / "broken.mcap"
    with pytest.raises(RuntimeError, match="boom"), McapWriter(path) as w:
        ch = w.add_channel("/x", "raw", 0)
        w.write_message(ch, 1, b"x" * 10)
        raise RuntimeError("boom")
    buf = path.read_bytes()
    assert buf.startswith(MAGIC) and not buf.endswith(MAGIC)
    with pytest.raises(ValueError, match="finished"):
        w.write_message(ch, 2, b"y")


def test_bad_input_is_refused_by_name_and_changes_nothing(tmp_path: Path):
    path = tmp_path / "bad.mcap"
    w = McapWriter(path)
    ch = w.add_channel("/x", "raw", 0)
    one = pack([b"abc"])

    def write(ids=(ch,), log=(1,), pub=(1,), seq=None, messages=one):
        w.write_messages(
            np.array(ids),
            np.array(log),
            np.array(pub),
            None if seq is None else np.array(seq),
            messages,
        )

    with pytest.raises(ValueError, match="unknown channel id 2"):
        write(ids=(2,))
    with pytest.raises(ValueError, match="unknown channel id 0"):
        write(ids=(0,))
    with pytest.raises(ValueError, match="length mismatch: log_times"):
        write(log=(1, 2))
    with pytest.raises(ValueError, match="length mismatch: sequences"):
        write(seq=(1, 2))
    with pytest.raises(ValueError, match="length mismatch: channel_ids"):
        write(messages=pack([b"a", b"b"]))
    with pytest.raises(ValueError, match="log_times must be non-negative"):
        write(log=(-1,))
    with pytest.raises(ValueError, match="sequences must fit in uint32"):
        write(seq=(2**32,))
    with pytest.raises(ValueError, match="offsets must be non-decreasing"):
        write(messages=Packed(np.zeros(3, np.uint8), np.array([0, 4])))
    with pytest.raises(ValueError, match="offsets must be non-decreasing"):
        write(
            ids=(ch, ch),
            log=(1, 1),
            pub=(1, 1),
            messages=Packed(np.zeros(3, np.uint8), np.array([0, 2, 1])),
        )
    with pytest.raises(ValueError, match="uint8"):
        write(messages=Packed(np.zeros(3, np.int16), np.array([0, 3])))
    with pytest.raises(ValueError, match="must be integers"):
        write(log=(1.5,))
    with pytest.raises(ValueError, match="unknown schema id 7"):
        w.add_channel("/y", "cdr", 7)
    write()  # still usable, and nothing of the refused calls got in
    stats = w.finish()
    assert stats.message_count == 1
    assert audit(path.read_bytes()).messages == [(1, 1, 1, 0, b"abc")]
    with pytest.raises(ValueError, match="finished"):
        write()
    with pytest.raises(ValueError, match="finished"):
        w.add_metadata("x", {})
    with pytest.raises(ValueError, match="finished"):
        w.finish()
    with pytest.raises(ValueError, match="unknown compression 'gzip'"):
        McapWriter(tmp_path / "g.mcap", compression="gzip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="level"):
        McapWriter(tmp_path / "l.mcap", compression="lz4", level=99)


def test_hand_built_records_match_the_library_serialization():
    """Message, MessageIndex and the Chunk prefix are laid out by numpy/struct here; the
    library's writer must produce the same bytes for the same records."""
    f = io.BytesIO()
    w = McapWriter(f, compression="none", chunk_size=1 << 20)
    a = w.add_channel("/a", "raw", 0)
    b = w.add_channel("/b", "raw", 0)
    payloads = [b"", b"x", b"hello" * 100, b"\x00\xff" * 7]
    ids, times = [b, a, b, a], [30, 10, 20, 40]
    w.write_messages(
        np.array(ids),
        np.array(times),
        np.array([1, 2, 3, 2**64 - 1], np.uint64),
        np.array([0, 1, 2**32 - 1, 5]),
        pack(payloads),
    )
    w.finish()
    buf = f.getvalue()
    ((_, chunk, data),) = audit(buf, "").chunks
    expected = RecordBuilder()
    for r in (Channel(a, "/a", "raw", {}, 0), Channel(b, "/b", "raw", {}, 0)):
        r.write(expected)  # new channels of a chunk first, ascending id
    offsets = []
    for cid, t, pub, seq, p in zip(
        ids, times, [1, 2, 3, 2**64 - 1], [0, 1, 2**32 - 1, 5], payloads, strict=True
    ):
        offsets.append(expected.count)
        Message(channel_id=cid, log_time=t, data=p, publish_time=pub, sequence=seq).write(expected)
    assert data == expected.end()
    indexes = RecordBuilder()
    MessageIndex(a, [(10, offsets[1]), (40, offsets[3])]).write(indexes)
    MessageIndex(b, [(20, offsets[2]), (30, offsets[0])]).write(indexes)
    chunk_bytes = serialize(chunk)
    at = buf.index(chunk_bytes)
    assert buf[at + len(chunk_bytes) : at + len(chunk_bytes) + indexes.count] == indexes.end()


def test_a_chunk_closes_once_its_messages_exceed_chunk_size(tmp_path: Path):
    """The `mcap.writer.Writer` rule: 100-byte records, chunk_size 1000 -> 11 per chunk (the
    11th crosses the limit), and batch boundaries do not move the cuts."""
    f = io.BytesIO()
    w = McapWriter(f, chunk_size=1000)
    ch = w.add_channel("/x", "raw", 0)
    payloads = [bytes([i % 256]) * 69 for i in range(100)]  # 31 + 69 = 100-byte records
    for a, b in ((0, 7), (7, 8), (8, 40), (40, 100)):
        w.write_messages(
            np.full(b - a, ch), np.arange(a, b), np.arange(a, b), None, pack(payloads[a:b])
        )
    w.finish()
    chunks = audit(f.getvalue()).chunks
    per_chunk = [len(walk(data, 0, len(data))) for _, _, data in chunks]
    assert per_chunk == [12] + [11] * 8 + [1]  # the first also holds the Channel record


def test_memory_stays_bounded_however_many_messages(tmp_path: Path):
    """At most threads + 1 chunks in flight: the traced peak for 40 MB of messages is that of
    4 MB, a few chunks' worth, not ten times it (only the ~0.5 kB ChunkIndex per chunk grows)."""
    import tracemalloc

    rng = np.random.default_rng(6)
    batch = pack([rng.integers(0, 256, 4000, dtype=np.uint8).tobytes() for _ in range(100)])
    peaks = []
    for batches in (10, 100):
        tracemalloc.start()
        w = McapWriter(tmp_path / "m.mcap", chunk_size=512 << 10, threads=2)
        ch = w.add_channel("/x", "raw", 0)
        for k in range(batches):
            t = np.arange(100) + 100 * k
            w.write_messages(np.full(100, ch), t, t, None, batch)
        w.finish()
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    # in flight: (threads + 1) x (chunk + its compressed copy), plus the open and the next chunk
    assert peaks[1] < 1.5 * peaks[0] and max(peaks) < 12 * (512 << 10), peaks


def test_write_message_keeps_call_order_with_batches(tmp_path: Path):
    """Single messages are queued and go out as a batch before anything else: the file has
    every message in call order, across the queue's message and byte limits and chunks."""
    rng = np.random.default_rng(7)
    inp = mixed_input(rng)
    n = len(inp.payloads)
    tiny = rng.integers(0, 4, 5000)  # more messages than the queue holds
    t_end = max(inp.log_times)
    inp.add(
        np.ones(tiny.size, int),
        t_end + np.arange(tiny.size),
        t_end + np.arange(tiny.size),
        np.zeros(tiny.size, int),
        [b"t" * int(k) for k in tiny],
    )
    path = tmp_path / "single.mcap"
    w = write_mixed(path, inp, [(0, 500)])
    for cid, t, pub, seq, p in inp.tuples()[500 : n + 4000]:  # past the byte limit too
        w.write_message(cid, t, memoryview(p), publish_time=pub, sequence=seq)
    inp.write(w, n + 4000, len(inp.payloads))
    w.add_metadata("after", {})
    w.write_message(1, 2**64 - 1, b"last")
    w.finish()
    messages = audit(path.read_bytes()).messages
    assert messages[:-1] == inp.tuples()
    assert messages[-1] == (1, 2**64 - 1, 2**64 - 1, 0, b"last")
    with pytest.raises(ValueError, match="finished"):
        w.write_message(1, 1, b"")


def test_write_message_refuses_bad_input_at_the_call(tmp_path: Path):
    w = McapWriter(tmp_path / "bad1.mcap")
    ch = w.add_channel("/x", "raw", 0)
    with pytest.raises(ValueError, match="unknown channel id 2"):
        w.write_message(ch + 1, 1, b"a")
    with pytest.raises(ValueError, match="non-negative"):
        w.write_message(ch, -1, b"a")
    with pytest.raises(ValueError, match="non-negative"):
        w.write_message(ch, 1, b"a", publish_time=2**64)
    with pytest.raises(ValueError, match="uint32"):
        w.write_message(ch, 1, b"a", sequence=-1)
    w.write_message(ch, 1, b"ok")
    assert w.finish().message_count == 1


def test_accepts_the_exporters_serialized_batches(tmp_path: Path):
    from bridge_lake.export.messages.serialized import Serialized

    payloads = [b"a" * 10, b"", b"b" * 3]
    packed = pack(payloads)
    with McapWriter(tmp_path / "s.mcap") as w:
        ch = w.add_channel("/x", "raw", 0)
        t = np.array([1, 2, 3])
        w.write_messages(np.full(3, ch), t, t, None, Serialized(packed.data, packed.offsets))
    assert [m[4] for m in audit((tmp_path / "s.mcap").read_bytes()).messages] == payloads

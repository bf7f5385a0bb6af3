"""A streaming MCAP writer that keeps both cores busy on point clouds and takes small messages
in bulk.

Why not `mcap.writer.Writer`: it compresses every chunk with zstd level 3 on the calling
thread (the compressor is the whole cost for point clouds) and it builds a Python `Message`
object per message (the whole cost for 300-byte IMU samples). Here:

- messages arrive in bulk (`write_messages`: n messages back to back in one uint8 array plus
  n + 1 offsets); their Message records (opcode, length, channel, sequence, log and publish
  time, data) are laid out with numpy, and the per-chunk MessageIndex records are built from
  arrays, so there is no Python work per message;
- each full chunk is compressed, and its CRC computed, on a thread pool (zstandard, lz4 and
  zlib-ng's crc32 release the GIL; zlib-ng computes zlib's CRC32 with carry-less multiplies,
  an order of magnitude faster than the system zlib), at most `threads + 1` chunks in flight
  so memory stays bounded, and chunks are written in submission order, so the bytes never
  depend on thread timing;
- everything that is not per message (Header, Schema, Channel, Statistics, ChunkIndex,
  AttachmentIndex, MetadataIndex, SummaryOffset, Footer, Attachment, Metadata, DataEnd) is
  serialized by the mcap library's own record classes through `RecordBuilder`. Only the
  Message records, the MessageIndex records and the fixed prefix of the Chunk record (so the
  compressed bytes are written straight from the compressor's buffer) are laid out here; the
  tests compare them byte for byte with the library's serialization.

Layout (https://mcap.dev/spec): magic, Header, then the data section: chunks, each followed by
one MessageIndex per channel present in it (entries sorted by log time, then offset); the
Schema and Channel records of a channel sit at the start of the first chunk that carries a
message of it (as `mcap.writer.Writer` puts them inside chunks), and channels that never got a
message are written in the data section before DataEnd, so a linear reader sees every channel.
The summary repeats every Schema and Channel, then Statistics, ChunkIndex, AttachmentIndex and
MetadataIndex records, one SummaryOffset per non-empty group, the Footer (with the summary CRC)
and the closing magic.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import BinaryIO, Literal, Protocol

import lz4.frame
import numpy as np
import zstandard
from mcap.data_stream import RecordBuilder
from mcap.opcode import Opcode
from mcap.records import (
    Attachment,
    AttachmentIndex,
    Channel,
    ChunkIndex,
    DataEnd,
    Header,
    McapRecord,
    Metadata,
    MetadataIndex,
    Schema,
)
from zlib_ng.zlib_ng import crc32

from bridge_lake.formats.ros.files import MCAP_MAGIC
from bridge_lake.formats.ros.mcap_summary import summary_and_footer

Compression = Literal["zstd", "lz4", "none"]

DEFAULT_ZSTD_LEVEL = 1
"""zstd is most of the cost of writing point clouds: level 1 is about a third faster than
level 2 for a few percent more output, and stays within a quarter of level 3's size on the
clouds measured (docs/benchmarks.md, "Design figures"). Pass level=3 for output kept long
and written once."""
DEFAULT_LZ4_LEVEL = 0
"""lz4's fast mode: lz4 is chosen for speed; its high-compression levels are slower than zstd."""

MESSAGE_HEADER = np.dtype(
    [
        ("opcode", "u1"),
        ("length", "<u8"),
        ("channel_id", "<u2"),
        ("sequence", "<u4"),
        ("log_time", "<u8"),
        ("publish_time", "<u8"),
    ]
)
"""The fixed 31-byte head of an MCAP Message record (packed: numpy adds no padding)."""
MESSAGE_OVERHEAD = MESSAGE_HEADER.itemsize
_MESSAGE_FIELDS = MESSAGE_OVERHEAD - 9  # channel_id .. publish_time, part of the record length
_MESSAGE_INDEX_HEAD = struct.Struct("<BQHI")  # opcode, record length, channel_id, entries bytes
_CHUNK_HEAD = struct.Struct("<BQQQQI")  # opcode, length, start, end, uncompressed size, crc
_MAX_QUEUED = 4096
"""`write_message` calls queued (up to chunk_size bytes) before they go out as one batch."""
_LOOP_MIN_MEAN_BYTES = 2048
"""From this mean message size up a Python loop of memcpys lays out records faster than the
vectorized scatter, whose boolean mask costs a pass per byte (the crossover was measured:
docs/benchmarks.md, "Design figures")."""


class PackedMessages(Protocol):
    """n serialized messages back to back: message i is `data[offsets[i]:offsets[i + 1]]`.

    Structural, so `bridge_lake.export.messages.serialized.Serialized` (and anything else with
    these two attributes) is passed as is, and this module does not depend on the serializers.
    """

    @property
    def data(self) -> np.ndarray:
        """uint8, 1-D, all messages back to back."""
        ...

    @property
    def offsets(self) -> np.ndarray:
        """Integers, n + 1, non-decreasing, within `data`."""
        ...


@dataclass(frozen=True)
class McapStats:
    """What `McapWriter.finish` wrote; times are log times in ns, 0 when there are no messages."""

    message_count: int
    channel_message_counts: dict[int, int]
    message_start_time: int
    message_end_time: int
    chunk_count: int
    bytes_written: int


@dataclass(frozen=True)
class _Packed:
    data: np.ndarray
    offsets: np.ndarray


class _Batch:
    """One validated `write_messages` call: record headers and record offsets of all messages."""

    def __init__(
        self,
        channel_ids: np.ndarray,
        log_times: np.ndarray,
        publish_times: np.ndarray,
        sequences: np.ndarray | None,
        data: np.ndarray,
        offsets: np.ndarray,
    ) -> None:
        n = channel_ids.size
        self.data = data
        self.offsets = offsets
        self.lengths = np.diff(offsets)
        self.channel_ids = channel_ids.astype(np.uint16)
        self.log_times = log_times.astype(np.uint64)
        self.header = np.empty(n, MESSAGE_HEADER)
        self.header["opcode"] = Opcode.MESSAGE
        self.header["length"] = self.lengths + _MESSAGE_FIELDS
        self.header["channel_id"] = self.channel_ids
        self.header["sequence"] = 0 if sequences is None else sequences
        self.header["log_time"] = self.log_times
        self.header["publish_time"] = publish_times
        self.record_end = np.empty(n + 1, np.int64)
        self.record_end[0] = 0
        np.cumsum(self.lengths + MESSAGE_OVERHEAD, out=self.record_end[1:])

    def size(self, a: int, b: int) -> int:
        return int(self.record_end[b] - self.record_end[a])

    def record_offsets(self, a: int, b: int) -> np.ndarray:
        """Offsets of records a..b-1 relative to the first of them."""
        return (self.record_end[a:b] - self.record_end[a]).astype(np.uint64)

    def lay_out(self, out: np.ndarray, a: int, b: int) -> None:
        """Write the Message records of messages a..b-1 into `out` (exactly their size)."""
        m = b - a
        head = self.header[a:b].view(np.uint8).reshape(m, MESSAGE_OVERHEAD)
        lengths = self.lengths[a:b]
        body = self.data[self.offsets[a] : self.offsets[b]]
        if lengths.min() == lengths.max():
            rows = out.reshape(m, MESSAGE_OVERHEAD + int(lengths[0]))
            rows[:, :MESSAGE_OVERHEAD] = head
            rows[:, MESSAGE_OVERHEAD:] = body.reshape(m, int(lengths[0]))
            return
        starts = self.record_offsets(a, b).astype(np.intp)
        if body.size >= _LOOP_MIN_MEAN_BYTES * m:
            data_at = (self.offsets[a:b] - self.offsets[a]).astype(np.intp)
            for k in range(m):
                s, d, n = int(starts[k]), int(data_at[k]), int(lengths[k])
                out[s : s + MESSAGE_OVERHEAD] = head[k]
                out[s + MESSAGE_OVERHEAD : s + MESSAGE_OVERHEAD + n] = body[d : d + n]
            return
        at = starts[:, None] + np.arange(MESSAGE_OVERHEAD)
        is_body = np.ones(out.size, bool)
        is_body[at] = False
        out[at] = head
        out[is_body] = body


@dataclass
class _OpenChunk:
    """Messages of the chunk being filled, laid out already (the caller may reuse its buffer)."""

    segments: list[np.ndarray]
    channel_ids: list[np.ndarray]
    log_times: list[np.ndarray]
    record_offsets: list[np.ndarray]
    size: int = 0

    @classmethod
    def empty(cls) -> _OpenChunk:
        return cls([], [], [], [])


@dataclass
class _PendingChunk:
    """A chunk handed to the pool, with everything needed to write it once it is compressed."""

    future: Future[tuple[object, int]]
    compression: str
    start_time: int
    end_time: int
    uncompressed_size: int
    message_indexes: bytes
    message_index_at: dict[int, int]


class McapWriter:
    """Writes one MCAP file; see the module docstring for the layout and why it is fast.

    `output` is a path (opened, written and closed as given, never renamed or fsynced) or a
    binary stream (written from its current position, flushed but not closed; it need not be
    seekable: offsets are counted, not asked). Use as a context manager: the summary is
    written on success; after an exception nothing more is written and the partial file is
    the caller's to delete.
    """

    def __init__(
        self,
        output: str | os.PathLike[str] | BinaryIO,
        *,
        profile: str = "ros2",
        library: str = "bridge_lake",
        compression: Compression = "zstd",
        level: int | None = None,
        chunk_size: int = 4 << 20,
        threads: int = 2,
    ) -> None:
        if compression not in ("zstd", "lz4", "none"):
            raise ValueError(f"unknown compression {compression!r}: use 'zstd', 'lz4' or 'none'")
        if compression == "none" and level is not None:
            raise ValueError("level given for compression 'none'")
        if compression == "zstd":
            level = DEFAULT_ZSTD_LEVEL if level is None else level
            zstandard.ZstdCompressor(level=level)  # raises ValueError for a bad level
        elif compression == "lz4":
            level = DEFAULT_LZ4_LEVEL if level is None else level
            if not 0 <= level <= lz4.frame.COMPRESSIONLEVEL_MAX:
                raise ValueError(f"lz4 level {level} outside 0..{lz4.frame.COMPRESSIONLEVEL_MAX}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self._compression = compression
        self._chunk_compression = "" if compression == "none" else compression
        self._level = level
        self._chunk_size = chunk_size
        self._max_in_flight = threads + 1
        self._local = threading.local()

        self._schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._written_schemas: set[int] = set()
        self._written_channels: set[int] = set()
        self._channel_counts = np.zeros(1, np.int64)  # index = channel id; id 0 is never used
        self._message_count = 0
        self._start_time = 0
        self._end_time = 0
        self._chunk_indexes: list[ChunkIndex] = []
        self._attachment_indexes: list[AttachmentIndex] = []
        self._metadata_indexes: list[MetadataIndex] = []
        self._open = _OpenChunk.empty()
        self._queued: list[tuple[int, int, int, int, bytes]] = []
        self._queued_bytes = 0
        self._pending: deque[_PendingChunk] = deque()
        self._finished = False

        if isinstance(output, str | os.PathLike):
            self._out: BinaryIO = open(output, "wb")  # noqa: SIM115 - closed by finish/abort
            self._owns_output = True
        else:
            self._out = output
            self._owns_output = False
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mcap-chunk")
        self._position = 0
        self._write(MCAP_MAGIC)
        self._write_records([Header(profile=profile, library=library)])

    # -- registration --------------------------------------------------------------------

    def add_schema(self, name: str, encoding: str, data: bytes) -> int:
        """Register a schema; returns its id (1, 2, ...). Written before its first channel."""
        self._check_open()
        schema_id = len(self._schemas) + 1
        if schema_id > 0xFFFF:
            raise ValueError("more than 65535 schemas")
        self._schemas[schema_id] = Schema(
            id=schema_id, name=name, encoding=encoding, data=bytes(data)
        )
        return schema_id

    def add_channel(
        self,
        topic: str,
        message_encoding: str,
        schema_id: int,
        metadata: Mapping[str, str] | None = None,
    ) -> int:
        """Register a channel; returns its id (1, 2, ...). schema_id 0 means schemaless."""
        self._check_open()
        if schema_id != 0 and schema_id not in self._schemas:
            raise ValueError(f"unknown schema id {schema_id} for channel {topic!r}")
        channel_id = len(self._channels) + 1
        if channel_id > 0xFFFF:
            raise ValueError("more than 65535 channels")
        self._channels[channel_id] = Channel(
            id=channel_id,
            topic=topic,
            message_encoding=message_encoding,
            schema_id=schema_id,
            metadata=dict(metadata or {}),
        )
        self._channel_counts = np.append(self._channel_counts, 0)
        return channel_id

    # -- messages ------------------------------------------------------------------------

    def write_messages(
        self,
        channel_ids: np.ndarray,
        log_times: np.ndarray,
        publish_times: np.ndarray,
        sequences: np.ndarray | None,
        messages: PackedMessages,
    ) -> None:
        """Append n messages in the order given (the caller merges topics by time; MCAP allows
        log times to go backwards, chunk and file time ranges are min/max).

        Nothing of the caller's arrays is kept: the records are laid out into the writer's own
        buffers before this returns. Chunks close as soon as their messages exceed chunk_size
        (the `mcap.writer.Writer` rule), so one chunk can span calls and one call many chunks.
        """
        self._check_open()
        self._write_queued()
        batch = self._validated(channel_ids, log_times, publish_times, sequences, messages)
        if batch is None:
            return
        n = batch.channel_ids.size
        self._channel_counts += np.bincount(batch.channel_ids, minlength=len(self._channels) + 1)
        first, last = int(batch.log_times.min()), int(batch.log_times.max())
        if self._message_count == 0:
            self._start_time, self._end_time = first, last
        else:
            self._start_time = min(self._start_time, first)
            self._end_time = max(self._end_time, last)
        self._message_count += n

        a = 0
        while a < n:
            # first record end past the budget: that message closes the chunk
            budget = int(batch.record_end[a]) + self._chunk_size - self._open.size
            b = int(np.searchsorted(batch.record_end, budget, side="right"))
            if b > n:
                self._extend_open(batch, a, n)
                return
            self._close_chunk(batch, a, b)
            a = b

    def write_message(
        self,
        channel_id: int,
        log_time: int,
        data: bytes | bytearray | memoryview,
        publish_time: int | None = None,
        sequence: int = 0,
    ) -> None:
        """One message (publish_time defaults to log_time), for rare messages. Checked now,
        copied, and queued; queued messages go out as one `write_messages` batch before
        anything else is written, so the order of calls is kept (numpy's per-call overhead
        would otherwise cost ~80 us per message)."""
        self._check_open()
        publish_time = log_time if publish_time is None else publish_time
        if not 1 <= channel_id <= len(self._channels):
            raise ValueError(
                f"unknown channel id {channel_id} (registered: 1..{len(self._channels)})"
            )
        if not (0 <= log_time < 1 << 64 and 0 <= publish_time < 1 << 64):
            raise ValueError("log_time and publish_time must be non-negative uint64 nanoseconds")
        if not 0 <= sequence < 1 << 32:
            raise ValueError("sequences must fit in uint32")
        self._queued.append((channel_id, log_time, publish_time, sequence, bytes(data)))
        self._queued_bytes += len(self._queued[-1][4])
        if len(self._queued) >= _MAX_QUEUED or self._queued_bytes >= self._chunk_size:
            self._write_queued()

    def _write_queued(self) -> None:
        if not self._queued:
            return
        ids, log_times, publish_times, sequences, payloads = zip(*self._queued, strict=True)
        self._queued, self._queued_bytes = [], 0
        sizes = np.fromiter(map(len, payloads), np.int64, len(payloads))
        offsets = np.zeros(sizes.size + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        self.write_messages(
            np.array(ids, np.uint16),
            np.array(log_times, np.uint64),
            np.array(publish_times, np.uint64),
            np.array(sequences, np.uint32),
            _Packed(np.frombuffer(b"".join(payloads), np.uint8), offsets),
        )

    # -- other data-section records ------------------------------------------------------

    def add_metadata(self, name: str, data: Mapping[str, str]) -> None:
        """A Metadata record, indexed in the summary; placed after the chunks closed so far."""
        self._check_open()
        self._write_queued()
        self._drain(0)
        offset = self._position
        length = self._write_records([Metadata(name=name, metadata=dict(data))])
        self._metadata_indexes.append(MetadataIndex(offset=offset, length=length, name=name))

    def add_attachment(
        self, name: str, media_type: str, data: bytes, log_time: int = 0, create_time: int = 0
    ) -> None:
        """An Attachment record (with its CRC), indexed in the summary; placed after the
        chunks closed so far."""
        self._check_open()
        self._write_queued()
        self._drain(0)
        offset = self._position
        record = Attachment(
            create_time=create_time,
            log_time=log_time,
            name=name,
            media_type=media_type,
            data=bytes(data),
        )
        length = self._write_records([record])
        self._attachment_indexes.append(
            AttachmentIndex(
                offset=offset,
                length=length,
                log_time=log_time,
                create_time=create_time,
                data_size=len(record.data),
                name=name,
                media_type=media_type,
            )
        )

    def flush(self) -> None:
        """Close the open chunk, write every chunk in flight and flush the file: what was
        written so far is a run of whole chunks (each with its message indexes) that a
        reader of a file without summary recovers, if the process dies now."""
        self._check_open()
        self._write_queued()
        if self._open.size:
            self._close_chunk(None, 0, 0)
        self._drain(0)
        self._out.flush()

    # -- end -----------------------------------------------------------------------------

    def finish(self) -> McapStats:
        """Close the last chunk, write DataEnd, the summary, the footer and the magic; close
        the file if the writer opened it."""
        self._check_open()
        try:
            self._write_queued()
            if self._open.size:
                self._close_chunk(None, 0, 0)
            self._drain(0)
            self._write_records(self._unwritten_definitions(self._channels.values()))
            self._write_records([DataEnd(data_section_crc=0)])
            self._write_summary()
            self._write(MCAP_MAGIC)
            self._out.flush()
        finally:
            self._finished = True
            self._pool.shutdown(wait=True, cancel_futures=True)
            if self._owns_output:
                self._out.close()
        return McapStats(
            message_count=self._message_count,
            channel_message_counts=self._counts(),
            message_start_time=self._start_time,
            message_end_time=self._end_time,
            chunk_count=len(self._chunk_indexes),
            bytes_written=self._position,
        )

    def abort(self) -> None:
        """Stop without a summary: drop chunks in flight, close the file if the writer opened
        it. The partial file is not a valid MCAP; the caller deletes it."""
        if self._finished:
            return
        self._finished = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()
        if self._owns_output:
            self._out.close()

    def __enter__(self) -> McapWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            if not self._finished:
                self.finish()
        else:
            self.abort()

    # -- internals -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._finished:
            raise ValueError("McapWriter is finished (or aborted): nothing more can be written")

    def _validated(
        self,
        channel_ids: np.ndarray,
        log_times: np.ndarray,
        publish_times: np.ndarray,
        sequences: np.ndarray | None,
        messages: PackedMessages,
    ) -> _Batch | None:
        """Check everything before any state changes, so a bad call leaves the file intact."""
        data, offsets = np.asarray(messages.data), np.asarray(messages.offsets)
        if data.dtype != np.uint8 or data.ndim != 1:
            raise ValueError(f"messages.data must be a 1-D uint8 array, got {data.dtype}")
        if offsets.ndim != 1 or offsets.size == 0 or offsets.dtype.kind not in "iu":
            raise ValueError("messages.offsets must be a 1-D integer array of n + 1 offsets")
        n = offsets.size - 1
        columns = {
            "channel_ids": np.asarray(channel_ids),
            "log_times": np.asarray(log_times),
            "publish_times": np.asarray(publish_times),
        }
        if sequences is not None:
            columns["sequences"] = np.asarray(sequences)
        for name, column in columns.items():
            if column.ndim != 1 or column.size != n:
                raise ValueError(
                    f"length mismatch: {name} has shape {column.shape}, messages has {n} "
                    "messages (offsets has n + 1 entries)"
                )
            if column.dtype.kind not in "iu":
                raise ValueError(f"{name} must be integers, got {column.dtype}")
        if n == 0:
            return None
        offsets = offsets.astype(np.int64)
        if offsets[0] < 0 or offsets[-1] > data.size or np.any(offsets[1:] < offsets[:-1]):
            raise ValueError(
                f"messages.offsets must be non-decreasing within data (0..{data.size})"
            )
        ids = columns["channel_ids"]
        bad = (ids < 1) | (ids > len(self._channels))
        if bad.any():
            raise ValueError(
                f"unknown channel id {ids[bad][0]} (registered: 1..{len(self._channels)})"
            )
        for name in ("log_times", "publish_times"):
            if columns[name].dtype.kind == "i" and columns[name].min() < 0:
                raise ValueError(f"{name} must be non-negative nanoseconds")
        if sequences is not None:
            seq = columns["sequences"]
            if seq.min() < 0 or seq.max() > 0xFFFFFFFF:
                raise ValueError("sequences must fit in uint32")
        return _Batch(
            ids,
            columns["log_times"],
            columns["publish_times"],
            columns.get("sequences"),
            data,
            offsets,
        )

    def _extend_open(self, batch: _Batch, a: int, b: int) -> None:
        segment = np.empty(batch.size(a, b), np.uint8)
        batch.lay_out(segment, a, b)
        self._open.segments.append(segment)
        self._open.channel_ids.append(batch.channel_ids[a:b])
        self._open.log_times.append(batch.log_times[a:b])
        self._open.record_offsets.append(batch.record_offsets(a, b) + np.uint64(self._open.size))
        self._open.size += segment.size

    def _close_chunk(self, batch: _Batch | None, a: int, b: int) -> None:
        """Lay out the open chunk plus messages a..b-1 of `batch` in one buffer (with the
        definitions of channels new in it first) and hand it to the pool."""
        open_ = self._open
        channel_ids = list(open_.channel_ids)
        log_times = list(open_.log_times)
        record_offsets = list(open_.record_offsets)
        if batch is not None:
            channel_ids.append(batch.channel_ids[a:b])
            log_times.append(batch.log_times[a:b])
            record_offsets.append(batch.record_offsets(a, b) + np.uint64(open_.size))
        ids = np.concatenate(channel_ids)
        present = [self._channels[int(c)] for c in np.unique(ids)]
        prefix = _serialize(self._unwritten_definitions(present))
        tail = 0 if batch is None else batch.size(a, b)
        buffer = np.empty(len(prefix) + open_.size + tail, np.uint8)
        buffer[: len(prefix)] = np.frombuffer(prefix, np.uint8)
        at = len(prefix)
        for segment in open_.segments:
            buffer[at : at + segment.size] = segment
            at += segment.size
        if batch is not None:
            batch.lay_out(buffer[at:], a, b)
        times = np.concatenate(log_times)
        offsets = np.concatenate(record_offsets) + np.uint64(len(prefix))
        indexes, index_at = _message_indexes(ids, times, offsets)
        self._open = _OpenChunk.empty()
        self._pending.append(
            _PendingChunk(
                future=self._pool.submit(self._compress, buffer),
                compression=self._chunk_compression,
                start_time=int(times.min()),
                end_time=int(times.max()),
                uncompressed_size=buffer.size,
                message_indexes=indexes,
                message_index_at=index_at,
            )
        )
        self._drain(self._max_in_flight)

    def _unwritten_definitions(self, channels: Iterable[Channel]) -> list[McapRecord]:
        """Schema and Channel records not in the file yet, each schema before its channel."""
        records: list[McapRecord] = []
        for channel in channels:
            if channel.id in self._written_channels:
                continue
            if channel.schema_id and channel.schema_id not in self._written_schemas:
                records.append(self._schemas[channel.schema_id])
                self._written_schemas.add(channel.schema_id)
            records.append(channel)
            self._written_channels.add(channel.id)
        return records

    def _compress(self, buffer: np.ndarray) -> tuple[object, int]:
        """Worker: (compressed bytes, crc32 of the uncompressed chunk)."""
        crc = crc32(buffer)
        if self._compression == "zstd":
            compressor = getattr(self._local, "zstd", None)
            if compressor is None:  # not thread-safe: one per worker
                compressor = zstandard.ZstdCompressor(level=self._level, write_content_size=True)
                self._local.zstd = compressor
            return compressor.compress(buffer), crc
        if self._compression == "lz4":
            return lz4.frame.compress(buffer, compression_level=self._level, store_size=True), crc
        return buffer, crc

    def _drain(self, keep: int) -> None:
        """Write finished chunks, oldest first, until at most `keep` remain in flight."""
        while len(self._pending) > keep:
            chunk = self._pending.popleft()
            data, crc = chunk.future.result()
            size = memoryview(data).nbytes
            name = chunk.compression.encode()
            head = _CHUNK_HEAD.pack(
                Opcode.CHUNK,
                8 + 8 + 8 + 4 + 4 + len(name) + 8 + size,
                chunk.start_time,
                chunk.end_time,
                chunk.uncompressed_size,
                crc,
            ) + struct.pack(f"<I{len(name)}sQ", len(name), name, size)
            chunk_start = self._position
            self._write(head)
            self._write(data)
            index_start = self._position
            self._write(chunk.message_indexes)
            self._chunk_indexes.append(
                ChunkIndex(
                    message_start_time=chunk.start_time,
                    message_end_time=chunk.end_time,
                    chunk_start_offset=chunk_start,
                    chunk_length=index_start - chunk_start,
                    message_index_offsets={
                        cid: index_start + at for cid, at in chunk.message_index_at.items()
                    },
                    message_index_length=len(chunk.message_indexes),
                    compression=chunk.compression,
                    compressed_size=size,
                    uncompressed_size=chunk.uncompressed_size,
                )
            )

    def _counts(self) -> dict[int, int]:
        """Messages per channel id, channels with messages only (as `mcap.writer.Writer`)."""
        return {cid: c for cid, c in enumerate(self._channel_counts.tolist()) if c}

    def _write_summary(self) -> None:
        self._write(
            summary_and_footer(
                self._position,
                schemas=list(self._schemas.values()),
                channels=list(self._channels.values()),
                chunk_indexes=self._chunk_indexes,
                attachment_indexes=self._attachment_indexes,
                metadata_indexes=self._metadata_indexes,
                message_count=self._message_count,
                channel_message_counts=self._counts(),
                message_start_time=self._start_time,
                message_end_time=self._end_time,
            )
        )

    def _write_records(self, records: list[McapRecord]) -> int:
        data = _serialize(records)
        self._write(data)
        return len(data)

    def _write(self, data: object) -> None:
        self._out.write(data)  # type: ignore[arg-type]
        self._position += memoryview(data).nbytes  # type: ignore[arg-type]


def _serialize(records: list[McapRecord]) -> bytes:
    builder = RecordBuilder()
    for record in records:
        record.write(builder)
    return builder.end()


def _message_indexes(
    channel_ids: np.ndarray, log_times: np.ndarray, record_offsets: np.ndarray
) -> tuple[bytes, dict[int, int]]:
    """MessageIndex records of one chunk, ascending channel id, entries by (log time, offset);
    and where each record starts relative to the first."""
    order = np.lexsort((record_offsets, log_times, channel_ids))
    entries = np.empty((order.size, 2), "<u8")
    entries[:, 0] = log_times[order]
    entries[:, 1] = record_offsets[order]
    sorted_ids = channel_ids[order]
    ids, starts, counts = np.unique(sorted_ids, return_index=True, return_counts=True)
    parts: list[bytes] = []
    at: dict[int, int] = {}
    position = 0
    for cid, start, count in zip(ids.tolist(), starts.tolist(), counts.tolist(), strict=True):
        body = entries[start : start + count].tobytes()
        head = _MESSAGE_INDEX_HEAD.pack(Opcode.MESSAGE_INDEX, 6 + len(body), cid, len(body))
        at[cid] = position
        parts += (head, body)
        position += len(head) + len(body)
    return b"".join(parts), at

"""Bounded streaming readers of MCAP files, ROS 1 bags and ROS 2 bags, without decoding.

A player, a checker or an exporter wants each message as it is stored: the payload bytes,
the log time, and the channel it came on (topic, schema name, schema encoding, schema data,
message encoding). `open_recording(path)` gives a `Recording` whose `channels` are known up
front and whose `messages(start_ns)` yields `RosMessage`s:

- MCAP: in file order with the `mcap` library's records (`StreamReader`, `breakup_chunk`),
  one chunk decompressed at a time, chunk CRCs validated; with a summary, a start time seeks
  to the first chunk that reaches it (chunk indexes). Without a summary the file is scanned
  once at open for its channels and time range.
- ROS 1 bags (none / bz2 / lz4 chunks) and ROS 2 bags (sqlite3 or mcap storage): rosbags'
  readers, in time order, one chunk or row at a time.

Damage is a `RecordingError` naming the path and the offset of the chunk or record.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from bridge_lake.formats.ros.files import BoundedFile, BoundedPath, RecordingError, recording_kind

LATCHED_TOPICS = ("/tf_static",)
"""Topics replayed to late joiners even when their file does not say they are latched."""


@dataclass(frozen=True, eq=False)
class RosChannel:
    """One channel of a recording, with what a consumer needs to decode its messages."""

    id: int
    topic: str
    schema_name: str
    schema_encoding: str
    """ros2msg | ros2idl | ros1msg | protobuf | jsonschema | '' (no schema)"""
    schema_data: bytes
    message_encoding: str
    """cdr | ros1 | protobuf | json | ..."""
    latched: bool = False
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def type(self) -> str:
        """The schema name in ROS 2 style (pkg/msg/Type) for ROS schemas, else as given."""
        name = self.schema_name
        if self.schema_encoding.startswith("ros") and "/msg/" not in name and "/" in name:
            return name.replace("/", "/msg/", 1)
        return name


class RosMessage(NamedTuple):
    channel: RosChannel
    log_time: int
    data: bytes
    publish_time: int = 0
    """MCAP's publish time (bags: 0)"""
    sequence: int = 0
    """MCAP's sequence number (bags: 0)"""


class Recording:
    """An open recording: `channels` (by id), `start_ns`/`end_ns` (log times of its first
    and last message), `message_count` (None when unknown), `messages(start_ns)`."""

    path: Path
    kind: str
    channels: dict[int, RosChannel]
    start_ns: int
    end_ns: int
    message_count: int | None
    time_ordered: bool
    """True when `messages` yields in log time order (bags); MCAP yields in file order."""

    def messages(
        self, start_ns: int | None = None, topics: Collection[str] | None = None
    ) -> Iterator[RosMessage]:
        """The messages from `start_ns` on, of `topics` only when given."""
        raise NotImplementedError

    def messages_in_time_order(
        self, start_ns: int | None = None, topics: Collection[str] | None = None
    ) -> Iterator[RosMessage]:
        """`messages` in log time order, equal times in reading order: what a player plays
        (as `ros2 bag play` and Foxglove do). Bags and lake drives yield so already
        (`time_ordered`); MCAP, in file order, overrides this to merge through its index."""
        assert self.time_ordered, f"{type(self).__name__} reads in file order: override this"
        return self.messages(start_ns) if topics is None else self.messages(start_ns, topics)

    def close(self) -> None:
        """Release the files; `messages` iterators opened before stop working."""

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_recording(path: str | os.PathLike) -> Recording:
    """An MCAP file, ROS 1 bag or ROS 2 bag folder, by content (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise RecordingError(f"{path}: no such file or folder")
    if not os.access(path, os.R_OK):
        raise RecordingError(f"{path}: cannot be read: permission denied")
    kind = recording_kind(path)
    if kind == "mcap":
        return McapRecording(path)
    return BagRecording(path, kind)


# --- MCAP ------------------------------------------------------------------------------------


def _latched(topic: str, metadata: dict[str, str]) -> bool:
    if topic in LATCHED_TOPICS or metadata.get("latching") in ("1", "true"):
        return True
    qos = metadata.get("offered_qos_profiles", "")
    # rosbag2's QoS YAML: durability 1 is transient local (older files spell the name)
    return "durability: 1" in qos or "transient_local" in qos.lower()


class McapRecording(Recording):
    def __init__(self, path: Path) -> None:
        from mcap.reader import make_reader

        self.path, self.kind, self.time_ordered = path, "mcap", False
        self.header: Any = None
        """the Header record (profile, library); None when the file does not start with one"""
        try:
            with BoundedFile(path) as f:
                reader = make_reader(f)
                with contextlib.suppress(Exception):  # no header: the stream names the offset
                    self.header = reader.get_header()
                summary = reader.get_summary()
        except OSError as exc:
            raise RecordingError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        except Exception:  # a damaged or missing footer/summary (a recording cut short):
            summary = None  # the scan below reads the records and names the damage's offset
        self.summary: Any = summary
        """the mcap library's Summary (schemas, channels, statistics, indexes), or None"""
        self._chunk_indexes: list[Any] = []
        if summary is not None and summary.channels:
            self._chunk_indexes = sorted(summary.chunk_indexes, key=lambda c: c.chunk_start_offset)
            self.channels = {
                cid: _mcap_channel(c, summary.schemas.get(c.schema_id))
                for cid, c in sorted(summary.channels.items())
            }
            stats = summary.statistics
            if stats is not None and stats.message_count:
                self.start_ns, self.end_ns = stats.message_start_time, stats.message_end_time
                self.message_count = stats.message_count
            elif self._chunk_indexes:
                self.start_ns = min(c.message_start_time for c in self._chunk_indexes)
                self.end_ns = max(c.message_end_time for c in self._chunk_indexes)
                self.message_count = None
            else:
                self._scan()
        else:
            self._scan()

    def _scan(self) -> None:
        """No usable summary: one pass for channels, count and time range."""
        self.channels, n, first, last = {}, 0, None, None
        for m in self._stream(0, None, collect=True):
            n += 1
            first = m.log_time if first is None else min(first, m.log_time)
            last = m.log_time if last is None else max(last, m.log_time)
        self.start_ns, self.end_ns, self.message_count = first or 0, last or 0, n
        self._chunk_indexes = []

    def messages(
        self, start_ns: int | None = None, topics: Collection[str] | None = None
    ) -> Iterator[RosMessage]:
        offset = self._first_offset(start_ns)
        if offset < 0:
            return iter(())
        stream = self._stream(offset, start_ns, collect=False)
        if topics is None:
            return stream
        wanted = set(topics)
        return (m for m in stream if m.channel.topic in wanted)

    def messages_in_time_order(
        self, start_ns: int | None = None, topics: Collection[str] | None = None
    ) -> Iterator[RosMessage]:
        """In log time order with memory bounded by how far the file's chunks overlap in
        time: a message waits in a heap until no chunk still to be read starts before it
        (what the `mcap` reader's log_time_order does). A file of disjoint chunks in time
        order holds one chunk at most. A file without chunk indexes (cut short, or
        unchunked) streams in file order, as it did: nothing bounds how far back it goes.
        The live bridge wrote each poll topic by topic: its MCAPs went back 7 s at times."""
        if not self._chunk_indexes:
            return self.messages(start_ns, topics)
        return self._merged(start_ns, set(topics) if topics is not None else None)

    def _merged(self, start_ns: int | None, wanted: set[str] | None) -> Iterator[RosMessage]:
        # the least start time of each chunk and of every chunk after it in the file
        starts = [c.message_start_time for c in self._chunk_indexes]
        least = list(itertools.accumulate(reversed(starts), min))[::-1]
        chunks = zip(self._chunk_indexes, least, strict=True)
        horizon_at = {c.chunk_start_offset: t for c, t in chunks}
        horizon = [-1]  # of the chunk being read; raised at each chunk's start

        def entered(offset: int) -> None:
            horizon[0] = horizon_at.get(offset, horizon[0])

        offset = self._first_offset(start_ns)
        if offset < 0:
            return
        heap: list[tuple[int, int, RosMessage]] = []
        for seq, m in enumerate(self._stream(offset, start_ns, collect=False, entered=entered)):
            if wanted is None or m.channel.topic in wanted:
                heapq.heappush(heap, (m.log_time, seq, m))
            while heap and heap[0][0] <= horizon[0]:
                yield heapq.heappop(heap)[2]
        while heap:
            yield heapq.heappop(heap)[2]

    def _first_offset(self, start_ns: int | None) -> int:
        """Where reading from `start_ns` starts: the first chunk reaching it (through the
        index; 0 without one), -1 when no chunk does."""
        if start_ns is None or not self._chunk_indexes:
            return 0
        reaching = [c for c in self._chunk_indexes if c.message_end_time >= start_ns]
        return reaching[0].chunk_start_offset if reaching else -1

    def metadata(self) -> list[tuple[str, dict[str, str]]]:
        """(name, key/values) of the file's metadata records, through the summary's index."""
        return [(m.name, dict(m.metadata)) for m in self._indexed("iter_metadata")]

    def attachments(self) -> list[Any]:
        """The file's attachment records, through the summary's index."""
        return list(self._indexed("iter_attachments"))

    def _indexed(self, what: str) -> list[Any]:
        from mcap.reader import make_reader

        try:
            with BoundedFile(self.path) as f:
                return list(getattr(make_reader(f, validate_crcs=True), what)())
        except OSError as exc:
            raise RecordingError(f"{self.path}: cannot be read: {exc.strerror or exc}") from exc
        except Exception as exc:  # the mcap library's errors on a damaged summary
            raise RecordingError(f"{self.path}: damaged MCAP summary: {_what(exc)}") from exc

    def _stream(
        self,
        offset: int,
        start_ns: int | None,
        *,
        collect: bool,
        entered: Callable[[int], None] | None = None,
    ) -> Iterator[RosMessage]:
        """The messages from `offset` on in file order; `entered(offset)` at each chunk."""
        from mcap.opcode import Opcode
        from mcap.records import Channel, Chunk, Footer, Message, Schema
        from mcap.stream_reader import StreamReader

        from bridge_lake.formats.ros.mcap_scan import (
            chunk_records,
            message_fields,
            parse_record,
        )

        schemas: dict[int, Any] = {}
        at = offset
        try:
            with BoundedFile(self.path) as f:
                f.seek(offset)
                records = StreamReader(f, skip_magic=offset > 0, emit_chunks=True).records
                while True:
                    at = f.tell()
                    record = next(records, None)
                    if record is None or isinstance(record, Footer):
                        return
                    if isinstance(record, Chunk):
                        if entered is not None:
                            entered(at)
                        inner = chunk_records(
                            record.compression,
                            record.data,
                            record.uncompressed_size,
                            record.uncompressed_crc,
                        )
                        for op, body in inner:  # one message at a time (see chunk_records)
                            if op == Opcode.MESSAGE:
                                cid, seq, log_time, publish, data = message_fields(body)
                                ch = self._channel_of(cid, at)
                                if start_ns is None or log_time >= start_ns:
                                    yield RosMessage(ch, log_time, data, publish, seq)
                            elif op in (Opcode.SCHEMA, Opcode.CHANNEL):
                                r = parse_record(Schema if op == Opcode.SCHEMA else Channel, body)
                                if r is None:
                                    raise RecordingError(
                                        f"{self.path}: offset {at}: damaged MCAP record in a "
                                        "chunk: a schema or channel that does not parse"
                                    )
                                self._defined(r, schemas, collect)
                    elif isinstance(record, Message):
                        ch = self._channel_of(record.channel_id, at)
                        if start_ns is None or record.log_time >= start_ns:
                            yield RosMessage(
                                ch, record.log_time, record.data, record.publish_time,
                                record.sequence,
                            )  # fmt: skip
                    elif isinstance(record, (Schema, Channel)):
                        self._defined(record, schemas, collect)
        except RecordingError:
            raise
        except OSError as exc:
            if exc.errno is None:  # a decompressor's error on damaged bytes
                raise RecordingError(
                    f"{self.path}: offset {at}: damaged MCAP record: {_what(exc)}"
                ) from exc
            raise RecordingError(f"{self.path}: cannot be read: {exc.strerror or exc}") from exc
        except Exception as exc:  # mcap's errors: CRC, truncation, bad records, decompression
            if type(exc).__name__ == "EndOfFile":
                raise RecordingError(
                    f"{self.path}: offset {at}: the file ends inside a record (truncated)"
                ) from exc
            raise RecordingError(
                f"{self.path}: offset {at}: damaged MCAP record: {_what(exc)}"
            ) from exc

    def _channel_of(self, channel_id: int, at: int) -> RosChannel:
        ch = self.channels.get(channel_id)
        if ch is None:
            raise RecordingError(
                f"{self.path}: offset {at}: a message on channel {channel_id}, which no "
                "channel record defines"
            )
        return ch

    def _defined(self, r: Any, schemas: dict[int, Any], collect: bool) -> None:
        """A schema or channel record met in the stream."""
        from mcap.records import Schema

        if isinstance(r, Schema):
            schemas[r.id] = r
        elif collect and r.id not in self.channels:
            self.channels[r.id] = _mcap_channel(r, schemas.get(r.schema_id))


def _mcap_channel(c: Any, schema: Any) -> RosChannel:
    meta = dict(c.metadata or {})
    return RosChannel(
        c.id,
        c.topic,
        schema.name if schema else "",
        schema.encoding if schema else "",
        bytes(schema.data) if schema else b"",
        c.message_encoding,
        _latched(c.topic, meta),
        meta,
    )


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


# --- bags ------------------------------------------------------------------------------------


class BagRecording(Recording):
    """ROS 1 bag (rosbags.rosbag1) or ROS 2 bag folder (rosbags.rosbag2), in time order."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind, self.time_ordered = path, kind, True
        try:
            if kind == "bag1":
                from rosbags.rosbag1 import Reader as Bag1Reader

                self._reader: Any = Bag1Reader(BoundedPath(path))
            else:
                from rosbags.rosbag2 import Reader as Bag2Reader

                self._reader = Bag2Reader(path)
            self._reader.open()
        except OSError as exc:
            raise RecordingError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        except Exception as exc:  # rosbags' ReaderError and what damaged indexes raise
            raise RecordingError(
                f"{path}: {self._where()}not a readable bag: {_what(exc)}"
            ) from exc
        self._conn_ids: dict[int, int] = {}
        self.channels = {}
        for c in self._reader.connections:
            self.channels[c.id] = self._channel(c)
        self.message_count = int(self._reader.message_count)
        self.start_ns = int(self._reader.start_time) if self.message_count else 0
        self.end_ns = int(self._reader.end_time) - 1 if self.message_count else 0

    def _channel(self, c: Any) -> RosChannel:
        from rosbags.interfaces import MessageDefinitionFormat

        text = c.msgdef.data if c.msgdef is not None else ""
        if self.kind == "bag1":
            name = c.msgtype.replace("/msg/", "/")
            latched = bool(getattr(c.ext, "latching", 0)) or c.topic in LATCHED_TOPICS
            meta = {"md5sum": c.digest} if getattr(c, "digest", "") else {}
            return RosChannel(c.id, c.topic, name, "ros1msg", text.encode(), "ros1", latched, meta)
        fmt = getattr(c.msgdef, "format", None)
        encoding = "ros2idl" if fmt == MessageDefinitionFormat.IDL else "ros2msg"
        if not text:
            text, encoding = _generated_msgdef(c.msgtype), "ros2msg"
        durable = any(
            getattr(getattr(q, "durability", None), "name", "") == "TRANSIENT_LOCAL"
            for q in getattr(c.ext, "offered_qos_profiles", []) or []
        )
        serialization = getattr(c.ext, "serialization_format", "cdr")
        return RosChannel(
            c.id,
            c.topic,
            c.msgtype,
            encoding,
            text.encode(),
            serialization,
            durable or c.topic in LATCHED_TOPICS,
        )

    def _where(self) -> str:
        """Where a ROS 1 bag's reader was when it failed: the chunk holding its position."""
        reader = getattr(self, "_reader", None)
        bio = getattr(reader, "bio", None)
        if bio is None:
            return ""
        try:
            pos = bio.tell()
        except (OSError, ValueError):
            return ""
        for chunk_pos, header in sorted(getattr(reader, "chunks", {}).items()):
            if chunk_pos <= pos <= header.datapos + header.datasize:
                return f"offset {chunk_pos}: "
        return f"offset {pos}: "

    @property
    def reader(self) -> Any:
        """rosbags' open reader (rosbag1 or rosbag2 `Reader`): chunks, metadata."""
        return self._reader

    def messages(
        self, start_ns: int | None = None, topics: Collection[str] | None = None
    ) -> Iterator[RosMessage]:
        conns = None
        if topics is not None:
            wanted = set(topics)
            conns = [c for c in self._reader.connections if c.topic in wanted]
            if not conns:  # rosbags reads an empty filter as "every connection"
                return
        try:
            for conn, t, raw in self._reader.messages(connections=conns or (), start=start_ns):
                yield RosMessage(self.channels[conn.id], int(t), raw)
        except OSError as exc:
            if exc.errno is None:  # bz2's "Invalid data stream": the chunk is damaged
                raise RecordingError(
                    f"{self.path}: {self._where()}damaged bag chunk: {_what(exc)}"
                ) from exc
            raise RecordingError(f"{self.path}: cannot be read: {exc.strerror or exc}") from exc
        except Exception as exc:  # rosbags' ReaderError, zlib/lz4/bz2 errors of a chunk
            raise RecordingError(
                f"{self.path}: {self._where()}damaged bag record: {_what(exc)}"
            ) from exc

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a reader that failed half-way
            self._reader.close()


def _generated_msgdef(typename: str) -> str:
    """A ROS 2 bag without stored definitions (rosbag2 before Iron): rosbags' own types."""
    from rosbags.typesys import Stores, get_typestore

    try:
        return get_typestore(Stores.LATEST).generate_msgdef(typename, ros_version=2)[0]
    except Exception:  # a type rosbags does not know: forwarded without a schema text
        return ""


__all__ = [
    "BagRecording",
    "McapRecording",
    "Recording",
    "RecordingError",
    "RosChannel",
    "RosMessage",
    "open_recording",
]

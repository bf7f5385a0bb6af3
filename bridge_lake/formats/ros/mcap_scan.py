"""One streaming pass over an MCAP file's records: what is whole, what is damaged, where the
valid data ends.

The file is read front to back, one top-level record at a time (memory: the largest record,
never the file). Chunks are decompressed, CRC-checked and their inner records walked to
count messages per channel and to build their message indexes; summary records are skipped
(a recovery rebuilds them). The pass stops at the first record that is not whole (the file
ends inside it) or not a record at all (an unknown opcode, a length past the end): that is
where the valid data ends, and the bytes after it are what is lost. A chunk cut by the end
of the file gives up the whole records its complete compressed blocks hold.

A `McapSink` (the recovery writer) receives every piece worth keeping as it is met, so
scanning and rewriting are the same single pass.
"""

from __future__ import annotations

import io
import os
import struct
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol, TypeVar

from mcap.data_stream import ReadDataStream, RecordBuilder
from mcap.exceptions import EndOfFile
from mcap.opcode import Opcode
from mcap.records import Attachment, Channel, Header, McapRecord, Metadata, Schema
from zlib_ng.zlib_ng import crc32

from bridge_lake.formats.ros import compression as comp
from bridge_lake.formats.ros.damage import (
    CORRUPT,
    CRC,
    CUT,
    INVALID,
    MAX_RECORD,
    NO_INDEX,
    ChunkMessages,
    RecordScanner,
    RosFormatError,
    ScanReport,
)
from bridge_lake.formats.ros.files import MCAP_MAGIC

_OP_LEN = struct.Struct("<BQ")
_MESSAGE = struct.Struct("<HIQQ")
"""A Message record's fixed fields: channel id, sequence, log time, publish time."""
_CHUNK_HEAD = struct.Struct("<QQQII")
_U64 = struct.Struct("<Q")
OPCODES = frozenset(int(op) for op in Opcode)
SUMMARY_OPCODES = frozenset(
    int(op)
    for op in (
        Opcode.CHUNK_INDEX,
        Opcode.ATTACHMENT_INDEX,
        Opcode.METADATA_INDEX,
        Opcode.STATISTICS,
        Opcode.SUMMARY_OFFSET,
        Opcode.MESSAGE_INDEX,
    )
)
READ_BUFFER = 1 << 20
WORKERS = 2
"""Threads inspecting chunks: zstd, lz4 and zlib-ng's crc32 release the GIL, so reading,
writing and two decompressions overlap (measured in benchmarks/bench_recover.py)."""
IN_FLIGHT = 3
"""Chunks read but not yet taken: bounds the memory to a few chunks."""


def _name(op: int) -> str:
    try:
        return Opcode(op).name.lower().replace("_", " ")
    except ValueError:
        return f"opcode 0x{op:02x}"


@dataclass
class ChunkContent(ChunkMessages):
    """What the walk of one chunk's records found: its messages (by channel id, log times),
    schema and channel records."""

    schemas: list[Schema] = field(default_factory=list)
    channels: list[Channel] = field(default_factory=list)


class McapSink(Protocol):
    """Receives what a scan keeps, in file order (implemented by `McapRecoveryWriter`)."""

    def header(self, raw: bytes) -> None: ...
    def schema(self, schema: Schema, raw: bytes | None) -> None: ...
    def channel(self, channel: Channel, raw: bytes | None) -> None: ...
    def chunk(
        self, head: bytes, body: memoryview, content: ChunkContent, compression: str, size: int
    ) -> None: ...
    def records(self, data: bytes, content: ChunkContent, compression: str) -> None: ...
    def loose_message(self, raw: bytes, channel_id: int, log_time: int) -> None: ...
    def attachment(self, raw: bytes, record: Attachment) -> None: ...
    def metadata(self, raw: bytes, record: Metadata) -> None: ...


def walk_records(buf: bytes | memoryview, content: ChunkContent, *, chunk: bool = True) -> None:
    """Walk a chunk's (or a cut chunk's prefix) records: message indexes, schemas, channels.

    Stops at the first record that is not whole, does not parse, or (`chunk`) does not
    belong in a chunk; `content.whole` says how far it got. `chunk=False` walks a summary
    section, whose other records are skipped."""
    n = len(buf)
    p = 0
    index = content.index
    unpack_msg, unpack_head = _MESSAGE.unpack_from, _OP_LEN.unpack_from
    while p + 9 <= n:
        op, length = unpack_head(buf, p)
        stop = p + 9 + length
        if stop > n:
            break
        if op == 5 and length >= _MESSAGE.size:
            cid, _, t, _ = unpack_msg(buf, p + 9)
            index[cid].append((t, p))
        elif op == 3:
            schema = parse_record(Schema, buf[p + 9 : stop])
            if schema is None:
                break  # a record that does not parse ends the trusted content
            content.schemas.append(schema)
        elif op == 4:
            channel = parse_record(Channel, buf[p + 9 : stop])
            if channel is None:
                break
            content.channels.append(channel)
        elif chunk or (op not in OPCODES and op < 0x80):
            break  # a chunk holds schemas, channels, messages only: the rest is not trusted
        p = stop
    content.walked(p)


def chunk_records(
    compression: str, data: bytes | memoryview, size: int, crc: int
) -> Iterator[tuple[int, memoryview]]:
    """A whole chunk's inner records as (opcode, body), one at a time: the content is
    decompressed (never past the stated `size`) and CRC-checked first, then walked lazily,
    so that a reader can stop between two messages (the player's read-ahead gate) instead of
    parsing a whole chunk under the GIL. A record running past the content raises."""
    content = memoryview(comp.decompress(compression, data, size))
    if crc and (got := crc32(content)) != crc:
        raise RosFormatError(f"chunk CRC mismatch: {got:#010x}, header {crc:#010x}")
    n, p = len(content), 0
    unpack_head = _OP_LEN.unpack_from
    while p < n:
        if p + 9 > n:
            raise RosFormatError(f"a record in a chunk is cut at content byte {p}")
        op, length = unpack_head(content, p)
        stop = p + 9 + length
        if stop > n:
            raise RosFormatError(f"a record in a chunk runs past its content at byte {p}")
        yield op, content[p + 9 : stop]
        p = stop


def message_fields(body: memoryview) -> tuple[int, int, int, int, bytes]:
    """A Message record's (channel id, sequence, log time, publish time, data)."""
    if len(body) < _MESSAGE.size:
        raise RosFormatError(f"a message record of {len(body)} bytes (at least {_MESSAGE.size})")
    cid, seq, log_time, publish_time = _MESSAGE.unpack_from(body)
    return cid, seq, log_time, publish_time, bytes(body[_MESSAGE.size :])


R = TypeVar("R", Header, Schema, Channel, Attachment, Metadata)
PARSE_ERRORS = (EndOfFile, UnicodeDecodeError, struct.error, ValueError, OverflowError)


class _Exact(io.BytesIO):
    """A record body whose `read(n)` gives n bytes or fails: the mcap library reads a
    string's length and then that many bytes, and a short read would pass unnoticed (the
    record would parse here and break the readers of the recovered file)."""

    def read(self, n: int | None = -1) -> bytes:
        data = super().read(n)
        if n is not None and n >= 0 and len(data) < n:
            raise EndOfFile()
        return data


def parse_record(cls: type[R], body: bytes | memoryview) -> R | None:
    """A record's fields by the mcap library's own parser, or None when its body does not
    hold exactly them (lengths past its end, bytes left over, text that is not UTF-8).
    Left-over bytes are legal MCAP, but the mcap library's chunk reader ignores a schema's
    or channel's record length and would read the next record from them: a recovered file
    must read back with it."""
    stream = ReadDataStream(_Exact(body))
    try:
        record = cls.read(stream)
    except PARSE_ERRORS:
        return None
    return record if stream.count == len(body) else None


def record_bytes(record: McapRecord) -> bytes:
    """A record serialized by the mcap library's own record classes."""
    builder = RecordBuilder()
    record.write(builder)
    return builder.end()


MAX_SUMMARY = 64 << 20
"""A summary section larger than this is not read ahead (it would hold ~600k chunk indexes)."""


def summary_definitions(f: BinaryIO, size: int) -> ChunkContent:
    """The schemas and channels of a finished file's summary, read from its end before the
    pass: a chunk dropped mid-file may hold the only definition of a channel that later
    chunks use. Empty when the file has no valid footer (a cut file) or summary."""
    found = ChunkContent()
    tail = 9 + 20 + len(MCAP_MAGIC)
    if size < len(MCAP_MAGIC) + tail:
        return found
    f.seek(size - tail)
    footer = f.read(tail)
    op, length = _OP_LEN.unpack_from(footer)
    if op != Opcode.FOOTER or length != 20 or footer[-len(MCAP_MAGIC) :] != MCAP_MAGIC:
        return found
    (start,) = _U64.unpack_from(footer, 9)
    if not len(MCAP_MAGIC) <= start < size - tail or size - tail - start > MAX_SUMMARY:
        return found
    f.seek(start)
    try:
        walk_records(f.read(size - tail - start), found, chunk=False)
    except Exception:  # a summary that does not parse gives no definitions; the pass judges
        return ChunkContent()
    return found


def without_channels(data: bytes | memoryview, lost: set[int]) -> bytes:
    """A chunk's records without the messages and channel records of channels in `lost`."""
    out = bytearray()
    p, n = 0, len(data)
    while p + 9 <= n:
        op, length = _OP_LEN.unpack_from(data, p)
        stop = p + 9 + length
        if stop > n:
            break
        drop = (op == Opcode.MESSAGE and struct.unpack_from("<H", data, p + 9)[0] in lost) or (
            op == Opcode.CHANNEL and struct.unpack_from("<H", data, p + 9)[0] in lost
        )
        if not drop:
            out += data[p:stop]
        p = stop
    return bytes(out)


def _records_of(body: memoryview, seen: Inspected) -> bytes | memoryview:
    """A whole chunk's records again (only when it must be rebuilt: memory stays one chunk)."""
    return comp.decompress(seen.compression, body[seen.start :], seen.size)


def chunk_head(body: bytes | memoryview) -> tuple[int, int, str, int, int] | None:
    """A chunk record's (uncompressed size, crc, compression, data start, data length), or
    None when its body is too short to hold them."""
    if len(body) < 32:
        return None
    _, _, usize, crc, clen = _CHUNK_HEAD.unpack_from(body)
    if 32 + clen + 8 > len(body):
        return None
    compression = bytes(body[32 : 32 + clen]).decode("utf-8", "replace")
    (dlen,) = _U64.unpack_from(body, 32 + clen)
    return usize, crc, compression, 40 + clen, dlen


@dataclass
class Inspected:
    """What `inspect_chunk` found: a damage kind and why, or the chunk's content."""

    damage: str | None
    why: str = ""
    content: ChunkContent | None = None
    compression: str = ""
    size: int = 0
    start: int = 0
    """Where the compressed records start in the chunk record's body."""


def inspect_chunk(body: memoryview) -> Inspected:
    """Decompress a whole chunk record's body, check its CRC and walk its records. Touches
    nothing shared, so chunks are inspected on worker threads."""
    head = chunk_head(body)
    if head is None or head[3] + head[4] != len(body) or not comp.known(head[2]):
        return Inspected(CORRUPT, "its header is not a chunk header")
    usize, crc, compression, start, _ = head
    try:
        data = comp.decompress(compression, body[start:], usize)
    except comp.DecompressError as exc:
        return Inspected(CORRUPT, str(exc))
    if len(data) != usize:
        return Inspected(CORRUPT, f"it holds {len(data)} bytes, its header says {usize}")
    content = ChunkContent()
    walk_records(data, content)
    if crc and crc32(data) != crc:
        return Inspected(CRC, "CRC mismatch", content if content.whole == usize else None)
    if content.whole != usize:
        return Inspected(CORRUPT, f"its records break at byte {content.whole}")
    return Inspected(None, content=content, compression=compression, size=usize, start=start)


class McapScanner(RecordScanner):
    """Scans one MCAP file (see the module docstring); `scan()` returns the report."""

    def __init__(self, path: str | os.PathLike[str], sink: McapSink | None = None) -> None:
        super().__init__(path, "mcap", sink)
        self.sink: McapSink | None = sink
        self.schemas: dict[int, Schema] = {}
        self.channels: dict[int, Channel] = {}
        self.chunks = 0
        self.spare = ChunkContent()
        """Definitions from the summary of a finished file (used when a chunk is lost)."""
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[tuple[int, int, bytes, memoryview, Future[Inspected]]] = deque()

    def scan(self) -> ScanReport:
        with open(self.path, "rb", buffering=READ_BUFFER) as f:
            if f.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
                raise RosFormatError("not an MCAP file (no magic)", path=self.path, offset=0)
            self.report.valid_end = len(MCAP_MAGIC)
            self.spare = summary_definitions(f, self.size)
            f.seek(len(MCAP_MAGIC))
            try:
                self._records(f, len(MCAP_MAGIC))
            finally:
                if self._pool is not None:
                    self._pool.shutdown(cancel_futures=True)
        return self.report

    def _records(self, f: BinaryIO, pos: int) -> None:
        report, size = self.report, self.size
        in_summary = False
        handlers: dict[int, Callable[[int, bytes], None]] = {
            Opcode.HEADER: self._header,
            Opcode.SCHEMA: self._schema,
            Opcode.CHANNEL: self._channel,
            Opcode.MESSAGE: self._message,
            Opcode.ATTACHMENT: self._attachment,
            Opcode.METADATA: self._metadata,
        }
        while True:
            left = size - pos
            if left < 9:
                self._drain(0)
                if left == 0:
                    self._ended(pos, in_summary)
                else:
                    self._cut(
                        pos, f"the file ends inside a record header at offset {pos}", in_summary
                    )
                return
            head = f.read(9)
            op, length = _OP_LEN.unpack(head)
            if op != Opcode.CHUNK and op not in SUMMARY_OPCODES:
                self._drain(0)  # everything else is taken in file order after the chunks
            if (op not in OPCODES and op < 0x80) or length > MAX_RECORD:
                self._invalid(pos, f"no valid record at offset {pos} ({_name(op)})", in_summary)
                return
            if length > left - 9:
                self._drain(0)
                if op == Opcode.CHUNK and not in_summary:
                    self._cut_chunk(f, pos, length)
                else:
                    self._cut(
                        pos,
                        f"the file ends inside a {_name(op)} record at offset {pos} "
                        f"({left} of its {9 + length} bytes are there)",
                        in_summary,
                    )
                return
            if op == Opcode.CHUNK and not in_summary:
                self._chunk(pos, head, memoryview(f.read(length)))
            elif op == Opcode.FOOTER:
                f.seek(length, io.SEEK_CUR)
                self._footer(f, pos + 9 + length)
                return
            elif op in handlers and not in_summary:
                handlers[op](pos, head + f.read(length))
            else:
                if op == Opcode.DATA_END:
                    in_summary = True
                f.seek(length, io.SEEK_CUR)  # indexes, statistics, summary: rebuilt on recovery
            pos += 9 + length
            report.valid_end = pos

    # -- ends ------------------------------------------------------------------------------

    def _ended(self, pos: int, in_summary: bool) -> None:
        where = "in its summary" if in_summary else "without a data end or footer"
        self._damage(
            NO_INDEX,
            pos,
            f"no footer: the file ends {where} after the record ending at {pos}; no index",
        )

    def _cut(self, pos: int, text: str, in_summary: bool) -> None:
        if in_summary:
            self._damage(NO_INDEX, pos, f"{text}, inside the summary: the index is lost")
        else:
            self._damage(CUT, pos, f"{text}; no footer, no index")

    def _invalid(self, pos: int, text: str, in_summary: bool) -> None:
        kind = NO_INDEX if in_summary else INVALID
        self._damage(kind, pos, f"{text}: the valid data ends there; no footer")

    def _footer(self, f: BinaryIO, pos: int) -> None:
        tail = f.read(len(MCAP_MAGIC))
        if tail != MCAP_MAGIC:
            self._damage(NO_INDEX, pos, f"the footer is not followed by the closing magic at {pos}")
            return
        self.report.indexed = True
        self.report.valid_end = pos + len(MCAP_MAGIC)

    # -- records ---------------------------------------------------------------------------

    def _header(self, pos: int, raw: bytes) -> None:
        if self._parsed(Header, pos, raw) is not None and self.sink:
            self.sink.header(raw)  # else the writer's neutral header

    def _parsed(self, cls: type[R], pos: int, raw: bytes) -> R | None:
        record = parse_record(cls, memoryview(raw)[9:])
        if record is None:
            name = cls.__name__.lower()
            self._damage(CORRUPT, pos, f"{name} record at offset {pos} does not parse; skipped")
        return record

    def _schema(self, pos: int, raw: bytes) -> None:
        schema = self._parsed(Schema, pos, raw)
        if schema is not None:
            self._add_schema(schema, raw)

    def _add_schema(self, schema: Schema, raw: bytes | None) -> None:
        if schema.id not in self.schemas:
            self.schemas[schema.id] = schema
            if self.sink:
                self.sink.schema(schema, raw)

    def _channel(self, pos: int, raw: bytes) -> None:
        channel = self._parsed(Channel, pos, raw)
        if channel is None:
            return
        if not self._schema_known(channel.schema_id):
            self._damage(
                CORRUPT,
                pos,
                f"channel {channel.id} at offset {pos} names schema {channel.schema_id}, "
                "which no record defines; skipped with its messages",
            )
            return
        self._add_channel(channel, raw)

    def _add_channel(self, channel: Channel, raw: bytes | None) -> None:
        if channel.id not in self.channels:
            self.channels[channel.id] = channel
            if self.sink:
                self.sink.channel(channel, raw)

    def _message(self, pos: int, raw: bytes) -> None:
        if len(raw) < _OP_LEN.size + _MESSAGE.size:
            self._damage(CORRUPT, pos, f"message record at offset {pos} is too short; skipped")
            return
        cid, _, t, _ = _MESSAGE.unpack_from(raw, _OP_LEN.size)
        known = cid in self.channels
        if not known and (c := self.spare_channel(cid)) and self._schema_known(c.schema_id):
            self._add_channel(c, record_bytes(c))
            known = True
        self._count({cid: [(t, 0)]}, kept=known)
        if not known:
            self._damage(
                CORRUPT, pos, f"message at offset {pos} on undefined channel {cid}; dropped"
            )
            return
        if self.sink:
            self.sink.loose_message(raw, cid, t)

    def _attachment(self, pos: int, raw: bytes) -> None:
        record = self._parsed(Attachment, pos, raw)
        if self.sink and record is not None:
            self.sink.attachment(raw, record)

    def _metadata(self, pos: int, raw: bytes) -> None:
        record = self._parsed(Metadata, pos, raw)
        if self.sink and record is not None:
            self.sink.metadata(raw, record)

    def _names(self, cid: int) -> tuple[str, str]:
        channel = self.channels.get(cid)
        if channel is None:
            return f"(channel {cid})", ""
        schema = self.schemas.get(channel.schema_id)
        return channel.topic, schema.name if schema else ""

    # -- chunks ----------------------------------------------------------------------------

    def _chunk(self, pos: int, head9: bytes, body: memoryview) -> None:
        """Hand the chunk to a worker (decompression and CRC release the GIL); its result is
        taken in file order, at most IN_FLIGHT chunks later."""
        n = self.chunks
        self.chunks += 1
        if self._pool is None:
            self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="mcap-scan")
        self._pending.append((pos, n, head9, body, self._pool.submit(inspect_chunk, body)))
        self._drain(IN_FLIGHT)

    def _drain(self, keep: int) -> None:
        while len(self._pending) > keep:
            pos, n, head9, body, future = self._pending.popleft()
            self._take(pos, n, head9, body, future.result())

    def _take(self, pos: int, n: int, head9: bytes, body: memoryview, seen: Inspected) -> None:
        if seen.damage is not None:
            self._drop(pos, n, seen.why, seen.damage, seen.content)
            return
        content = seen.content
        assert content is not None
        self.report.complete_chunks += 1
        data, kept = self._defined(pos, n, content, lambda: _records_of(body, seen))
        self._count(kept.index, kept=True)
        if not self.sink:
            return
        if kept is content:
            self.sink.chunk(head9, body, content, seen.compression, seen.size)
        elif kept.index:
            self.sink.records(data, kept, seen.compression)

    def _defined(
        self, pos: int, n: int, content: ChunkContent, records: Callable[[], bytes | memoryview]
    ) -> tuple[bytes | memoryview, ChunkContent]:
        """Register a chunk's schemas and channels; the chunk as it is, or rebuilt without
        the messages of channels whose definition went with a dropped chunk (counted as
        dropped and reported)."""
        for schema in content.schemas:
            self._add_schema(schema, None)
        lost = self._undefined(content)
        for channel in content.channels:
            if channel.id not in lost:
                self._add_channel(channel, None)
        if not lost:
            return b"", content
        self._drop_undefined(pos, n, content, lost, "channels")
        rebuilt_data = without_channels(records()[: content.whole], lost)
        rebuilt = ChunkContent()
        walk_records(rebuilt_data, rebuilt)
        return rebuilt_data, rebuilt

    def _undefined(self, content: ChunkContent) -> set[int]:
        """Channels used or defined in a chunk whose definition (or schema) is nowhere: not
        in an earlier record, not in the chunk, not in the summary. A definition found only
        in the summary is written before the chunk."""
        inner = {c.id: c for c in content.channels}
        lost = set()
        for cid in set(content.index) | set(inner):
            channel = self.channels.get(cid) or inner.get(cid) or self.spare_channel(cid)
            if channel is None or not self._schema_known(channel.schema_id):
                lost.add(cid)
            elif cid not in self.channels and cid not in inner:
                self._add_channel(channel, record_bytes(channel))
        return lost

    def spare_channel(self, cid: int) -> Channel | None:
        return next((c for c in self.spare.channels if c.id == cid), None)

    def _schema_known(self, sid: int) -> bool:
        if sid == 0 or sid in self.schemas:
            return True
        schema = next((s for s in self.spare.schemas if s.id == sid), None)
        if schema is not None:
            self._add_schema(schema, record_bytes(schema))
        return schema is not None

    def _cut_chunk(self, f: BinaryIO, pos: int, length: int) -> None:
        """The last chunk, cut by the end of the file: keep the whole records its complete
        compressed blocks hold."""
        n = self.chunks
        body = memoryview(f.read(self.size - pos - 9))
        text = (
            f"the file ends inside chunk {n} at offset {pos} ({len(body) + 9} of its "
            f"{length + 9} bytes are there); no footer, no index"
        )
        head = chunk_head(body)
        kept = 0
        if head is not None and comp.known(head[2]):
            usize, _, compression, start, _ = head
            prefix = comp.decompress_prefix(compression, body[start:], usize)
            found = ChunkContent()
            walk_records(prefix, found)
            whole = prefix[: found.whole]
            rebuilt, content = self._defined(pos, n, found, lambda: whole)
            kept = self._keep_partial(whole if content is found else rebuilt, content, compression)
        self._damage(CUT, pos, f"{text}; {kept} whole messages of it kept", n)

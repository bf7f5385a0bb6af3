"""One streaming pass over a ROS 1 bag's records (format 2.0): what is whole, what is
damaged, where the valid data ends.

A bag is `#ROSBAG V2.0\\n`, a bag header record (`index_pos`, `conn_count`, `chunk_count`;
all 0 while rosbag records), then chunk records each followed by index-data records, and
at `index_pos` the connection and chunk-info records. Every record is a u32 header length,
header fields (`u32 length, name=value`), a u32 data length and the data. A crashed
recording has a header saying `index_pos=0` and ends inside a chunk.

The pass reads one record at a time (memory: the largest chunk). Chunks are decompressed
(lz4, bz2 or none) and their connection and message records walked, which gives the
messages per connection with their times and offsets (the index a recovery writes).
Index-data, connection and chunk-info records outside chunks are skipped: they are rebuilt.
The pass stops at the first record that is not whole or not a record; a chunk cut by the
end of the file gives up the whole records its complete compressed blocks hold.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from bridge_lake.formats.ros import compression as comp
from bridge_lake.formats.ros.damage import (
    CUT,
    INVALID,
    MAX_RECORD,
    NO_INDEX,
    ChunkMessages,
    RecordScanner,
    RosFormatError,
    ScanReport,
)
from bridge_lake.formats.ros.files import BAG1_MAGIC

OP_MSGDATA, OP_BAGHEADER, OP_IDXDATA, OP_CHUNK, OP_CHUNK_INFO, OP_CONNECTION = 2, 3, 4, 5, 6, 7
OP_NAMES = {
    2: "message",
    3: "bag header",
    4: "index data",
    5: "chunk",
    6: "chunk info",
    7: "connection",
}
_U32 = struct.Struct("<I")
_TIME = struct.Struct("<II")
VERSION_LINE = BAG1_MAGIC + b"\n"
"""A bag's first line; its records start right after it."""
READ_BUFFER = 1 << 20
CONNECTION_FIELDS = frozenset((b"topic", b"type", b"md5sum", b"message_definition"))
"""What a connection record's data must hold for rosbag and rosbags to read it."""
MAX_HEADER = 1 << 16
"""A record header (its name=value fields) longer than this is not one: rosbag's are tens
of bytes (a connection's topic is the longest field)."""


class BagHeaderError(RosFormatError):
    """A record header whose fields do not parse."""


def header_fields(buf: bytes | memoryview, start: int, end: int) -> dict[bytes, bytes]:
    """The `name=value` fields of a record header in buf[start:end]."""
    fields: dict[bytes, bytes] = {}
    p = start
    unpack = _U32.unpack_from
    while p + 4 <= end:
        (n,) = unpack(buf, p)
        p += 4
        if p + n > end:
            raise BagHeaderError(f"header field of {n} bytes runs past its header")
        raw = bytes(buf[p : p + n])
        name, eq, value = raw.partition(b"=")
        if not eq:
            raise BagHeaderError(f"header field without '=': {raw[:40]!r}")
        fields[name] = value
        p += n
    if p != end:
        raise BagHeaderError("header ends inside a field length")
    return fields


def time_ns(raw: bytes) -> int:
    secs, nsecs = _TIME.unpack(raw)
    return secs * 1_000_000_000 + nsecs


@dataclass
class Connection:
    conn: int
    topic: str
    type: str
    record: bytes
    """The whole connection record as found (header and data), written again as it is."""


@dataclass
class ChunkContent(ChunkMessages):
    """What the walk of one chunk's records found: its messages and connection records."""

    connections: list[Connection] = field(default_factory=list)


class Bag1Sink(Protocol):
    def chunk(self, head: bytes, data: memoryview, content: ChunkContent) -> None: ...
    def records(self, data: bytes, content: ChunkContent, compression: str) -> None: ...
    def connection(self, conn: Connection) -> None: ...


def _connection(buf: bytes | memoryview, p: int, hstart: int, hend: int, stop: int) -> Connection:
    fields = header_fields(buf, hstart, hend)
    data = header_fields(buf, hend + 4, stop)
    missing = CONNECTION_FIELDS - data.keys()
    if missing:  # readers need them all: a record without them is not a connection
        raise BagHeaderError(f"connection record without {b', '.join(sorted(missing))!r}")
    try:
        for value in (fields.get(b"topic", b""), *(data[k] for k in CONNECTION_FIELDS)):
            value.decode()  # rosbag and rosbags read them as UTF-8
    except UnicodeDecodeError as exc:
        raise BagHeaderError(f"connection record field is not UTF-8: {exc}") from None
    return Connection(
        _U32.unpack(fields[b"conn"])[0],
        fields[b"topic"].decode("utf-8", "replace"),
        data.get(b"type", b"").decode("utf-8", "replace"),
        bytes(buf[p:stop]),
    )


def walk_chunk(buf: bytes | memoryview, content: ChunkContent) -> None:
    """The connection and message records of a chunk's content (or a cut chunk's prefix);
    stops at the first record that is not whole (`content.whole` says where)."""
    n = len(buf)
    p = 0
    unpack = _U32.unpack_from
    index = content.index
    try:
        while p + 4 <= n:
            (hlen,) = unpack(buf, p)
            hend = p + 4 + hlen
            if hend + 4 > n:
                break
            (dlen,) = unpack(buf, hend)
            stop = hend + 4 + dlen
            if stop > n:
                break
            fields = header_fields(buf, p + 4, hend)
            op = fields.get(b"op", b"\0")[0]
            if op == OP_MSGDATA:
                t = time_ns(fields[b"time"])
                index[_U32.unpack(fields[b"conn"])[0]].append((t, p))
            elif op == OP_CONNECTION:
                content.connections.append(_connection(buf, p, p + 4, hend, stop))
            else:
                break
            p = stop
    except (BagHeaderError, KeyError, struct.error):
        pass  # the record at p is not whole or not readable: the content ends before it
    content.walked(p)


MAX_INDEX = 64 << 20
"""An index section larger than this is not read ahead for its connections."""


def index_connections(f: BinaryIO, index_pos: int, size: int) -> dict[int, Connection]:
    """The connection records at a finished bag's `index_pos` (read ahead of the pass);
    empty when the header points nowhere valid (a crashed recording says 0)."""
    found: dict[int, Connection] = {}
    if not 0 < index_pos < size or size - index_pos > MAX_INDEX:
        return found
    here = f.tell()
    f.seek(index_pos)
    buf = f.read(size - index_pos)
    f.seek(here)
    p = 0
    try:
        while p + 8 <= len(buf):
            (hlen,) = _U32.unpack_from(buf, p)
            hend = p + 4 + hlen
            if hend + 4 > len(buf):
                break
            (dlen,) = _U32.unpack_from(buf, hend)
            stop = hend + 4 + dlen
            if stop > len(buf):
                break
            if header_fields(buf, p + 4, hend).get(b"op") == bytes([OP_CONNECTION]):
                conn = _connection(buf, p, p + 4, hend, stop)
                found.setdefault(conn.conn, conn)
            p = stop
    except (BagHeaderError, KeyError, struct.error):
        pass  # what parsed before the damage is kept
    return found


def without_connections(data: bytes | memoryview, lost: set[int]) -> bytes:
    """A chunk's records without the messages of the connections in `lost`."""
    out = bytearray()
    p, n = 0, len(data)
    while p + 8 <= n:
        (hlen,) = _U32.unpack_from(data, p)
        hend = p + 4 + hlen
        (dlen,) = _U32.unpack_from(data, hend)
        stop = hend + 4 + dlen
        fields = header_fields(data, p + 4, hend)
        conn = _U32.unpack(fields[b"conn"])[0] if b"conn" in fields else None
        if not (fields.get(b"op") == bytes([OP_MSGDATA]) and conn in lost):
            out += data[p:stop]
        p = stop
    return bytes(out)


class Bag1Scanner(RecordScanner):
    """Scans one ROS 1 bag (see the module docstring); `scan()` returns the report."""

    def __init__(self, path: str | os.PathLike[str], sink: Bag1Sink | None = None) -> None:
        super().__init__(path, "bag1", sink)
        self.sink: Bag1Sink | None = sink
        self.connections: dict[int, Connection] = {}
        self.spare: dict[int, Connection] = {}
        """Connections of a finished bag's index, read ahead: a chunk dropped mid-file may
        hold the only in-chunk record of a connection that later chunks use."""
        self.chunks = 0
        self.index_pos = 0

    def scan(self) -> ScanReport:
        with open(self.path, "rb", buffering=READ_BUFFER) as f:
            if f.read(len(VERSION_LINE)) != VERSION_LINE:
                raise RosFormatError(
                    "not a ROS 1 bag (no #ROSBAG V2.0 line)", path=self.path, offset=0
                )
            self.report.valid_end = len(VERSION_LINE)
            self._records(f, len(VERSION_LINE))
        return self.report

    def _where(self, pos: int) -> str:
        return "inside the index" if self.index_pos and pos >= self.index_pos else ""

    def _records(self, f: BinaryIO, pos: int) -> None:
        size, report = self.size, self.report
        while True:
            left = size - pos
            if left == 0:
                if not (self.index_pos and pos > self.index_pos):
                    self._damage(
                        NO_INDEX,
                        pos,
                        f"no index: the file ends after the record ending at {pos} and its "
                        f"header says index_pos={self.index_pos}",
                    )
                else:
                    report.indexed = True
                return
            if left < 8:
                self._cut(pos, f"the file ends inside a record header at offset {pos}")
                return
            (hlen,) = _U32.unpack(f.read(4))
            if hlen > MAX_HEADER:
                self._invalid(pos, f"no valid record at offset {pos} (not a record header)")
                return
            if hlen > left - 8:
                self._cut(pos, f"the file ends inside the header of a record at offset {pos}")
                return
            head = f.read(hlen)
            try:
                fields = header_fields(head, 0, hlen)
                op = fields[b"op"][0]
            except (BagHeaderError, KeyError, IndexError):
                self._invalid(pos, f"no valid record at offset {pos} (its header does not parse)")
                return
            (dlen,) = _U32.unpack(f.read(4))
            name = OP_NAMES.get(op, f"op {op}")
            if op not in OP_NAMES:
                self._invalid(pos, f"no valid record at offset {pos} (unknown {name})")
                return
            if dlen > MAX_RECORD:
                self._invalid(pos, f"no valid record at offset {pos} (a {name} of {dlen} bytes)")
                return
            if dlen > left - 8 - hlen:
                if op == OP_CHUNK and not self._where(pos):
                    self._cut_chunk(f, pos, fields, hlen, dlen)
                else:
                    self._cut(
                        pos,
                        f"the file ends inside a {name} record at offset {pos} "
                        f"({left} of its {8 + hlen + dlen} bytes are there)",
                    )
                return
            if op == OP_CHUNK:
                data = memoryview(f.read(dlen))
                record_head = _U32.pack(hlen) + head + _U32.pack(dlen)
                self._chunk(pos, fields, record_head, data)
            elif op == OP_BAGHEADER:
                self.index_pos = struct.unpack("<Q", fields.get(b"index_pos", bytes(8)))[0]
                self.spare = index_connections(f, self.index_pos, size)
                f.seek(pos + 8 + hlen + dlen)
            elif op == OP_CONNECTION:
                raw = _U32.pack(hlen) + head + _U32.pack(dlen) + f.read(dlen)
                try:
                    self._add_connection(_connection(raw, 0, 4, 4 + hlen, len(raw)))
                except (BagHeaderError, KeyError, struct.error):
                    self._invalid(pos, f"connection record at offset {pos} does not parse")
                    return
            else:
                f.seek(dlen, os.SEEK_CUR)  # index data, chunk info: rebuilt on recovery
            pos += 8 + hlen + dlen
            report.valid_end = pos

    def _cut(self, pos: int, text: str) -> None:
        if self._where(pos):
            self._damage(NO_INDEX, pos, f"{text}, {self._where(pos)}: the index is lost")
        else:
            self._damage(CUT, pos, f"{text}; no index")

    def _invalid(self, pos: int, text: str) -> None:
        kind = NO_INDEX if self._where(pos) else INVALID
        self._damage(kind, pos, f"{text}: the valid data ends there; no index")

    def _add_connection(self, conn: Connection) -> None:
        if conn.conn not in self.connections:
            self.connections[conn.conn] = conn
            if self.sink:
                self.sink.connection(conn)

    def _names(self, cid: int) -> tuple[str, str]:
        c = self.connections.get(cid)
        return (c.topic, c.type) if c else (f"(connection {cid})", "")

    def _chunk(self, pos: int, fields: dict[bytes, bytes], head: bytes, data: memoryview) -> None:
        n = self.chunks
        self.chunks += 1
        compression = fields.get(b"compression", b"none").decode("ascii", "replace")
        try:
            (usize,) = _U32.unpack(fields[b"size"])
            content_bytes = comp.decompress(compression, data, usize)
        except (KeyError, struct.error, comp.DecompressError) as exc:
            self._drop(pos, n, f"{exc}")
            return
        content = ChunkContent()
        walk_chunk(content_bytes, content)
        if len(content_bytes) != usize or content.whole != usize:
            self._drop(pos, n, f"its records break at byte {content.whole} of {usize}")
            return
        self.report.complete_chunks += 1
        kept_bytes, kept = self._defined(pos, n, content, content_bytes)
        self._count(kept.index, kept=True)
        if not self.sink:
            return
        if kept is content:
            self.sink.chunk(head, data, content)
        elif kept.index:
            self.sink.records(kept_bytes, kept, compression)

    def _defined(
        self, pos: int, n: int, content: ChunkContent, data: bytes | memoryview
    ) -> tuple[bytes | memoryview, ChunkContent]:
        """Register a chunk's connections; the chunk as it is, or rebuilt without the
        messages of connections whose only record went with a dropped chunk (counted as
        dropped and reported)."""
        for conn in content.connections:
            self._add_connection(conn)
        lost = {c for c in content.index if c not in self.connections and c not in self.spare}
        for cid in set(content.index) - lost:
            if cid not in self.connections:
                self._add_connection(self.spare[cid])
        if not lost:
            return data, content
        self._drop_undefined(pos, n, content, lost, "connections")
        kept_bytes = without_connections(data[: content.whole], lost)
        rebuilt = ChunkContent()
        walk_chunk(kept_bytes, rebuilt)
        return kept_bytes, rebuilt

    def _cut_chunk(
        self, f: BinaryIO, pos: int, fields: dict[bytes, bytes], hlen: int, dlen: int
    ) -> None:
        n = self.chunks
        data = f.read(self.size - pos - 8 - hlen)
        compression = fields.get(b"compression", b"none").decode("ascii", "replace")
        kept = 0
        try:
            (usize,) = _U32.unpack(fields[b"size"])
        except (KeyError, struct.error):
            usize = 0
        if usize and comp.known(compression):
            prefix = comp.decompress_prefix(compression, data, usize)
            content = ChunkContent()
            walk_chunk(prefix, content)
            whole, content = self._defined(pos, n, content, prefix[: content.whole])
            kept = self._keep_partial(whole, content, compression)
        self._damage(
            CUT,
            pos,
            f"the file ends inside chunk {n} at offset {pos} ({self.size - pos} of its "
            f"{8 + hlen + dlen} bytes are there); no index; {kept} whole messages of it kept",
            n,
        )

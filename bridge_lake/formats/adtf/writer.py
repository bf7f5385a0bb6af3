"""`write_dat` / `DatWriter`: format-exact ADTF recordings (IFHD 0x0201, 0x0400, 0x0500).

The header is written at once with what is known when recording starts (magic, version, byte
order, data offset, creation time, description) and its counts, sizes and index offsets left
0, as a recorder does: a reader of the growing file (`bridge-lake live`) can tell what it is
from its first bytes. Chunks are streamed to disk as they arrive; only the sparse master
index (the first chunk of each stream, every stream-type chunk and key chunk, then about one
chunk per stream per second) is kept in memory, so writing a multi-GB recording needs
constant memory. Extension
payloads, the extension table and the final header are written on close, which is exactly why
a crashed recording has none of them (spec §1).

Buffers are written as given: for an ADTF 2 DDL stream pass the serialized layout (use
`ddl.convert(..., "deserialized", "serialized")`); the vendor reader will hand out the
deserialized one, as it does for real ADTF 2 files.
"""

from __future__ import annotations

import hashlib
import os
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from bridge_lake.formats.adtf import ifhd
from bridge_lake.formats.adtf.ddl import DDL, Element, Struct, render_ddl
from bridge_lake.formats.adtf.samples import (
    ADTF2_SAMPLE_CLASS,
    ADTF2_TYPE_CLASS,
    ADTF3_FLAG_SUBSTREAM,
    NS_SERIALIZERS,
    SERIALIZER_COPY,
    SERIALIZER_COPY_NS,
    StreamType,
)

WRITABLE_VERSIONS = (0x0201, 0x0400, 0x0500)
PAD = 0xEE
_PADS = [bytes([PAD]) * n for n in range(16)]
_CHUNK = ifhd.CHUNK_STRUCT["<"]
_ADTF2_HEAD = struct.Struct("<QIIIHHQBIqI")
_ADTF3_HEAD = struct.Struct("<QIIIHHQqiQ")
_INDEX0 = struct.Struct("<QIHHQQQI")
INDEX_INTERVAL_NS = 1_000_000_000


@dataclass
class _StreamState:
    stream_id: int
    name: str
    info_data: bytes
    count: int = 0
    first_time: int = 0
    last_time: int = 0
    refs: list[int] = field(default_factory=list)
    next_index_time: int = 0
    sample_unit: int = 1000
    """ns per tick of the sample time stamp: 1 for `_ns` serializers, else 1000 (µs)."""


def _cstr(text: str, size: int) -> bytes:
    raw = text.encode("latin-1")
    if len(raw) >= size:
        raise ValueError(f"{text!r} does not fit a {size}-byte field")
    return raw.ljust(size, b"\0")


def _string(text: str) -> bytes:
    """ADTF 3 length-prefixed string: u32 length including the NUL, then the bytes."""
    raw = text.encode("utf-8") + b"\0"
    return struct.pack("<I", len(raw)) + raw


class DatWriter:
    """Writes one recording. Items must come in non-decreasing chunk time."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        version: int = 0x0500,
        description: str = "",
        file_time: int = 0,
        adtf_version: str = "bridge_lake adtf writer",
        guid: str | None = None,
        referenced_files: tuple[str, ...] = (),
        inline_types: bool = False,
    ) -> None:
        """`referenced_files`: relative paths of the other parts of a split recording (ADTF 3),
        e.g. `("./drive_001.dat",)`. `inline_types` (ADTF 3): write each stream's initial
        type as a stream-type chunk before its first item, as ADTF 3 recorders do, so a
        reader of the file while it is written knows the stream's type and DDL."""
        if version not in WRITABLE_VERSIONS:
            raise ValueError(f"cannot write IFHD version 0x{version:04x}")
        self.path = Path(path)
        self.version = version
        self.unit = 1 if version >= 0x0500 else 1000
        self.description = description
        self.file_time = file_time
        self.adtf_version = adtf_version
        self.guid = guid
        self.referenced_files = referenced_files
        self.inline_types = inline_types and version >= 0x0400
        self._types: dict[int, StreamType] = {}
        self._streams: dict[int, _StreamState] = {}
        self._ddl_streams: dict[str, str] = {}
        self._ddl: DDL | None = None
        self._index: list[bytes] = []
        self._chunks = 0
        self._max_chunk = 0
        self._first_time: int | None = None
        self._last_time = 0
        self._last_offset = 0
        self._fh: BinaryIO = self.path.open("wb", buffering=1 << 20)
        self._fh.write(self._header(0, ifhd.HEADER_SIZE, 0, 0))
        self._pos = ifhd.HEADER_SIZE

    # -- streams ---------------------------------------------------------------------------

    def add_stream(
        self,
        name: str,
        *,
        stream_type: StreamType | None = None,
        major: int = 0,
        sub: int = 0,
        type_flags: int = 0,
        ddl: DDL | None = None,
        ddl_struct: str | None = None,
        stream_id: int | None = None,
        sample_class: str = ADTF2_SAMPLE_CLASS,
        serializer: str | None = None,
        type_class: str = ADTF2_TYPE_CLASS,
        type_data: bytes = b"",
    ) -> int:
        """Declare a stream; returns its id.

        ADTF 3 files take a `stream_type` (meta type + properties; put DDL in `md_struct` /
        `md_definitions`). ADTF 2 files take the media type (major, sub, flags); for a DDL
        stream (major 0, sub 0) pass `ddl` and `ddl_struct`, and the `.description` sidecar
        is written next to the file. `sample_class` names the ADTF 2 sample class (e.g.
        `adtf.sample.can_message_raw`, which has the same envelope). `serializer` overrides the
        ADTF 3 serializer id (default: sample copy, ns variant for 0x0500); with a
        `media_description_sample_serialization` id, buffers are DDL-serialized (`md_struct`).
        ADTF 2 `type_class` / `type_data`: another media type class and the bytes it streams
        after major/sub/flags (e.g. `adtf.type.video` + `samples.VIDEO_FORMAT`).
        """
        sid = stream_id if stream_id is not None else len(self._streams) + 1
        if not 0 < sid <= ifhd.MAX_STREAM_ID or sid in self._streams:
            raise ValueError(f"stream id {sid} is taken or outside 1..{ifhd.MAX_STREAM_ID}")
        if self.version < 0x0400:
            info = (
                _cstr(sample_class, 512)
                + _cstr(type_class, 512)
                + struct.pack("<III", major, sub, type_flags)
                + type_data
            )
            if ddl is not None:
                if ddl_struct not in ddl.structs:
                    raise ValueError(f"DDL has no struct {ddl_struct!r}")
                self._merge_ddl(ddl)
                self._ddl_streams[name] = ddl_struct
        else:
            stype = stream_type or StreamType("adtf/anonymous")
            self._types[sid] = stype
            if serializer is None:
                serializer = SERIALIZER_COPY_NS if self.version >= 0x0500 else SERIALIZER_COPY
            info = _string(stype.to_xml()) + _string(serializer)
        _cstr(name, 228)
        unit = 1 if self.version >= 0x0400 and serializer in NS_SERIALIZERS else 1000
        self._streams[sid] = _StreamState(sid, name, info, sample_unit=unit)
        return sid

    def describe_stream(self, stream_id: int, name: str, info_data: bytes) -> None:
        """Declare a stream, or replace the description of a declared one, with `info_data`
        as stored after the 256-byte head of its `index<N>` extension (spec §4.1), e.g. as
        read from another recording. For copies of chunks (`write_chunk`) whose stream
        descriptions are found only while the chunks are walked (crash recovery)."""
        _cstr(name, 228)
        if not 0 < stream_id <= ifhd.MAX_STREAM_ID:
            raise ValueError(f"stream id {stream_id} is outside 1..{ifhd.MAX_STREAM_ID}")
        stream = self._streams.get(stream_id)
        if stream is None:
            self._streams[stream_id] = _StreamState(stream_id, name, bytes(info_data))
        else:
            stream.name, stream.info_data = name, bytes(info_data)

    def _merge_ddl(self, ddl: DDL) -> None:
        if self._ddl is None:
            self._ddl = DDL(dict(ddl.datatypes), {}, {}, {}, dict(ddl.constants))
        for kind in ("datatypes", "enums", "structs", "constants"):
            mine, theirs = getattr(self._ddl, kind), getattr(ddl, kind)
            for key, value in theirs.items():
                if mine.setdefault(key, value) != value:
                    raise ValueError(f"conflicting DDL {kind[:-1]} {key!r}")

    # -- chunks ----------------------------------------------------------------------------

    def _begin(self, sid: int, time_ns: int, flags: int) -> tuple[_StreamState, int, bool]:
        stream = self._streams.get(sid)
        if stream is None:
            raise ValueError(f"unknown stream id {sid}")
        if self.inline_types and not stream.count and not flags & ifhd.FLAG_TYPE:
            self.write_stream_type(sid, time_ns, self._types[sid])
        t = time_ns // self.unit
        if t < self._last_time:
            raise ValueError(f"chunk time {time_ns} ns goes back in time")
        if self._first_time is None:
            self._first_time = t
        if not stream.count:
            stream.first_time = t
        stream.last_time = t
        self._last_time = t
        indexed = (
            stream.count == 0
            or flags & (ifhd.FLAG_TYPE | ifhd.FLAG_KEY)
            or time_ns >= stream.next_index_time
        )
        if indexed:
            stream.next_index_time = time_ns - time_ns % INDEX_INTERVAL_NS + INDEX_INTERVAL_NS
        return stream, t, bool(indexed)

    def _finish(self, stream: _StreamState, t: int, flags: int, size: int, indexed: bool) -> int:
        """Index bookkeeping for the chunk just written at self._pos; returns the next pos."""
        pos = self._pos
        if indexed:
            stream.refs.append(len(self._index))
            self._index.append(
                _INDEX0.pack(
                    t,
                    size,
                    stream.stream_id,
                    flags,
                    pos,
                    self._chunks,
                    stream.count,
                    len(stream.refs) - 1,
                )
            )
        self._fh.write(_PADS[-size % 16])
        self._last_offset = pos
        self._chunks += 1
        stream.count += 1
        self._max_chunk = max(self._max_chunk, size)
        self._pos = pos + ((size + 15) & ~15)
        return self._pos

    def _head(
        self, stream: _StreamState, t: int, size: int, flags: int, indexed: bool
    ) -> tuple[int, ...]:
        """Chunk header fields; ref_master_table_index points at the newest index entry."""
        return (
            t,
            len(self._index) if indexed else max(len(self._index) - 1, 0),
            self._pos - self._last_offset if self._chunks else 0,
            size,
            stream.stream_id,
            flags,
            stream.count,
        )

    def write_sample(
        self,
        stream_id: int,
        time_ns: int,
        data: bytes | bytearray | memoryview,
        *,
        sample_time_ns: int | None = None,
        flags: int = 0,
        substream_id: int = 0,
        key: bool = False,
    ) -> None:
        """One sample. `time_ns` is the chunk (recording) time, `sample_time_ns` the sample's
        own time stamp (default: the chunk time). Times are floored to the file's unit."""
        chunk_flags = ifhd.FLAG_KEY if key else 0
        stream, t, indexed = self._begin(stream_id, time_ns, chunk_flags)
        stime = time_ns if sample_time_ns is None else sample_time_ns
        n = len(data)
        if self.version < 0x0400:
            if substream_id:
                raise ValueError("ADTF 2 media samples have no substream id")
            size = _ADTF2_HEAD.size + n + 4
            head = self._head(stream, t, size, chunk_flags, indexed)
            self._fh.write(_ADTF2_HEAD.pack(*head, 3, n, stime // 1000, flags))
            self._fh.write(data)
            self._fh.write(b"\0\0\0\0")
        else:
            sflags = flags | (ADTF3_FLAG_SUBSTREAM if substream_id else 0)
            stime //= stream.sample_unit
            size = _ADTF3_HEAD.size + n + (4 if substream_id else 0)
            head = self._head(stream, t, size, chunk_flags, indexed)
            self._fh.write(_ADTF3_HEAD.pack(*head, stime, sflags, n))
            self._fh.write(data)
            if substream_id:
                self._fh.write(struct.pack("<I", substream_id))
        self._finish(stream, t, chunk_flags, size, indexed)

    def write_chunk(
        self, stream_id: int, time_ns: int, flags: int, body: bytes | memoryview
    ) -> None:
        """A chunk whose body (sample envelope, type string or nothing) is copied as it is:
        the header, index and extensions around it are this writer's."""
        stream, t, indexed = self._begin(stream_id, time_ns, flags)
        size = ifhd.CHUNK_HEADER_SIZE + len(body)
        self._fh.write(_CHUNK.pack(*self._head(stream, t, size, flags, indexed)))
        self._fh.write(body)
        self._finish(stream, t, flags, size, indexed)

    def write_trigger(self, stream_id: int, time_ns: int) -> None:
        stream, t, indexed = self._begin(stream_id, time_ns, ifhd.FLAG_TRIGGER)
        head = self._head(stream, t, ifhd.CHUNK_HEADER_SIZE, ifhd.FLAG_TRIGGER, indexed)
        self._fh.write(_CHUNK.pack(*head))
        self._finish(stream, t, ifhd.FLAG_TRIGGER, ifhd.CHUNK_HEADER_SIZE, indexed)

    def write_stream_type(self, stream_id: int, time_ns: int, stream_type: StreamType) -> None:
        """A stream-type change (ADTF 3 only); it applies to the stream's following samples."""
        if self.version < 0x0400:
            raise ValueError("ADTF 2 files cannot change a stream's type")
        flags = ifhd.FLAG_TYPE | ifhd.FLAG_KEY
        stream, t, indexed = self._begin(stream_id, time_ns, flags)
        body = _string(stream_type.to_xml())
        size = ifhd.CHUNK_HEADER_SIZE + len(body)
        self._fh.write(_CHUNK.pack(*self._head(stream, t, size, flags, indexed)))
        self._fh.write(body)
        self._finish(stream, t, flags, size, indexed)

    # -- closing ---------------------------------------------------------------------------

    def _guid(self) -> str:
        if self.guid is not None:
            return self.guid
        digest = hashlib.sha256(
            repr(
                (self.version, self._first_time, self._last_time, self._chunks, self.file_time)
            ).encode()
            + b"".join(s.name.encode() for s in self._streams.values())
        ).digest()
        return str(uuid.UUID(bytes=digest[:16], version=4)).upper()

    def _extensions(self) -> list[tuple[str, int, bytes]]:
        exts: list[tuple[str, int, bytes]] = []
        if self.version >= 0x0400:
            names = b"".join(n.encode("utf-8") + b"\0" for n in self.referenced_files)
            exts.append(("referencedfiles", 0, names))
            exts.append(("adtf_version", 0, self.adtf_version.encode() + b"\0"))
        exts.append(("GUID", 0, self._guid().encode() + b"\0"))
        exts.append(("index0", 0, b"".join(self._index)))
        exts.append(("index_add0", 0, bytes(32)))
        for s in sorted(self._streams.values(), key=lambda s: s.stream_id):
            head = struct.pack(
                "<QQQI", s.count, s.first_time, s.last_time, len(s.info_data)
            ) + _cstr(s.name, 228)
            refs = struct.pack(f"<{len(s.refs)}I", *s.refs)
            exts.append((f"index{s.stream_id}", s.stream_id, head + s.info_data + refs))
            exts.append((f"index_add{s.stream_id}", s.stream_id, bytes(32)))
        return exts

    def flush(self) -> None:
        """Hand everything written so far to the OS: the chunks become visible to a reader
        of the growing file (a recorder flushing per chunk)."""
        self._fh.flush()

    def _header(self, ext_count: int, ext_offset: int, data_size: int, chunks: int) -> bytes:
        first = self._first_time or 0
        return struct.pack(
            "<4sIIIQQQQQQQBQBQQQ30s1912s",
            ifhd.MAGIC,
            self.version,
            0,
            ext_count,
            ext_offset,
            ifhd.HEADER_SIZE,
            data_size,
            chunks,
            self._max_chunk,
            self._last_time - first,
            self.file_time,
            1,
            first,
            1,
            ifhd.HEADER_SIZE,
            ifhd.HEADER_SIZE,
            ifhd.HEADER_SIZE,
            b"",
            _cstr(self.description, 1912),
        )

    def close(self) -> None:
        if self._fh.closed:
            return
        data_size = self._pos - ifhd.HEADER_SIZE
        table = bytearray()
        pos = self._pos
        for name, sid, payload in self._extensions():
            self._fh.write(payload)
            table += struct.pack(
                "<384sHHIIIQQ96s",
                _cstr(name, 384),
                sid,
                0,
                0,
                0,
                0,
                pos if payload else 0,
                len(payload),
                b"",
            )
            pos += len(payload)
        self._fh.write(table)
        header = self._header(len(table) // ifhd.EXTENSION_ENTRY_SIZE, pos, data_size, self._chunks)
        self._fh.seek(0)
        self._fh.write(header)
        self._fh.close()
        if self._ddl is not None:
            ddl = DDL(
                self._ddl.datatypes,
                self._ddl.enums,
                {**_media_type_structs(), **self._ddl.structs},
                dict(self._ddl_streams),
                self._ddl.constants,
            )
            Path(str(self.path) + ifhd.DDL_SIDECAR_SUFFIX).write_text(render_ddl(ddl))

    def __enter__(self) -> DatWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _media_type_structs() -> dict[str, Struct]:
    """`adtf.core.media_type` as ADTF 2 declares it: the vendor refuses a sidecar whose
    streams name a type the description does not define."""
    u32 = [
        Element(n, "tUInt32", 1, 4 * i, None, None, "<", 1)
        for i, n in enumerate(("ui32MajorType", "ui32SubType", "ui32Flags"))
    ]
    media = Element("mediatype", "tMediaTypeInfo", 1, 0, None, None, "<", 1)
    return {
        ADTF2_TYPE_CLASS: Struct(ADTF2_TYPE_CLASS, 1, (media,)),
        "tMediaTypeInfo": Struct("tMediaTypeInfo", 1, tuple(u32)),
    }


@dataclass(frozen=True)
class StreamSpec:
    """A stream declaration for `write_dat`: arguments of `DatWriter.add_stream`, which
    takes every field by its name."""

    name: str
    stream_type: StreamType | None = None
    major: int = 0
    sub: int = 0
    type_flags: int = 0
    ddl: DDL | None = None
    ddl_struct: str | None = None
    stream_id: int | None = None


@dataclass(frozen=True)
class WriteItem:
    """A sample (data given), trigger (kind 'trigger') or type change (stream_type given)."""

    stream_id: int
    time_ns: int
    data: bytes = b""
    sample_time_ns: int | None = None
    flags: int = 0
    substream_id: int = 0
    kind: str = "sample"
    stream_type: StreamType | None = None
    key: bool = False


def write_dat(
    path: str | os.PathLike[str],
    streams: Iterable[StreamSpec],
    items: Iterable[WriteItem],
    *,
    version: int = 0x0500,
    description: str = "",
    file_time: int = 0,
) -> Path:
    """Write a whole recording in one call; returns its path."""
    with DatWriter(path, version=version, description=description, file_time=file_time) as w:
        for spec in streams:
            w.add_stream(**vars(spec))
        for item in items:
            if item.kind == "trigger":
                w.write_trigger(item.stream_id, item.time_ns)
            elif item.kind == "stream_type":
                w.write_stream_type(item.stream_id, item.time_ns, item.stream_type)
            else:
                w.write_sample(
                    item.stream_id,
                    item.time_ns,
                    item.data,
                    sample_time_ns=item.sample_time_ns,
                    flags=item.flags,
                    substream_id=item.substream_id,
                    key=item.key,
                )
    return Path(path)

"""Follow an ADTF recording while it is written: the chunks it gains, once each, in order.

A recorder writes the 2048-byte header first (counts, sizes and index offsets still 0),
appends chunks, and only at close writes the index extensions (stream names, ADTF 2 types)
and the final header (spec §1, §2). `AdtfFollower.poll()` reads what the file gained since
the last call with `os.pread` (copies, never a mapping: a file truncated under a mapping
would kill the process with SIGBUS) and hands out every complete chunk after the last one
handed out:

- a chunk whose bytes are not all there yet ends the poll; the next poll resumes at its
  header. Nothing past the last complete chunk is read, nothing handed out is read again;
- the header's counts, sizes and index offsets are not used while the file is open. The
  file counts as closed when its header lists an extension table that lies inside the file;
  the walk then stops at the real end of the data area and the real stream catalog is read;
- stream descriptions while writing: ADTF 3 stream-type chunks (they precede a stream's
  first sample); names and ADTF 2 types from a catalog (`load_catalog`: a finished recording
  of the same configuration, same stream ids); else provisional `stream_<id>`, payload
  bytes, and `provisional` says which;
- a chunk header that is not plausible (size, stream id, flags, time going back, link to the
  previous chunk) in an open file is damage once a valid chain of chunks follows it: the
  bytes up to there go to `quarantine` with offset and reason, the walk goes on there. While
  nothing valid follows (a recorder in the middle of writing its extensions) it waits;
- the file truncated or rewritten (the last chunk handed out is no longer at its offset, or
  the file shrank, or another file now has the path) is a `restart`: the walk starts over;
- a file that does not start with the IFHD magic is a typed `HeaderError` at offset 0.

Samples are the reader's `Sample` tuples; `data` is the stored buffer (for ADTF 2 DDL
streams the serialized layout, which the normalizer's decoder reads as such).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from bridge_lake.formats.adtf import ifhd
from bridge_lake.formats.adtf.errors import AdtfError, HeaderError, SampleError
from bridge_lake.formats.adtf.model import KIND_ADTF2, KIND_ADTF3, KIND_RAW, Sample, Stream
from bridge_lake.formats.adtf.reader import attach_ddl, open_dat
from bridge_lake.formats.adtf.samples import (
    ADTF2_INDEXED_SAMPLE_CLASS,
    ADTF3_FLAG_INFO,
    ADTF3_FLAG_SUBSTREAM,
    NS_SERIALIZERS,
    SERIALIZER_COPY,
    SERIALIZER_COPY_NS,
    adtf2_envelope,
    adtf3_envelope,
    parse_stream_type,
    read_string,
)

READ_BLOCK = 4 << 20
"""Bytes a poll reads at most (more only for one chunk that is bigger): bounds its memory
whatever the backlog; `Poll.more` says that bytes are waiting."""
MAX_CHUNK = 1 << 30
"""A chunk header claiming more is damage (the largest camera frame is far below)."""
RESYNC_CHAIN = 2
"""Valid chunks in a row that must follow damage before the walk resumes after it."""
PROVISIONAL_PREFIX = "stream_"
SIDECAR_WAIT_S = 2.0
"""How long a closed ADTF 2 file's `.description` sidecar (written after the file) is waited
for before its catalog is compared."""


@dataclass
class Catalog:
    """Stream descriptions of a finished recording of the same configuration."""

    path: str
    version: int
    streams: dict[int, Stream]


def load_catalog(path: str | os.PathLike[str]) -> Catalog:
    """The stream catalog (names, types, DDL incl. an ADTF 2 sidecar) of a finished file."""
    with open_dat(path, strict=False) as f:
        return Catalog(str(path), f.version, {s.stream_id: s for s in f.streams})


@dataclass
class CatalogDifference:
    stream_id: int
    what: str
    live: str | None
    final: str | None

    def __str__(self) -> str:
        return (
            f"stream {self.stream_id}: {self.what} was {self.live!r} live, "
            f"{self.final!r} in the file"
        )


@dataclass
class Quarantined:
    offset: int
    length: int
    reason: str


@dataclass
class Poll:
    """What one poll found."""

    samples: list[Sample] = field(default_factory=list)
    new_streams: list[Stream] = field(default_factory=list)
    """streams described for the first time in this poll (before their samples)"""
    quarantine: list[Quarantined] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    restarted: bool = False
    closed: bool = False
    chunks: int = 0
    bytes: int = 0
    size: int | None = None
    """the file's size at this poll (None: it does not exist)"""
    more: bool = False
    """complete chunks may be waiting beyond this poll's READ_BLOCK: poll again at once"""


_CHUNK = struct.Struct("<QIIIHHQ")
_FAST = struct.Struct("<QIIIHHQqiQ")
"""Chunk header + ADTF 3 sample envelope (time, flags, buffer size): the walk's fast path."""
_DATA_FLAGS = 0x07
"""Chunk flags of a sample chunk (key and the like; not a type or trigger chunk)."""
_ENVELOPE_EXTRAS = ADTF3_FLAG_INFO | ADTF3_FLAG_SUBSTREAM


class AdtfFollower:
    """Follows one ADTF file; call `poll()` whenever it may have grown (see module)."""

    def __init__(self, path: str | os.PathLike[str], catalog: Catalog | None = None) -> None:
        self.path = str(path)
        self.catalog = catalog
        self.streams: dict[int, Stream] = {}
        self.provisional: set[int] = set()
        """stream ids published under a provisional name"""
        self.type_changes: list[tuple[int, int]] = []
        """(stream id, offset) of stream-type chunks after a stream's first one"""
        self.triggers = 0
        self.closed = False
        self.differences: list[CatalogDifference] = []
        self.final: Catalog | None = None
        """the catalog the file was closed with (None until then, or when unreadable): the
        next part of a split recording starts with it"""
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._reset()

    def _reset(self) -> None:
        self.header: ifhd.FileHeader | None = None
        self.pos = ifhd.HEADER_SIZE
        self._last: tuple[int, bytes] | None = None  # offset and header bytes of the last chunk
        self._last_time = 0
        self._data_end: int | None = None
        self.streams.clear()
        self.provisional.clear()
        self.type_changes.clear()
        self.closed = False

    # -- file ------------------------------------------------------------------------------

    def _open(self) -> int | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        ident = (st.st_dev, st.st_ino)
        if self._fd is not None and ident != self._ident:
            os.close(self._fd)
            self._fd = None
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
            self._ident = ident
        return os.fstat(self._fd).st_size

    def unread(self) -> int:
        """Bytes of the chunk area after the last complete chunk handed out (a chunk cut
        short, damage nothing valid follows, or bytes not polled yet)."""
        if self.header is None or self._fd is None:
            return 0
        end = self._data_end if self._data_end is not None else os.fstat(self._fd).st_size
        return max(0, end - self.pos)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def exists(self) -> bool:
        return Path(self.path).is_file()

    # -- polling ---------------------------------------------------------------------------

    def poll(self) -> Poll:
        """Everything complete that the file gained since the last poll (see module)."""
        out = Poll()
        before = self._ident
        size = out.size = self._open()
        if size is None or self._fd is None:
            return out
        if (before is not None and before != self._ident) or self._rewritten(size):
            self._reset()
            out.restarted = True
            out.notices.append(f"{self.path}: truncated or rewritten; following it from the start")
        if self.header is None and not self._read_header(size, out):
            return out
        if self.closed:
            return out
        self._check_closed(size)
        end = self._data_end if self._data_end is not None else size
        if self.pos < end:
            block = os.pread(self._fd, min(READ_BLOCK, end - self.pos), self.pos)
            if len(block) >= ifhd.CHUNK_HEADER_SIZE:
                self.pos += self._walk(block, self.pos, end, out)
                out.more = self.pos + ifhd.CHUNK_HEADER_SIZE <= end and out.chunks > 0
        if self._data_end is not None and self.pos >= self._data_end:
            self._finish(out)
        return out

    def _rewritten(self, size: int) -> bool:
        if self._last is None:
            return size < self.pos and self.header is not None
        at, head = self._last
        return size < at + len(head) or os.pread(self._fd, len(head), at) != head  # type: ignore[arg-type]

    def _read_header(self, size: int, out: Poll) -> bool:
        head = os.pread(self._fd, ifhd.HEADER_SIZE, 0)  # type: ignore[arg-type]
        if len(head) >= 4 and head[:4] != ifhd.MAGIC and any(head[:4]):
            raise HeaderError(
                f"not an ADTF recording: starts with {head[:4]!r}, expected {ifhd.MAGIC!r}",
                path=self.path,
                offset=0,
            )
        if len(head) < ifhd.HEADER_SIZE or not any(head[:4]):
            if not any(head[:4]) and size > ifhd.HEADER_SIZE and self.catalog is not None:
                self.header = _blank_header(self.catalog.version)  # header written at close
                out.notices.append(
                    f"{self.path}: header not written yet; version 0x{self.catalog.version:04x} "
                    "taken from the catalog"
                )
                return True
            return False
        self.header = ifhd.parse_header(head, self.path)
        self.pos = self.header.data_offset
        if self.catalog is not None and (self.catalog.version >= 0x0400) != (
            self.header.version >= 0x0400
        ):
            out.notices.append(
                f"catalog {self.catalog.path} and {self.path} are of different ADTF "
                "generations (2 / 3): catalog not used"
            )
            self.catalog = None
        return True

    def _check_closed(self, size: int) -> None:
        h = self.header
        assert h is not None
        if self._data_end is not None:
            return
        head = os.pread(self._fd, ifhd.HEADER_SIZE, 0)  # type: ignore[arg-type]
        if len(head) < ifhd.HEADER_SIZE or head[:4] != ifhd.MAGIC:
            return
        try:
            final = ifhd.parse_header(head, self.path)
        except AdtfError:
            return
        table_end = final.extension_offset + ifhd.EXTENSION_ENTRY_SIZE * final.extension_count
        if final.extension_count and table_end <= size and final.data_size:
            self.header = final
            self._data_end = min(final.data_offset + final.data_size, size)

    # -- chunks ----------------------------------------------------------------------------

    def _plausible(self, block: bytes, at: int, base: int) -> tuple[int, ...] | None:
        """The chunk header at block[at:] if it could be the next chunk, else None."""
        t, _, otl, size, sid, flags, sidx = _CHUNK.unpack_from(block, at)
        if not ifhd.CHUNK_HEADER_SIZE <= size <= MAX_CHUNK or not 0 < sid <= ifhd.MAX_STREAM_ID:
            return None
        if flags > 0x1F or t < self._last_time:
            return None
        if self._last is not None and otl != base + at - self._last[0]:
            return None
        return t, otl, size, sid, flags, sidx

    def _walk(self, block: bytes, base: int, end: int, out: Poll) -> int:
        """Hand out the complete chunks of `block` (file offset `base`); bytes consumed.

        The common chunk (an ADTF 3 sample of a described stream, header and envelope
        plausible, no info block or substream id) is read with one unpack and becomes its
        Sample in this loop, as the reader's fast path does; any other goes through
        `_plausible`, `_resync` and `_chunk`. The last chunk's header bytes (`_last`, for
        the next poll's rewrite check) are copied once per walk, not per chunk."""
        at, n = 0, len(block)
        view = memoryview(block)
        assert self.header is not None
        unit = self.header.time_unit_ns
        fast, new, streams, samples = _FAST.unpack_from, tuple.__new__, self.streams, out.samples
        prev = -1  # block offset of the last chunk handed out by this walk, -1: none yet

        def settle() -> None:  # `_last` as the general path and the next poll read it
            if prev >= 0:
                self._last = (base + prev, bytes(block[prev : prev + ifhd.CHUNK_HEADER_SIZE]))

        while at + ifhd.CHUNK_HEADER_SIZE <= n:
            if at + _FAST.size <= n:
                t, _, otl, size, sid, flags, sidx, stime, sflags, bsize = fast(block, at)
                stream = streams.get(sid)
                if (
                    stream is not None
                    and stream.kind == KIND_ADTF3
                    and not flags & ~_DATA_FLAGS
                    and not sflags & _ENVELOPE_EXTRAS
                    and _FAST.size + bsize <= size <= n - at
                    and t >= self._last_time
                    and otl == base + at - (base + prev if prev >= 0 else self._last_at())
                ):
                    raw = view[at + _FAST.size : at + _FAST.size + bsize]
                    if stream.serializer not in NS_SERIALIZERS:
                        stime *= 1000
                    samples.append(
                        new(
                            Sample,
                            (sid, t * unit, stime, raw, raw, sflags, 0, sidx, base + at, None),
                        )
                    )
                    self._last_time = t
                    prev = at
                    at += (size + 15) & ~15
                    out.chunks += 1
                    out.bytes += size
                    continue
            settle()
            prev = -1
            head = self._plausible(block, at, base)
            if head is None:
                skip = self._resync(block, at, base, end, out)
                if skip == 0:
                    return at
                at += skip
                continue
            t, _, size, sid, flags, sidx = head
            if at + size > n:
                if base + at + size <= end and at == 0:  # a chunk bigger than a block
                    return self._big_chunk(base, size, end, out)
                return at
            self._chunk(view, at, base, t, size, sid, flags, sidx, out)
            self._last_time = t
            prev = at
            at += (size + 15) & ~15
            out.chunks += 1
            out.bytes += size
        settle()
        return at  # may pass the block's end by the last chunk's padding

    def _last_at(self) -> int:
        """File offset of the last chunk handed out; -1 (no offset_to_last matches it)
        before the first one or after a resync, where `_plausible` checks no link."""
        return self._last[0] if self._last is not None else -1

    def _big_chunk(self, base: int, size: int, end: int, out: Poll) -> int:
        block = os.pread(self._fd, size, base)  # type: ignore[arg-type]
        if len(block) < size:
            return 0
        return self._walk(block, base, end, out)

    def _resync(self, block: bytes, at: int, base: int, end: int, out: Poll) -> int:
        """Damage at block[at:]: bytes to skip to the next valid chain, or 0 to wait."""
        if self._data_end is not None and base + at >= self._data_end:
            return 0
        saved = self._last
        for cand in range(at + 16, len(block) - ifhd.CHUNK_HEADER_SIZE + 1, 16):
            self._last = None
            chain, pos = 0, cand
            while chain < RESYNC_CHAIN and pos + ifhd.CHUNK_HEADER_SIZE <= len(block):
                head = self._plausible(block, pos, base)
                if head is None or pos + head[2] > len(block):
                    break
                self._last = (base + pos, b"")
                chain += 1
                pos += (head[2] + 15) & ~15
            if chain == RESYNC_CHAIN:
                self._last = None
                reason = _damage_reason(block, at, saved, base, self._last_time)
                out.quarantine.append(Quarantined(base + at, cand - at, reason))
                return cand - at
        self._last = saved
        return 0

    def _chunk(
        self,
        view: memoryview,
        at: int,
        base: int,
        t: int,
        size: int,
        sid: int,
        flags: int,
        sidx: int,
        out: Poll,
    ) -> None:
        h = self.header
        assert h is not None
        unit = h.time_unit_ns
        offset = base + at
        if flags & ifhd.FLAG_TRIGGER:
            self.triggers += 1
            return
        if flags & ifhd.FLAG_TYPE:
            self._type_chunk(view, at, offset, size, sid, out)
            return
        stream = self.streams.get(sid) or self._describe(sid, None, offset, out)
        try:
            sample = _sample(view, at, offset, stream, t * unit, size, sidx, self.path)
        except SampleError as exc:
            out.quarantine.append(Quarantined(offset, size, f"{type(exc).__name__}: {exc.reason}"))
            return
        out.samples.append(sample)

    def _type_chunk(
        self, view: memoryview, at: int, offset: int, size: int, sid: int, out: Poll
    ) -> None:
        if sid in self.streams and sid not in self.provisional:
            self.type_changes.append((sid, offset))
            return
        try:
            text, _ = read_string(view, at + 32, at + size, path=self.path, base=offset - at)
            stype = parse_stream_type(text, path=self.path, offset=offset + 32)
        except AdtfError as exc:
            out.quarantine.append(Quarantined(offset, size, f"{type(exc).__name__}: {exc.reason}"))
            return
        if sid in self.streams:  # samples came before it under a provisional type
            self.type_changes.append((sid, offset))
            return
        self._describe(sid, stype, offset, out)

    def _describe(self, sid: int, stype, offset: int, out: Poll) -> Stream:
        """The stream's description: catalog name (and ADTF 2 type), inline ADTF 3 type."""
        h = self.header
        assert h is not None
        known = self.catalog.streams.get(sid) if self.catalog else None
        name = known.name if known is not None and known.name else f"{PROVISIONAL_PREFIX}{sid}"
        if h.version < 0x0400:
            if known is not None:
                stream = _copy(known)
            else:
                stream = _stream(sid, name, KIND_ADTF2, None, None)
        elif stype is not None:
            serializer = (known.serializer if known is not None else None) or _serializer(h.version)
            stream = _stream(sid, name, KIND_ADTF3, stype, serializer)
            issues = ifhd.Issues(strict=False)
            attach_ddl(stream, stype, path=self.path, offset=offset, issues=issues)
            out.notices += [str(e) for e in issues.items]
            if known is not None and known.stream_type != stype:
                out.notices.append(
                    f"stream {sid} ({name}): its type chunk differs from the catalog's type; "
                    "the type chunk is used"
                )
        elif known is not None:
            stream = _copy(known)
        else:  # neither type nor catalog yet: the sample times' unit is the version's
            stream = _stream(sid, name, KIND_ADTF3, None, _serializer(h.version))
        if name.startswith(PROVISIONAL_PREFIX) and (known is None or not known.name):
            self.provisional.add(sid)
            out.notices.append(
                f"stream {sid}: no name before the file closes (no catalog entry); published "
                f"as {name}" + ("" if stream.stream_type else " with its raw payload")
            )
        self.streams[sid] = stream
        out.new_streams.append(stream)
        return stream

    def _finish(self, out: Poll) -> None:
        """The file is closed: compare the stream catalog it ends with to what was used."""
        self.closed = out.closed = True
        sidecar = Path(self.path + ifhd.DDL_SIDECAR_SUFFIX)
        if self.header is not None and self.header.version < 0x0400 and self.catalog is not None:
            deadline = time.monotonic() + SIDECAR_WAIT_S
            while not sidecar.is_file() and time.monotonic() < deadline:
                time.sleep(0.01)
            if not sidecar.is_file():
                out.notices.append(f"{sidecar} did not appear: the closed file has no DDL")
        try:
            with open_dat(self.path, strict=False) as f:
                final = {s.stream_id: s for s in f.streams}
                self.final = Catalog(self.path, f.version, final)
        except AdtfError as exc:
            out.notices.append(f"{self.path}: closed, but its catalog is unreadable: {exc}")
            return
        diffs = []
        for sid in sorted(set(final) | set(self.streams)):
            live, end = self.streams.get(sid), final.get(sid)
            for what, get in (
                ("name", lambda s: s.name),
                ("meta type", lambda s: s.meta_type),
                ("DDL struct", lambda s: s.ddl_struct),
            ):
                a = get(live) if live is not None else None
                b = get(end) if end is not None else None
                if a != b and not (what != "name" and live is None):
                    diffs.append(CatalogDifference(sid, what, a, b))
        self.differences = diffs


def _blank_header(version: int) -> ifhd.FileHeader:
    return ifhd.FileHeader(version, 0, 0, 0, ifhd.HEADER_SIZE, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, "")


def _serializer(version: int) -> str:
    """The serializer a stream of a file of this version is read with before its catalog
    is known: ADTF 3.5+ (0x0500) files store sample times in ns, older ones in us (a guess
    of us for a ns file made them overflow int64)."""
    return SERIALIZER_COPY_NS if version >= 0x0500 else SERIALIZER_COPY


def _stream(sid: int, name: str, kind: str, stype, serializer: str | None) -> Stream:
    return Stream(sid, name, 0, 0, 0, kind, stype, serializer)


def _copy(stream: Stream) -> Stream:
    from dataclasses import replace

    return replace(stream, item_count=0, first_time_ns=0, last_time_ns=0)


def _damage_reason(
    block: bytes, at: int, last: tuple[int, bytes] | None, base: int, last_time: int
) -> str:
    t, _, otl, size, sid, flags, _ = _CHUNK.unpack_from(block, at)
    if not ifhd.CHUNK_HEADER_SIZE <= size <= MAX_CHUNK:
        why = f"chunk size {size} outside {ifhd.CHUNK_HEADER_SIZE}..{MAX_CHUNK}"
    elif not 0 < sid <= ifhd.MAX_STREAM_ID:
        why = f"stream id {sid} outside 1..{ifhd.MAX_STREAM_ID}"
    elif flags > 0x1F:
        why = f"unknown chunk flags 0x{flags:x}"
    elif t < last_time:
        why = f"chunk time {t} before the previous chunk's {last_time}"
    else:
        why = f"offset_to_last {otl} does not lead back to the previous chunk"
    return f"damaged chunk header: {why}; skipped to the next valid chunk"


def _sample(
    view: memoryview,
    at: int,
    offset: int,
    stream: Stream,
    time_ns: int,
    size: int,
    sidx: int,
    path: str,
) -> Sample:
    """The chunk at view[at:] as the reader's Sample (offsets in the file)."""
    body, end = at + ifhd.CHUNK_HEADER_SIZE, at + size
    base = offset - at
    sid = stream.stream_id
    try:
        if stream.kind == KIND_ADTF3:
            stime, flags, start, stop, info_end, sub = adtf3_envelope(view, body, end, path=path)
            if stream.serializer not in NS_SERIALIZERS:
                stime *= 1000
            info = (KIND_ADTF3, view[stop:info_end]) if info_end > stop else None
        elif stream.kind == KIND_ADTF2:
            stime, flags, start, stop, info_end = adtf2_envelope(view, body, end, path=path)
            stime *= 1000
            info = (KIND_ADTF2, view[stop:info_end]) if info_end > stop else None
            sub = 0
            if stream.adtf2 is not None and stream.adtf2.sample_class == ADTF2_INDEXED_SAMPLE_CLASS:
                if stop - start < 4:
                    raise SampleError("indexed sample shorter than its id", path=path, offset=start)
                sub = int.from_bytes(view[start : start + 4], "little")
                start += 4
        else:
            raw = view[body:end]
            return Sample(sid, time_ns, time_ns, raw, raw, 0, 0, sidx, offset, None)
    except SampleError as exc:
        raise SampleError(exc.reason, path=path, offset=(exc.offset or at) + base) from None
    raw = view[start:stop]
    return Sample(sid, time_ns, stime, raw, raw, flags, sub, sidx, offset, info)


__all__ = [
    "KIND_RAW",
    "PROVISIONAL_PREFIX",
    "AdtfFollower",
    "Catalog",
    "CatalogDifference",
    "Poll",
    "Quarantined",
    "load_catalog",
]

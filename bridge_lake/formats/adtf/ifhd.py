"""The IFHD container: file header, extension table, index extensions and the chunk walk.

This layer knows nothing about ADTF sample envelopes or stream types; it turns bytes into
headers, extension payload slices and chunk positions in reading order (spec §2-§6). Every
size read from the file is checked against the buffer before it is used, so a lying field can
neither send us past the end nor make us allocate more than the file holds.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bridge_lake.formats.adtf.errors import (
    AdtfError,
    ChunkError,
    ExtensionError,
    HeaderError,
    StreamIndexError,
    TruncatedChunkError,
    TruncatedHeaderError,
)

MAGIC = b"IFHD"
HEADER_SIZE = 2048
EXTENSION_ENTRY_SIZE = 512
CHUNK_HEADER_SIZE = 32
STREAM_INFO_HEADER_SIZE = 256
INDEX0_ENTRY_SIZE = 44
MAX_STREAM_ID = 512
DDL_SIDECAR_SUFFIX = ".description"
"""ADTF 2's DDL sidecar is `<recording file name>` + this (e.g. `rec.dat.description`)."""

VERSIONS = (0x0200, 0x0201, 0x0300, 0x0301, 0x0400, 0x0500)
"""IFHD versions this reader understands (ADTF 1's 0x0100/0x0110 use another layout)."""
HISTORY_VERSIONS = (0x0300, 0x0301)

FLAG_KEY = 0x01
FLAG_TYPE = 0x08
FLAG_TRIGGER = 0x10

_HEADER_FIELDS = "4sIIIQQQQQQQBQBQQQ30s1912s"
_EXTENSION_FIELDS = "384sHHIIIQQ96s"
_CHUNK_FIELDS = "QIIIHHQ"
_STREAM_INFO_FIELDS = "QQQI228s"
_INDEX_ADD_FIELDS = "QI20s"


def _structs(fields: str) -> dict[str, struct.Struct]:
    return {"<": struct.Struct("<" + fields), ">": struct.Struct(">" + fields)}


HEADER_STRUCT = _structs(_HEADER_FIELDS)
EXTENSION_STRUCT = _structs(_EXTENSION_FIELDS)
CHUNK_STRUCT = _structs(_CHUNK_FIELDS)
STREAM_INFO_STRUCT = _structs(_STREAM_INFO_FIELDS)
INDEX_ADD_STRUCT = _structs(_INDEX_ADD_FIELDS)


def index0_dtype(endian: str) -> np.dtype:
    """The 44-byte master index entry as a packed numpy record (spec §4.2)."""
    return np.dtype(
        [
            ("time_stamp", endian + "u8"),
            ("size", endian + "u4"),
            ("stream_id", endian + "u2"),
            ("flags", endian + "u2"),
            ("chunk_offset", endian + "u8"),
            ("chunk_index", endian + "u8"),
            ("stream_index", endian + "u8"),
            ("ref_stream_table_index", endian + "u4"),
        ]
    )


def cstr(raw: bytes) -> str:
    """A fixed NUL-padded field as text (Latin-1, so no byte can fail to decode)."""
    return raw.split(b"\0", 1)[0].decode("latin-1")


@dataclass(frozen=True)
class FileHeader:
    version: int
    flags: int
    extension_count: int
    extension_offset: int
    data_offset: int
    data_size: int
    chunk_count: int
    max_chunk_size: int
    duration: int
    file_time: int
    byte_order: int
    time_offset: int
    patch_number: int
    first_chunk_offset: int
    continuous_offset: int
    ring_buffer_end_offset: int
    description: str

    @property
    def endian(self) -> str:
        return "<" if self.byte_order == 1 else ">"

    @property
    def time_unit_ns(self) -> int:
        """Nanoseconds per chunk-time tick: 0x0500 counts ns, every older version µs."""
        return 1 if self.version >= 0x0500 else 1000


def parse_header(buf: memoryview | bytes, path: str) -> FileHeader:
    """Read and validate the 2048-byte header in the order the spec recommends (§2)."""
    if len(buf) < HEADER_SIZE:
        raise TruncatedHeaderError(
            f"file has {len(buf)} bytes, the IFHD header alone needs {HEADER_SIZE}",
            path=path,
            offset=len(buf),
        )
    if bytes(buf[0:4]) != MAGIC:
        raise HeaderError(f"bad magic {bytes(buf[0:4])!r}, expected {MAGIC!r}", path=path, offset=0)
    byte_order = buf[72]
    if byte_order not in (1, 2):
        raise HeaderError(f"byte order byte is {byte_order}, expected 1 or 2", path=path, offset=72)
    f = HEADER_STRUCT["<" if byte_order == 1 else ">"].unpack_from(buf, 0)
    if f[1] not in VERSIONS:
        raise HeaderError(f"unknown IFHD version 0x{f[1]:04x}", path=path, offset=4)
    return FileHeader(
        version=f[1],
        flags=f[2],
        extension_count=f[3],
        extension_offset=f[4],
        data_offset=f[5],
        data_size=f[6],
        chunk_count=f[7],
        max_chunk_size=f[8],
        duration=f[9],
        file_time=f[10],
        byte_order=f[11],
        time_offset=f[12],
        patch_number=f[13],
        first_chunk_offset=f[14],
        continuous_offset=f[15],
        ring_buffer_end_offset=f[16],
        description=cstr(f[18]),
    )


@dataclass(frozen=True)
class Extension:
    identifier: str
    stream_id: int
    user_id: int
    type_id: int
    version_id: int
    data_pos: int
    data_size: int
    table_offset: int
    """Where this entry sits in the extension table (for error messages)."""


def parse_extensions(buf: memoryview | bytes, header: FileHeader, path: str) -> list[Extension]:
    """Read the extension table and check that every payload lies inside the file (§3)."""
    size = len(buf)
    table_end = header.extension_offset + EXTENSION_ENTRY_SIZE * header.extension_count
    if header.extension_offset < HEADER_SIZE and header.extension_count:
        raise ExtensionError(
            f"extension table at {header.extension_offset} overlaps the header",
            path=path,
            offset=16,
        )
    if table_end > size:
        raise ExtensionError(
            f"extension table ({header.extension_count} entries at {header.extension_offset}) "
            f"ends at {table_end}, past the end of the file ({size} bytes)",
            path=path,
            offset=header.extension_offset,
        )
    unpack = EXTENSION_STRUCT[header.endian].unpack_from
    out = []
    for i in range(header.extension_count):
        at = header.extension_offset + i * EXTENSION_ENTRY_SIZE
        ident, sid, _, uid, tid, vid, pos, dsize, _ = unpack(buf, at)
        if dsize and pos + dsize > size:
            raise ExtensionError(
                f"extension {cstr(ident)!r} payload {pos}+{dsize} runs past the end "
                f"of the file ({size} bytes)",
                path=path,
                offset=at + 400,
            )
        out.append(Extension(cstr(ident), sid, uid, tid, vid, pos, dsize, at))
    return out


@dataclass(frozen=True)
class StreamInfo:
    """The 256-byte head of an `index<N>` payload plus the slices that follow it (§4.1)."""

    stream_id: int
    name: str
    item_count: int
    first_time: int
    last_time: int
    info_data: memoryview
    ref_count: int
    data_pos: int


def parse_stream_info(buf: memoryview, ext: Extension, endian: str, path: str) -> StreamInfo:
    if ext.data_size < STREAM_INFO_HEADER_SIZE:
        raise StreamIndexError(
            f"{ext.identifier}: payload of {ext.data_size} bytes is shorter than the "
            f"{STREAM_INFO_HEADER_SIZE}-byte stream info header",
            path=path,
            offset=ext.data_pos,
        )
    count, first, last, info_size, name = STREAM_INFO_STRUCT[endian].unpack_from(buf, ext.data_pos)
    room = ext.data_size - STREAM_INFO_HEADER_SIZE
    if info_size > room:
        raise StreamIndexError(
            f"{ext.identifier}: info_data_size {info_size} exceeds the {room} bytes left "
            "in the extension",
            path=path,
            offset=ext.data_pos + 24,
        )
    start = ext.data_pos + STREAM_INFO_HEADER_SIZE
    return StreamInfo(
        stream_id=ext.stream_id,
        name=cstr(name),
        item_count=count,
        first_time=first,
        last_time=last,
        info_data=buf[start : start + info_size],
        ref_count=(room - info_size) // 4,
        data_pos=ext.data_pos,
    )


@dataclass(frozen=True)
class IndexAdd:
    """`index_add<N>`: how much of a history file's stream the ring buffer overwrote (§4.3)."""

    stream_index_offset: int
    stream_table_index_offset: int


def parse_index_add(buf: memoryview, ext: Extension, endian: str, path: str) -> IndexAdd:
    if ext.data_size < 12:
        raise StreamIndexError(
            f"{ext.identifier}: {ext.data_size} bytes, expected 32",
            path=path,
            offset=ext.data_pos,
        )
    sio, stio = struct.unpack_from(endian + "QI", buf, ext.data_pos)
    return IndexAdd(sio, stio)


def parse_index0(buf: memoryview, ext: Extension, endian: str, path: str) -> np.ndarray:
    """The master index as a zero-copy structured array over the mapped file."""
    if ext.data_size % INDEX0_ENTRY_SIZE:
        raise StreamIndexError(
            f"index0 size {ext.data_size} is not a multiple of {INDEX0_ENTRY_SIZE}",
            path=path,
            offset=ext.table_offset + 408,
        )
    n = ext.data_size // INDEX0_ENTRY_SIZE
    return np.frombuffer(buf, dtype=index0_dtype(endian), count=n, offset=ext.data_pos if n else 0)


class Issues:
    """Collects format problems; in strict mode the first one is raised instead.

    Recovery (reading on past damage) is opt-in because silently dropping data is worse than
    failing; but when asked, we keep every complete chunk and say exactly what was lost.
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.items: list[AdtfError] = []

    def report(self, error: AdtfError) -> None:
        if self.strict:
            raise error
        self.items.append(error)


RELEASE_WINDOW = 16 << 20
"""Bytes a sequential pass reads before handing the pages behind it back to the kernel."""


class PageReleaser:
    """Drops already-read pages from the process (MADV_DONTNEED) every `RELEASE_WINDOW` bytes,
    so one pass over a 20 GB file keeps a bounded resident set instead of mapping it all in.

    Safe for the read-only shared file mapping the reader uses: a sample view that is touched
    again re-faults the same bytes from the page cache. Call it when `pos >= mark`; it
    returns the next mark."""

    def __init__(self, mm: mmap.mmap | None, start: int) -> None:
        usable = mm is not None and hasattr(mmap, "MADV_DONTNEED")
        self.mm = mm if usable else None
        self.done = start - start % mmap.PAGESIZE
        self.first_mark = start + RELEASE_WINDOW if usable else 1 << 64

    def __call__(self, pos: int) -> int:
        upto = pos - pos % mmap.PAGESIZE
        if self.mm is not None and upto > self.done:
            self.mm.madvise(mmap.MADV_DONTNEED, self.done, upto - self.done)
            self.done = upto
        return pos + RELEASE_WINDOW


def _columns(rows: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return a[:, 0], a[:, 1], a[:, 2].astype(np.uint32)


def join_columns(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """Column-wise concatenation of batches of equally long column tuples."""
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def _stride(size: int) -> int:
    return (size + 15) & ~15


SCAN_WINDOW = 1 << 20
"""Bytes of the data area a vectorized chunk scan looks at in one go: small enough that its
temporaries stay in the CPU cache (and below malloc's mmap threshold), measured fastest."""
BIG_CHUNK = 16 << 10
"""A chunk at least this big is stepped over in Python instead of being scanned."""
POSITION_BATCH = 1 << 16
"""Chunks `ChunkWalker.chunk_batches` collects before it hands out a batch."""


class ChunkWalker:
    """Yields chunk headers in reading order: sequential, or ring order for history files.

    Yields `(offset, time_stamp, offset_to_last, size, stream_id, flags, stream_index)`.
    Damage ends the walk after the last complete chunk and is reported through `issues`.
    """

    def __init__(
        self,
        buf: memoryview,
        header: FileHeader,
        path: str,
        issues: Issues,
        file_size: int,
        *,
        salvage: bool = False,
        mm: mmap.mmap | None = None,
    ) -> None:
        self.buf = buf
        self.release = PageReleaser(mm, header.data_offset)
        self.header = header
        self.path = path
        self.issues = issues
        self.salvage = salvage
        claimed = header.data_offset + header.data_size
        if salvage and (header.data_size == 0 or claimed > file_size):
            claimed = file_size + 1  # a crashed writer's header: walk to the end of the file
        self.data_end = min(claimed, file_size)
        self.clamped = claimed > file_size
        self.chunks_read = 0
        self.position = header.data_offset

    def __iter__(self) -> Iterator[tuple[int, int, int, int, int, int, int]]:
        h = self.header
        ring = (
            h.version in HISTORY_VERSIONS
            and h.first_chunk_offset != h.data_offset
            and h.data_offset <= h.first_chunk_offset < h.continuous_offset <= self.data_end
        )
        if h.version in HISTORY_VERSIONS and h.first_chunk_offset != h.data_offset and not ring:
            self.issues.report(
                ChunkError(
                    f"ring buffer offsets (first {h.first_chunk_offset}, continuous "
                    f"{h.continuous_offset}) lie outside the data area; reading sequentially",
                    path=self.path,
                    offset=82,
                )
            )
        if self.salvage:
            return self._salvage()
        return self._ring() if ring else self._sequential()

    def checked_chunk(self, pos: int, end: int) -> tuple[int, int, int, int, int, int, int] | None:
        """Unpack the chunk at pos, or report why it cannot be read and return None."""
        if pos + CHUNK_HEADER_SIZE > end:
            if self.clamped and end == self.data_end and pos < end:
                self.issues.report(
                    TruncatedChunkError(
                        f"file ends inside a chunk header; {end - pos} bytes lost, "
                        f"{self.chunks_read} of {self.header.chunk_count} chunks read",
                        path=self.path,
                        offset=pos,
                    )
                )
            return None
        t, _, otl, size, sid, flags, sidx = CHUNK_STRUCT[self.header.endian].unpack_from(
            self.buf, pos
        )
        if size < CHUNK_HEADER_SIZE:
            self.issues.report(
                ChunkError(
                    f"chunk size {size} is below the 32-byte header", path=self.path, offset=pos
                )
            )
            return None
        if pos + size > end:
            cls = TruncatedChunkError if self.clamped and end == self.data_end else ChunkError
            self.issues.report(
                cls(
                    f"chunk of {size} bytes runs past the end of the data area at {end}; "
                    f"{end - pos} bytes lost, {self.chunks_read} of "
                    f"{self.header.chunk_count} chunks read",
                    path=self.path,
                    offset=pos + 16,
                )
            )
            return None
        return pos, t, otl, size, sid, flags, sidx

    def _sequential(self) -> Iterator[tuple[int, int, int, int, int, int, int]]:
        pos = self.header.data_offset
        end = self.data_end
        count = self.header.chunk_count
        unpack = CHUNK_STRUCT[self.header.endian].unpack_from
        buf = self.buf
        n = 0
        release, mark = self.release, self.release.first_mark
        while n < count:
            if pos + CHUNK_HEADER_SIZE <= end:
                t, _, otl, size, sid, flags, sidx = unpack(buf, pos)
                if size >= CHUNK_HEADER_SIZE and pos + size <= end:
                    n += 1
                    self.chunks_read = n
                    yield pos, t, otl, size, sid, flags, sidx
                    pos += (size + 15) & ~15
                    if pos >= mark:
                        mark = release(pos)
                    continue
            self.chunks_read = n
            self.checked_chunk(pos, end)
            return
        self.chunks_read = n

    def chunk_batches(
        self, stream_ids=(), *, release: bool = True, select: int | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The chunks in reading order, in batches of numpy arrays: (offset int64, size,
        stream_id | flags << 16 uint32). The same chunks, the same stop and the same reported
        problems as iterating the walker, without a Python step per chunk for sequential
        little-endian files. With `select`, only the sample chunks (neither trigger nor
        stream type) of that stream id are handed out.

        How: the chain of chunks is found SCAN_WINDOW bytes at a time. Every 16-byte slot of
        the window is a candidate header; the plausible ones (a stream id of `stream_ids`,
        flags up to 0x1F, a size up to the header's max_chunk_size) are the guess, which is
        then verified link by link with numpy: starting from the known first chunk, a run of
        guesses where each one's stride leads to the next is exact. Where the verification
        breaks (a payload that looks like a header, a chunk of an unlisted stream), the true
        next chunk is taken from the last verified one, so the result is exactly the
        sequential walk whatever the payloads hold. Chunks of BIG_CHUNK bytes or more at a
        window start are stepped over without scanning their bodies.

        `self.position` is where the walk is (for a consumer that releases pages itself: it
        passes release=False, as it still reads payloads of a batch). A batch, maybe empty,
        comes at least every RELEASE_WINDOW bytes of file."""
        h = self.header
        ring = h.version in HISTORY_VERSIONS and h.first_chunk_offset != h.data_offset
        if self.salvage or ring or h.endian != "<":
            yield from self._python_batches(select)
            return
        known = np.zeros(0x20 << 16, dtype=bool)  # by stream id | flags << 16
        sids = np.array([sid for sid in stream_ids if 0 < sid < 1 << 16], dtype=np.int64)
        known[(sids[:, None] | (np.arange(0x20, dtype=np.int64) << 16)).reshape(-1)] = True
        known[-1] = False  # what any bigger value is clipped to
        buf, end, count = self.buf, self.data_end, h.chunk_count
        pos, n, stopped = h.data_offset, 0, False
        head_at = struct.Struct("<IHH").unpack_from
        pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        big: list[tuple[int, int, int]] = []
        waiting, handed = 0, pos
        mark = self.release.first_mark if release else 1 << 64
        self.position = pos
        while n < count and pos + CHUNK_HEADER_SIZE <= end and not stopped:
            size, sid, flags = head_at(buf, pos + 16)
            if size >= BIG_CHUNK:
                if size > end - pos:
                    break
                if select is None or (sid == select and not flags & 0x18):
                    big.append((pos, size, sid | flags << 16))
                n += 1
                pos += (size + 15) & ~15
            else:
                if big:
                    pending.append(_columns(big))
                    big = []
                found, pos, stopped = self._scan(pos, min(pos + SCAN_WINDOW, end), known)
                found = tuple(a[: count - n] for a in found)
                n += len(found[0])
                if select is not None:
                    keep = (found[2] & np.uint32(0x18FFFF)) == select
                    found = tuple(a[keep] for a in found)
                pending.append(found)
                waiting += len(found[0])
            self.position = pos
            if waiting + len(big) >= POSITION_BATCH or pos - handed >= RELEASE_WINDOW:
                if big:
                    pending.append(_columns(big))
                    big = []
                self.chunks_read = n
                yield join_columns(pending) if pending else _columns([])
                pending, waiting, handed = [], 0, pos
            if pos >= mark:
                mark = self.release(pos)
        if big:
            pending.append(_columns(big))
        self.chunks_read = n
        if pending:
            yield join_columns(pending)
        if n < count:
            self.checked_chunk(pos, end)

    def _python_batches(
        self, select: int | None
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """`chunk_batches` by iterating the walker (ring order, salvage, big endian)."""
        found: list[tuple[int, int, int]] = []
        for pos, _, _, size, sid, flags, _ in self:
            self.position = pos
            if select is None or (sid == select and not flags & 0x18):
                found.append((pos, size, sid | flags << 16))
            if len(found) >= POSITION_BATCH:
                yield _columns(found)
                found = []
        if found:
            yield _columns(found)

    def _scan(
        self, start: int, stop: int, known: np.ndarray
    ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int, bool]:
        """The chunk chain from the chunk at `start` through the window [start, stop):
        (chunk columns, where the walk goes on, whether it stopped at an invalid header).
        `known[sid | flags << 16]` is True for the headers worth guessing."""
        end = self.data_end
        m = min((stop - start + 15) // 16, (end - start - CHUNK_HEADER_SIZE) // 16 + 1)
        words = np.frombuffer(self.buf, dtype="<u4", count=4 * m, offset=start + 16)
        words = words.reshape(m, 4)  # row i: size, stream id | flags << 16 of slot i
        sf = words[:, 1]
        cand = np.flatnonzero(known.take(sf, mode="clip"))  # (the last entry is False)
        sfc = sf[cand]
        size = words[:, 0][cand]
        # The guess only has to be good, not right: the header's max_chunk_size (exact in
        # every file we have) rules out most look-alikes; a real chunk it rules out is found
        # by the Python step below, and a size past the end is checked at the end.
        most = min(self.header.max_chunk_size, 0xFFFF_FFF0)
        if most < CHUNK_HEADER_SIZE:
            most = 0xFFFF_FFF0  # no usable hint; (larger sizes are stepped in Python)
        ok = (size - np.uint32(CHUNK_HEADER_SIZE)) <= np.uint32(most - CHUNK_HEADER_SIZE)
        if not ok.all():
            cand, sfc, size = cand[ok], sfc[ok], size[ok]
        nxt = cand + ((size + np.uint32(15)) >> np.uint32(4))  # no overflow: size <= most
        breaks = np.flatnonzero(nxt[:-1] != cand[1:])
        if len(breaks):  # look-alikes in payloads: keep only slots some candidate points at
            target = np.zeros(m + 1, dtype=bool)
            target[np.minimum(nxt, m)] = True
            target[0] = True
            keep = target[cand]
            cand, sfc, size, nxt = cand[keep], sfc[keep], size[keep], nxt[keep]
            breaks = np.flatnonzero(nxt[:-1] != cand[1:])
        size_at = struct.Struct("<I").unpack_from
        parts: list[tuple[int, int] | int] = []  # runs of `cand` (j, r) or single slots
        i = 0
        while i < m:
            j = int(np.searchsorted(cand, i))
            if j < len(cand) and cand[j] == i:  # a verified chunk: take its whole run
                b = int(np.searchsorted(breaks, j))
                r = int(breaks[b]) if b < len(breaks) else len(cand) - 1
                parts.append((j, r + 1))
                i = int(nxt[r])
                continue
            at = start + 16 * i  # not guessed (unlisted stream, odd flags): step in Python
            (csize,) = size_at(self.buf, at + 16)
            if not CHUNK_HEADER_SIZE <= csize <= end - at:
                break
            parts.append(i)
            i += (csize + 15) >> 4
        stopped = i < m  # the loop broke at an invalid header
        if len(parts) == 1 and isinstance(parts[0], tuple):  # the usual: one run
            j, r = parts[0]
            slots, sizes, sid_flags = cand[j:r], size[j:r], sfc[j:r]
        else:
            pieces = [cand[p[0] : p[1]] if isinstance(p, tuple) else [p] for p in parts]
            slots = np.concatenate(pieces).astype(np.int64) if pieces else np.zeros(0, np.int64)
            rows = words[slots]
            sizes, sid_flags = rows[:, 0], rows[:, 1]
        positions = slots * 16 + start
        # A chunk that runs past the data area stops the walk. Only the last one can: every
        # other chunk ends before its successor, whose header lies inside the data area.
        if len(positions) and int(positions[-1]) + int(sizes[-1]) > end:
            k = len(positions) - 1
            return (positions[:k], sizes[:k], sid_flags[:k]), int(positions[k]), True
        return (positions, sizes, sid_flags), start + 16 * i, stopped

    def _salvage(self) -> Iterator[tuple[int, int, int, int, int, int, int]]:
        """Walk without an index (extension table lost): ignore chunk_count, and stop at the
        first header that is not plausible (stream id outside 1..512, time going back)."""
        pos, prev_time, n = self.header.data_offset, 0, 0
        while pos < self.data_end:
            chunk = self.checked_chunk(pos, self.data_end)
            if chunk is None:
                break
            _, t, _, size, sid, _, _ = chunk
            if not 0 < sid <= MAX_STREAM_ID or t < prev_time:
                self.issues.report(
                    ChunkError(
                        f"implausible chunk header (stream {sid}, time {t}); salvage stops, "
                        f"{self.data_end - pos} bytes not read",
                        path=self.path,
                        offset=pos,
                    )
                )
                break
            n += 1
            self.chunks_read = n
            yield chunk
            prev_time = t
            pos += _stride(size)

    def _ring(self) -> Iterator[tuple[int, int, int, int, int, int, int]]:
        h = self.header
        ring_end = h.ring_buffer_end_offset if h.version == 0x0301 else h.first_chunk_offset
        pos, end, phase = h.first_chunk_offset, h.continuous_offset, 1
        prev_pos, prev_time = -1, -1
        n = 0
        while n < h.chunk_count:
            if phase == 1 and pos >= h.continuous_offset:
                pos, end, phase = h.data_offset, h.continuous_offset, 2
            elif phase == 2 and pos >= ring_end:
                pos, end, phase = h.continuous_offset, self.data_end, 3
            chunk = self.checked_chunk(pos, end) if pos < end else None
            if chunk is None:
                if phase == 3 or (phase == 1 and pos < h.continuous_offset):
                    break
                pos = end
                continue
            _, t, otl, size, sid, _, _ = chunk
            if (
                phase == 2
                and pos != h.data_offset
                and (pos - otl != prev_pos or t < prev_time or not 0 < sid <= MAX_STREAM_ID)
            ):
                pos, end, phase = h.continuous_offset, self.data_end, 3
                continue
            n += 1
            self.chunks_read = n
            yield chunk
            prev_pos, prev_time = pos, t
            pos += _stride(size)

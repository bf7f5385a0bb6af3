"""Rebuild a crashed ADTF recording: a copy whose header, index and extensions are rebuilt
from its chunks.

A recording cut short has its chunks but not what ADTF writes last: the extension table, the
master index and the stream descriptions (`index<N>`: name, type, serializer), and its header
states sizes the file no longer has (spec §1, §13). Recovery walks the chunks from
`data_offset` with the reader's salvage walk (stops at the first implausible or cut chunk),
copies every complete chunk's body byte for byte through `DatWriter.write_chunk`, and lets
the writer build a new header, master index and extensions.

Stream names and types come, per stream id, from the first of:
1. the file's own `index<N>` extensions, when its extension table survived;
2. a catalog: a finished recording of the same configuration (`catalog`; same stream ids),
   whose descriptions are copied as they are;
3. `names` given by the caller (e.g. the drive's stream catalog in the lake);
4. ADTF 3: the stream's first type chunk (its stream type XML; the serializer then follows
   the file version: sample copy, ns for 0x0500);
otherwise the stream is kept as `stream<N>` without a type (the report says so).

The pass reads the file once through a read-only mapping whose pages are released as it goes
(memory bounded, not proportional to the file). A file that never got its header (a writer
that reserves the 2048 bytes and writes them last leaves zeros) is recovered when a catalog
gives the version.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from bridge_lake.formats.adtf import ifhd
from bridge_lake.formats.adtf.errors import AdtfError, ExtensionError, HeaderError
from bridge_lake.formats.adtf.samples import SERIALIZER_COPY, SERIALIZER_COPY_NS, read_string
from bridge_lake.formats.adtf.writer import WRITABLE_VERSIONS, DatWriter

DESCRIPTION_CHARS = 1911
"""The header's description field holds 1912 bytes with its NUL (spec §2); a damaged
header's may fill all of them."""
INDEX = "index"
CATALOG = "catalog"
GIVEN = "names"
TYPE_CHUNK = "type chunk"
NONE = "none"


@dataclass
class StreamRecovery:
    stream_id: int
    name: str
    source: str
    """Where name and type came from: index | catalog | names | type chunk | none."""
    samples: int = 0
    triggers: int = 0
    types: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    expected: int | None = None
    """Chunks the file's own `index<N>` claims for the stream (an intact input), if known."""


@dataclass
class AdtfRecovery:
    path: str
    version: int
    file_size: int
    valid_end: int = 0
    """End of the last complete chunk."""
    chunks: int = 0
    header_chunk_count: int = 0
    indexed: bool = False
    """The input had its extension table (a finished file)."""
    problems: list[str] = field(default_factory=list)
    cut_offset: int | None = None
    """Where the first damage (cut chunk, implausible header) starts, if any."""
    streams: dict[int, StreamRecovery] = field(default_factory=dict)

    @property
    def lost_bytes(self) -> int:
        """Bytes after the last complete chunk of a file without index (a finished file's
        extensions are rebuilt, not lost)."""
        return 0 if self.indexed else max(0, self.file_size - self.valid_end)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "format": "adtf",
            "version": f"0x{self.version:04x}",
            "bytes": self.file_size,
            "indexed": self.indexed,
            "valid_end": self.valid_end,
            "cut_offset": self.cut_offset,
            "lost_bytes": self.lost_bytes,
            "chunks": self.chunks,
            "header_chunk_count": self.header_chunk_count,
            "problems": self.problems,
            "streams": {
                str(s.stream_id): {
                    "name": s.name,
                    "source": s.source,
                    "samples": s.samples,
                    "triggers": s.triggers,
                    "types": s.types,
                    "first_ns": s.first_ns,
                    "last_ns": s.last_ns,
                    "index_item_count": s.expected,
                }
                for s in sorted(self.streams.values(), key=lambda s: s.stream_id)
            },
        }


def _stream_infos(
    buf: memoryview, header: ifhd.FileHeader, path: str
) -> dict[int, tuple[str, bytes, int]]:
    """stream id -> (name, info data, item count) from a file's `index<N>` extensions."""
    out = {}
    for ext in ifhd.parse_extensions(buf, header, path):
        name = ext.identifier
        if name.startswith("index") and name[5:].isdigit() and int(name[5:]) > 0:
            info = ifhd.parse_stream_info(buf, ext, header.endian, path)
            out[info.stream_id] = (info.name, bytes(info.info_data), info.item_count)
    return out


class _Mapped:
    """A read-only mapping of a whole file (closed with the context)."""

    def __init__(self, path: str) -> None:
        self.fd = Path(path).open("rb")  # noqa: SIM115 - closed in __exit__
        self.size = os.fstat(self.fd.fileno()).st_size
        self.map = mmap.mmap(self.fd.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.view = memoryview(self.map) if self.map is not None else memoryview(b"")

    def __enter__(self) -> _Mapped:
        return self

    def __exit__(self, *exc: object) -> None:
        # views still held (an error's traceback keeps its frames' slices) keep the map
        # alive until they go; it closes with them, as DatFile.close does
        with contextlib.suppress(BufferError):
            self.view.release()
            if self.map is not None:
                self.map.close()
        self.fd.close()


def cut_problem(header: ifhd.FileHeader, size: int) -> str | None:
    """Why a recording whose header parsed is cut short, from the header and the file's
    `size` alone (None: it has what a finished recording ends with). A finished writer
    writes the header last, so a cut copy of a finished file keeps a header whose extension
    table lies past the new end; a crashed writer's header lists no extensions at all."""
    table_end = header.extension_offset + ifhd.EXTENSION_ENTRY_SIZE * header.extension_count
    if header.extension_count and table_end > size:
        return (
            f"cut short: its extension table ({header.extension_count} entries at offset "
            f"{header.extension_offset}) ends at {table_end}, past the end of the file "
            f"({size} bytes): no index, no stream names or types"
        )
    if header.extension_count == 0 and size > header.data_offset:
        return (
            f"cut short: the header lists no extension table though {size - header.data_offset}"
            " bytes of chunks follow it: no index, no stream names or types"
        )
    return None


def cut_short(path: str | os.PathLike[str]) -> bool:
    """Whether an ADTF file (IFHD magic, valid header) lacks what a finished recording ends
    with (`cut_problem`). Reads the header only."""
    with Path(path).open("rb") as f:
        head = f.read(ifhd.HEADER_SIZE)
        size = os.fstat(f.fileno()).st_size
    try:
        h = ifhd.parse_header(head, str(path))
    except HeaderError:
        return False
    return cut_problem(h, size) is not None


def chunk_stream_ids(path: str | os.PathLike[str]) -> set[int]:
    """The stream ids of a cut recording's complete chunks: one pass over the chunk headers
    (the salvage walk recovery uses), for picking a catalog that describes all of them."""
    with _Mapped(str(path)) as m:
        header = ifhd.parse_header(m.view, str(path))
        walker = ifhd.ChunkWalker(
            m.view, header, str(path), ifhd.Issues(strict=False), m.size, salvage=True, mm=m.map
        )
        return {sid for _, _, _, _, sid, _, _ in walker if 0 < sid <= ifhd.MAX_STREAM_ID}


def copy_catalog(src: BinaryIO, size: int, out: str | os.PathLike[str]) -> None:
    """Write `out`: a sparse stand-in for the finished recording `src` (`size` bytes) that
    holds only what `read_catalog` reads (the header, the extension table and the `index<N>`
    payloads, at their offsets), the chunks left as holes. A catalog on an object store then
    costs a few ranged reads, not a download of the recording."""
    head = src.read(ifhd.HEADER_SIZE)
    header = ifhd.parse_header(head, getattr(src, "name", str(out)))
    table_size = ifhd.EXTENSION_ENTRY_SIZE * header.extension_count
    with Path(out).open("wb") as f:
        f.truncate(size)
        f.write(head)
        src.seek(header.extension_offset)
        table = src.read(table_size)
        f.seek(header.extension_offset)
        f.write(table)
    with _Mapped(str(out)) as m:
        wanted = [
            (e.data_pos, e.data_size)
            for e in ifhd.parse_extensions(m.view, header, str(out))
            if e.identifier.startswith(INDEX) and e.data_size
        ]
    with Path(out).open("r+b") as f:
        for pos, n in wanted:
            src.seek(pos)
            f.seek(pos)
            f.write(src.read(n))


def read_catalog(
    path: str | os.PathLike[str],
) -> tuple[ifhd.FileHeader, dict[int, tuple[str, bytes, int]]]:
    """A finished recording's header and stream descriptions (stream id -> name, info data,
    item count): the catalog a recovery takes names and types from."""
    with _Mapped(str(path)) as m:
        header = ifhd.parse_header(m.view, str(path))
        return header, _stream_infos(m.view, header, str(path))


def _header(m: _Mapped, path: str, catalog: ifhd.FileHeader | None) -> ifhd.FileHeader:
    try:
        return ifhd.parse_header(m.view, path)
    except HeaderError:
        blank = len(m.view) > ifhd.HEADER_SIZE and not any(m.view[: ifhd.HEADER_SIZE])
        if not (blank and catalog is not None):
            raise
    # a header the writer never wrote: the catalog's, describing nothing yet
    return replace(
        catalog,
        extension_count=0,
        extension_offset=0,
        data_offset=ifhd.HEADER_SIZE,
        data_size=0,
        chunk_count=0,
        first_chunk_offset=ifhd.HEADER_SIZE,
        continuous_offset=ifhd.HEADER_SIZE,
        ring_buffer_end_offset=0,
    )


def recover_dat(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    catalog: str | os.PathLike[str] | None = None,
    names: dict[int, str] | None = None,
) -> AdtfRecovery:
    """Write `out`, a complete recording of every whole chunk of `src` (module docstring)."""
    path = str(src)
    if Path(out).resolve() == Path(src).resolve():
        raise ValueError(f"{out}: recover never writes over its input")
    cat_header, cat_infos = read_catalog(catalog) if catalog is not None else (None, {})
    with _Mapped(path) as m:
        header = _header(m, path, cat_header)
        report = AdtfRecovery(
            path, header.version, m.size, header.data_offset, header_chunk_count=header.chunk_count
        )
        issues = ifhd.Issues(strict=False)
        try:
            own = _stream_infos(m.view, header, path)
            report.indexed = header.extension_count > 0
        except ExtensionError as exc:
            own = {}
            report.problems.append(f"no index: {exc.reason}")
        if not report.indexed and not report.problems:
            report.problems.append("no index: the header lists no extensions")
        walker = ifhd.ChunkWalker(
            m.view, header, path, issues, m.size, salvage=not report.indexed, mm=m.map
        )
        version = (
            header.version if header.version in WRITABLE_VERSIONS else _writable(header.version)
        )
        writer = DatWriter(
            out,
            version=version,
            description=header.description[:DESCRIPTION_CHARS],
            file_time=header.file_time,
        )
        try:
            _copy(m.view, walker, writer, report, own, cat_infos, names or {})
        except BaseException:
            writer.close()
            Path(out).unlink(missing_ok=True)
            raise
        writer.close()
        for e in issues.items:
            report.problems.append(f"{type(e).__name__} at offset {e.offset}: {e.reason}")
            if report.cut_offset is None and e.offset is not None:
                report.cut_offset = e.offset
    _copy_sidecar(Path(src), Path(catalog) if catalog else None, Path(out))
    return report


def _writable(version: int) -> int:
    """ADTF 2 variants (beta, history) are written as 0x0201: the same envelopes."""
    return 0x0201 if version < 0x0400 else 0x0400


def _copy(
    buf: memoryview,
    walker: ifhd.ChunkWalker,
    writer: DatWriter,
    report: AdtfRecovery,
    own: dict[int, tuple[str, bytes, int]],
    catalog: dict[int, tuple[str, bytes, int]],
    names: dict[int, str],
) -> None:
    unit = walker.header.time_unit_ns
    streams = report.streams
    ns = walker.header.version >= 0x0500
    skipped: dict[str, list[int]] = {}  # why -> offsets of the chunks not copied
    for sid in sorted(own):  # every stream of an intact index, those without chunks too
        if 0 < sid <= ifhd.MAX_STREAM_ID:
            streams[sid] = _declare(writer, sid, own, catalog, names)
    for pos, t, _, size, sid, flags, _ in walker:
        if not 0 < sid <= ifhd.MAX_STREAM_ID:
            skipped.setdefault(f"stream id outside 1..{ifhd.MAX_STREAM_ID}", []).append(pos)
            continue
        s = streams.get(sid)
        if s is None:
            s = streams[sid] = _declare(writer, sid, own, catalog, names)
        body = buf[pos + ifhd.CHUNK_HEADER_SIZE : pos + size]
        is_type = bool(flags & ifhd.FLAG_TYPE) and not flags & ifhd.FLAG_TRIGGER
        if is_type and s.source == NONE and walker.header.version >= 0x0400:
            _describe_from_type(writer, s, body, ns, walker.path, pos)
        try:
            writer.write_chunk(sid, t * unit, flags, body)
        except ValueError:  # an indexed file whose chunk times go back
            skipped.setdefault("its time goes back", []).append(pos)
            continue
        if flags & ifhd.FLAG_TRIGGER:
            s.triggers += 1
        elif is_type:
            s.types += 1
        else:
            s.samples += 1
        s.first_ns = t * unit if s.first_ns is None else s.first_ns
        s.last_ns = t * unit
        report.chunks += 1
        report.valid_end = pos + size
    for why, offsets in skipped.items():
        report.problems.append(
            f"{len(offsets)} chunks not copied: {why} (first at offset {offsets[0]})"
        )


def _declare(
    writer: DatWriter,
    sid: int,
    own: dict[int, tuple[str, bytes, int]],
    catalog: dict[int, tuple[str, bytes, int]],
    names: dict[int, str],
) -> StreamRecovery:
    for source, infos in ((INDEX, own), (CATALOG, catalog)):
        if sid in infos:
            name, info, count = infos[sid]
            if _described(writer, sid, name, info):
                return StreamRecovery(
                    sid, name, source, expected=count if source == INDEX else None
                )
    if sid in names and _described(writer, sid, names[sid], b""):
        return StreamRecovery(sid, names[sid], GIVEN)
    writer.describe_stream(sid, f"stream{sid}", b"")
    return StreamRecovery(sid, f"stream{sid}", NONE)


def _described(writer: DatWriter, sid: int, name: str, info: bytes) -> bool:
    """Describe the stream, unless its name does not fit the 228-byte Latin-1 field."""
    try:
        writer.describe_stream(sid, name, info)
    except (ValueError, UnicodeEncodeError):
        return False
    return True


def _describe_from_type(
    writer: DatWriter, s: StreamRecovery, body: memoryview, ns: bool, path: str, pos: int
) -> None:
    """An ADTF 3 stream without description: its type chunk's XML becomes its initial type."""
    try:
        xml, _ = read_string(body, 0, len(body), path=path, base=pos)
    except AdtfError:
        return
    serializer = SERIALIZER_COPY_NS if ns else SERIALIZER_COPY
    raw = [text.encode("utf-8") + b"\0" for text in (xml, serializer)]
    writer.describe_stream(
        s.stream_id, s.name, b"".join(struct.pack("<I", len(r)) + r for r in raw)
    )
    s.source = TYPE_CHUNK


def _copy_sidecar(src: Path, catalog: Path | None, out: Path) -> None:
    """ADTF 2 DDL sidecar (`<file>.description`): the input's, else the catalog's."""
    for base in (src, catalog):
        if base is None:
            continue
        side = Path(str(base) + ifhd.DDL_SIDECAR_SUFFIX)
        if side.is_file():
            shutil.copyfile(side, str(out) + ifhd.DDL_SIDECAR_SUFFIX)
            return

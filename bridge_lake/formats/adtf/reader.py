"""`open_dat`: the ADTF recording reader (every IFHD version from 0x0200 to 0x0500).

The file is memory-mapped; samples are handed out as `memoryview`s into the map, so reading a
20 GB file touches pages but never holds more than the current sample. Structure comes from
the extension table (stream names, types, counts); the chunk walk is the truth, and every
disagreement between the two is reported (strict mode raises, `strict=False` collects them in
`DatFile.issues` and keeps reading, e.g. to recover a recording cut off by a crash).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from bridge_lake.formats.adtf import ddl as ddl_mod
from bridge_lake.formats.adtf import ifhd
from bridge_lake.formats.adtf.ddl_convert import convert
from bridge_lake.formats.adtf.ddl_decode import decode, gather_records, read_scalars
from bridge_lake.formats.adtf.errors import (
    ChunkError,
    CountMismatchError,
    DDLError,
    ExtensionError,
    SampleError,
    StreamIndexError,
)
from bridge_lake.formats.adtf.model import (
    ITEM_SAMPLE,
    ITEM_STREAM_TYPE,
    ITEM_TRIGGER,
    KIND_ADTF2,
    KIND_ADTF3,
    KIND_RAW,
    Item,
    Sample,
    Stream,
    WalkReport,
)
from bridge_lake.formats.adtf.samples import (
    ADTF2_ENVELOPE,
    ADTF2_INDEXED_SAMPLE_CLASS,
    ADTF3_ENVELOPE,
    ADTF3_FLAG_INFO,
    ADTF3_FLAG_SUBSTREAM,
    MD_SERIALIZERS,
    NS_SERIALIZERS,
    Property,
    StreamType,
    adtf2_envelope,
    adtf3_envelope,
    parse_adtf2_info,
    parse_adtf3_info,
    parse_stream_type,
    read_string,
)

DECODE_BATCH = 1 << 20
"""Samples `DatFile.decode` decodes at once (bounds its memory besides the result)."""
DECODE_SPAN = 64 << 20
"""...or bytes of file one decode batch may span (a sparse stream in a big file)."""

DDL_UNUSABLE = "DDL not usable, samples kept as bytes"
"""How a stream whose DDL does not parse is reported (with its name and the DDLError): its
samples then land as payload bytes, and the export says so when it writes them."""


def _record(kind: str, endian: str) -> np.dtype:
    """Chunk header time + sample envelope, as read for every sample of a stream at once.
    The chunk header follows the file's byte order, ADTF envelopes are always little endian
    (spec §8)."""
    fields = {"time": (endian + "u8", 0)}
    size = ifhd.CHUNK_HEADER_SIZE
    if kind == KIND_ADTF3:
        fields.update(sample_time=("<i8", 32), flags=("<i4", 40), length=("<u8", 44))
        size += ADTF3_ENVELOPE.size
    elif kind == KIND_ADTF2:
        fields.update(length=("<u4", 33), sample_time=("<i8", 37))
        size += ADTF2_ENVELOPE.size
    return np.dtype(
        {
            "names": list(fields),
            "formats": [f for f, _ in fields.values()],
            "offsets": [o for _, o in fields.values()],
            "itemsize": size,
        }
    )


_FAST_HEAD = struct.Struct("<QIIIHHQqiQ")
"""Chunk header + ADTF 3 sample-copy envelope, read with one unpack on the hot path."""


class DatFile:
    """An open ADTF recording. Use `open_dat`; close it (or use `with`) to unmap the file."""

    def __init__(
        self, path: str | os.PathLike[str], *, strict: bool = True, description: str | None = None
    ) -> None:
        self.path = str(path)
        self.issues = ifhd.Issues(strict)
        self._fd = Path(self.path).open("rb")  # noqa: SIM115 - closed in close()
        try:
            self.size = os.fstat(self._fd.fileno()).st_size
            self._map: mmap.mmap | None = None
            if self.size:
                self._map = mmap.mmap(self._fd.fileno(), 0, access=mmap.ACCESS_READ)
                if hasattr(mmap, "MADV_SEQUENTIAL"):
                    self._map.madvise(mmap.MADV_SEQUENTIAL)
            self._buf = memoryview(self._map) if self._map is not None else memoryview(b"")
            self.header = ifhd.parse_header(self._buf, self.path)
            self.extensions: list[ifhd.Extension] = []
            self.streams: list[Stream] = []
            self._by_id: dict[int, Stream] = {}
            self.report = WalkReport()
            self._salvage = False
            self._load_index(description)
        except BaseException:
            self.close()
            raise

    # -- structure -----------------------------------------------------------------------

    @property
    def view(self) -> memoryview:
        """The whole mapped file, zero-copy (e.g. for `ddl.decode` with `sample_table`)."""
        return self._buf

    def release_pages(self) -> None:
        """Drop the file's pages from this process's resident set (MADV_DONTNEED on the
        read-only shared mapping; views touched again re-fault them from the page cache).

        A consumer that keeps samples beyond the reader's own walk (batches decoded later)
        calls it now and then, so its memory does not grow with the file."""
        if self._map is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)

    @property
    def version(self) -> int:
        return self.header.version

    @property
    def time_unit_ns(self) -> int:
        return self.header.time_unit_ns

    def _load_index(self, description: str | None) -> None:
        h = self.header
        try:
            self.extensions = ifhd.parse_extensions(self._buf, h, self.path)
        except ExtensionError as exc:
            self.issues.report(exc)
            self._salvage = True
            return
        adds: dict[int, ifhd.IndexAdd] = {}
        infos: list[ifhd.StreamInfo] = []
        for ext in self.extensions:
            name = ext.identifier
            try:
                if name.startswith("index_add") and name[9:].isdigit():
                    adds[int(name[9:])] = ifhd.parse_index_add(self._buf, ext, h.endian, self.path)
                elif name.startswith("index") and name[5:].isdigit() and int(name[5:]) > 0:
                    infos.append(ifhd.parse_stream_info(self._buf, ext, h.endian, self.path))
            except StreamIndexError as exc:
                self.issues.report(exc)  # that stream's chunks are then read as unknown
        sidecar = self._sidecar(description)
        for info in infos:
            try:
                stream = self._make_stream(info, sidecar)
            except StreamIndexError as exc:
                self.issues.report(exc)
                continue
            add = adds.get(info.stream_id)
            if add is not None:
                stream.stream_index_offset = add.stream_index_offset
            self.streams.append(stream)
            self._by_id[stream.stream_id] = stream
        self.streams.sort(key=lambda s: s.stream_id)

    def _sidecar(self, description: str | None) -> ddl_mod.DDL | None:
        """ADTF 2's `<file>.description` DDL (only consulted for versions < 0x0400)."""
        if self.version >= 0x0400:
            return None
        path = Path(description) if description else Path(self.path + ifhd.DDL_SIDECAR_SUFFIX)
        if not path.is_file():
            return None
        try:
            return ddl_mod.parse_ddl(path.read_bytes())
        except DDLError as exc:
            self.issues.report(DDLError(exc.reason, path=str(path), offset=0))
            return None

    def _make_stream(self, info: ifhd.StreamInfo, sidecar: ddl_mod.DDL | None) -> Stream:
        unit = self.time_unit_ns
        stream = Stream(
            stream_id=info.stream_id,
            name=info.name,
            item_count=info.item_count,
            first_time_ns=info.first_time * unit,
            last_time_ns=info.last_time * unit,
            kind=KIND_RAW,
            stream_type=None,
            index_offset=info.data_pos,
        )
        at = info.data_pos + ifhd.STREAM_INFO_HEADER_SIZE
        if not len(info.info_data):
            return stream
        if self.version < 0x0400:
            t = parse_adtf2_info(info.info_data, path=self.path, offset=at)
            stream.kind, stream.adtf2, stream.stream_type = KIND_ADTF2, t, t.stream_type()
            struct_name = sidecar.streams.get(info.name) if sidecar else None
            if struct_name and struct_name in sidecar.structs and (t.major, t.sub) == (0, 0):
                stream.ddl, stream.ddl_struct, stream.stored_layout = (
                    sidecar,
                    struct_name,
                    "serialized",
                )
                stream.stream_type.properties.update(
                    {
                        "md_struct": Property("cString", struct_name),
                        "md_data_serialized": Property("tBool", "false"),
                    }
                )
            return stream
        stype, serializer = parse_adtf3_info(info.info_data, path=self.path, offset=at)
        stream.kind, stream.stream_type, stream.serializer = KIND_ADTF3, stype, serializer
        self._attach_ddl(stream, stype, at)
        return stream

    def _attach_ddl(self, stream: Stream, stype: StreamType, at: int) -> None:
        attach_ddl(stream, stype, path=self.path, offset=at, issues=self.issues)

    def stream(self, key: int | str) -> Stream:
        """A stream by id or by name."""
        for s in self.streams:
            if key in (s.stream_id, s.name):
                return s
        raise KeyError(key)

    def extension(self, identifier: str) -> memoryview | None:
        """An extension's payload (zero-copy), or None if the file has no such extension."""
        for ext in self.extensions:
            if ext.identifier == identifier:
                return self._buf[ext.data_pos : ext.data_pos + ext.data_size]
        return None

    @property
    def referenced_files(self) -> list[Path]:
        """The other parts of a split recording (`referencedfiles`), resolved to paths."""
        payload = self.extension("referencedfiles")
        if not payload:
            return []
        names = [n for n in bytes(payload).split(b"\0") if n]
        here = Path(self.path).parent
        return [(here / n.decode("utf-8", "replace")).resolve() for n in names]

    def index0(self) -> np.ndarray:
        """The master index (sparse seek table) as a structured numpy array."""
        for ext in self.extensions:
            if ext.identifier == "index0":
                return ifhd.parse_index0(self._buf, ext, self.header.endian, self.path)
        return np.zeros(0, dtype=ifhd.index0_dtype(self.header.endian))

    # -- walking ---------------------------------------------------------------------------

    def _walker(self) -> ifhd.ChunkWalker:
        return ifhd.ChunkWalker(
            self._buf,
            self.header,
            self.path,
            self.issues,
            self.size,
            salvage=self._salvage,
            mm=self._map,
        )

    def _unknown_stream(self, sid: int, pos: int) -> Stream:
        """A stream met in the walk but absent from the index (recovery of a damaged file).

        Its envelope is guessed from the file version and validated per chunk."""
        stream = Stream(
            stream_id=sid,
            name="",
            item_count=0,
            first_time_ns=0,
            last_time_ns=0,
            kind=KIND_ADTF3 if self.version >= 0x0400 else KIND_ADTF2,
            stream_type=None,
            serializer=None,
        )
        if self.extensions:
            self.issues.report(
                CountMismatchError(
                    f"chunk of stream {sid}, which has no index", path=self.path, offset=pos
                )
            )
        self._by_id[sid] = stream
        self.streams.append(stream)
        self.streams.sort(key=lambda s: s.stream_id)
        return stream

    def _sample(self, stream: Stream, pos: int, t: int, size: int, sidx: int) -> Sample:
        buf = self._buf
        body, end = pos + ifhd.CHUNK_HEADER_SIZE, pos + size
        unit = self.time_unit_ns
        sid = stream.stream_id
        kind = stream.kind
        if kind == KIND_ADTF3:
            stime, flags, start, stop, info_end, substream = adtf3_envelope(
                buf, body, end, path=self.path
            )
            if stream.serializer not in NS_SERIALIZERS:
                stime *= 1000
            info = (KIND_ADTF3, buf[stop:info_end]) if info_end > stop else None
        elif kind == KIND_ADTF2:
            stime, flags, start, stop, info_end = adtf2_envelope(buf, body, end, path=self.path)
            stime *= 1000
            info = (KIND_ADTF2, buf[stop:info_end]) if info_end > stop else None
            substream = 0
            if stream.adtf2 is not None and stream.adtf2.sample_class == ADTF2_INDEXED_SAMPLE_CLASS:
                if stop - start < 4:
                    raise SampleError(
                        "indexed sample shorter than its id", path=self.path, offset=start
                    )
                substream = int.from_bytes(buf[start : start + 4], "little")
                start += 4
        else:
            return Sample(
                sid, t * unit, t * unit, buf[body:end], buf[body:end], 0, 0, sidx, pos, None
            )
        raw = buf[start:stop]
        data: memoryview | bytes = raw
        if stream.stored_layout is not None:
            try:
                data = convert(stream.ddl, stream.ddl_struct, raw, "serialized", "deserialized")
            except DDLError as exc:
                raise SampleError(
                    f"sample does not fit DDL struct {stream.ddl_struct}: {exc.reason}",
                    path=self.path,
                    offset=start,
                ) from None
        return Sample(sid, t * unit, stime, data, raw, flags, substream, sidx, pos, info)

    def chunk_headers(self) -> Iterator[tuple[int, int, int, int, int, int, int]]:
        """Raw chunk headers in reading order: (offset, time in file unit, offset_to_last,
        size, stream_id, flags, stream_index). No body is parsed: the cheapest full walk."""
        return iter(self._walker())

    def _checked_sample(self, pos: int, t: int, size: int, sid: int, sidx: int) -> Sample:
        """`_sample` for any stream; a bad envelope is reported, then read as raw payload."""
        stream = self._by_id.get(sid) or self._unknown_stream(sid, pos)
        sidx -= stream.stream_index_offset
        try:
            return self._sample(stream, pos, t, size, sidx)
        except SampleError as exc:
            if stream.index_offset is not None:
                self.issues.report(exc)
            return self._sample(_raw_view(stream), pos, t, size, sidx)

    def items(self) -> Iterator[Item]:
        """Every chunk in reading order (ring order for history files), classified.

        When the walk completes, counts are cross-checked against the header and the index.
        """
        walker = self._walker()
        report = WalkReport()
        current: dict[int, StreamType | None] = {s.stream_id: s.stream_type for s in self.streams}
        unit = self.time_unit_ns
        for pos, t, _, size, sid, flags, sidx in walker:
            stream = self._by_id.get(sid) or self._unknown_stream(sid, pos)
            sidx -= stream.stream_index_offset
            counts = report.per_stream.setdefault(sid, [0, 0, 0])
            if flags & ifhd.FLAG_TRIGGER:
                counts[1] += 1
                yield Item(ITEM_TRIGGER, sid, t * unit, sidx, pos, flags, current.get(sid))
            elif flags & ifhd.FLAG_TYPE:
                counts[2] += 1
                try:
                    text, _ = read_string(self._buf, pos + 32, pos + size, path=self.path)
                    stype = parse_stream_type(text, path=self.path, offset=pos + 32)
                except StreamIndexError as exc:
                    self.issues.report(exc)  # keep the type in effect, read on
                    stype = current.get(sid)
                current[sid] = stype
                yield Item(ITEM_STREAM_TYPE, sid, t * unit, sidx, pos, flags, stype)
            else:
                counts[0] += 1
                sample = self._checked_sample(pos, t, size, sid, sidx + stream.stream_index_offset)
                yield Item(ITEM_SAMPLE, sid, t * unit, sidx, pos, flags, current.get(sid), sample)
        report.chunks = walker.chunks_read
        self.report = report
        self._cross_check(walker, report)

    def samples(self) -> Iterator[Sample]:
        """Samples only, in reading order (time order for sequential and history files)."""
        h = self.header
        ring = h.version in ifhd.HISTORY_VERSIONS and h.first_chunk_offset != h.data_offset
        if self._salvage or ring or h.endian != "<":
            return (item.sample for item in self.items() if item.sample is not None)
        return self._sequential_samples()

    def _sequential_samples(self) -> Iterator[Sample]:
        """`samples()` for sequential little-endian files: one unpack covers the chunk header
        and the ADTF 3 envelope, and plain sample-copy streams skip every generic step (each
        bytecode here costs ~1 % of the read time). Anything unusual (damage, info blocks,
        substreams, ADTF 2 envelopes, DDL conversion) goes through `_checked_sample`."""
        walker = self._walker()
        buf, end, unit = self._buf, walker.data_end, self.time_unit_ns
        plans: list[list[int] | None] = [None] * 65536
        for st in self.streams:
            if st.kind == KIND_ADTF3 and st.stored_layout is None:
                ns = st.serializer in NS_SERIALIZERS
                plans[st.stream_id] = [1 if ns else 1000, st.stream_index_offset, 0]
        unpack = _FAST_HEAD.unpack_from
        head = ifhd.CHUNK_STRUCT["<"].unpack_from
        counts: dict[int, list[int]] = {}
        pos, n, count = self.header.data_offset, 0, self.header.chunk_count
        new = tuple.__new__
        release, mark = walker.release, walker.release.first_mark
        while n < count:
            if pos + 52 <= end:
                t, _, _, size, sid, flags, sidx, stime, sflags, bsize = unpack(buf, pos)
            elif pos + 32 <= end:
                t, _, _, size, sid, flags, sidx = head(buf, pos)
                stime, sflags, bsize = 0, 0, 1 << 64
            else:
                break
            if not 32 <= size <= end - pos:
                break
            n += 1
            plan = plans[sid]
            if flags & 0x18:
                c = counts.setdefault(sid, [0, 0, 0])
                c[1 if flags & ifhd.FLAG_TRIGGER else 2] += 1
            elif plan is not None and not sflags & 0x300 and bsize <= size - 52:
                plan[2] += 1
                raw = buf[pos + 52 : pos + 52 + bsize]
                yield new(
                    Sample,
                    (
                        sid,
                        t * unit,
                        stime * plan[0],
                        raw,
                        raw,
                        sflags,
                        0,
                        sidx - plan[1],
                        pos,
                        None,
                    ),
                )
            else:
                counts.setdefault(sid, [0, 0, 0])[0] += 1
                yield self._checked_sample(pos, t, size, sid, sidx)
            pos += (size + 15) & ~15
            if pos >= mark:
                mark = release(pos)
        walker.chunks_read = n
        if n < count:
            walker.checked_chunk(pos, end)
        for sid, plan in enumerate(plans):
            if plan is not None and plan[2]:
                counts.setdefault(sid, [0, 0, 0])[0] += plan[2]
        report = WalkReport(n, counts)
        self.report = report
        self._cross_check(walker, report)

    def _cross_check(self, walker: ifhd.ChunkWalker, report: WalkReport) -> None:
        if not self.extensions:
            return
        if walker.chunks_read != self.header.chunk_count:
            self.issues.report(
                CountMismatchError(
                    f"header says {self.header.chunk_count} chunks, the walk found "
                    f"{walker.chunks_read}",
                    path=self.path,
                    offset=40,
                )
            )
        for s in self.streams:
            found = sum(report.per_stream.get(s.stream_id, ()))
            if s.index_offset is not None and found != s.item_count:
                self.issues.report(
                    CountMismatchError(
                        f"stream {s.stream_id} ({s.name}): index says {s.item_count} items, "
                        f"the walk found {found}",
                        path=self.path,
                        offset=s.index_offset,
                    )
                )

    # -- vectorized access -----------------------------------------------------------------

    def sample_table(self, key: int | str) -> dict[str, np.ndarray]:
        """Per-sample arrays of one stream: chunk time, sample time, buffer offset and length,
        substream id. The chunks are located with numpy (`ChunkWalker.chunk_batches`),
        then the envelopes are read for all samples at once."""
        stream = self.stream(key)
        parts = list(self._sample_batches(stream))
        if not parts:
            return self._envelopes(stream, np.zeros(0, np.int64), np.zeros(0, np.int64))
        return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}

    def _sample_batches(
        self, stream: Stream, *, batch: int | None = None, span: int | None = None
    ) -> Iterator[dict[str, np.ndarray]]:
        """`sample_table` of one stream in pieces of about `batch` samples (or `span` bytes
        of file), for decoding in bounded memory. Pages before a yielded piece are released
        once the consumer asks for the next one."""
        batch = DECODE_BATCH if batch is None else batch
        span = DECODE_SPAN if span is None else span
        walker = self._walker()
        known = [s.stream_id for s in self.streams]
        sequential = walker.release.mm is not None
        pending: list[tuple[np.ndarray, np.ndarray]] = []
        waiting, first = 0, None
        chunks = walker.chunk_batches(known, release=False, select=stream.stream_id)
        for positions, sizes, _ in chunks:
            if len(positions):
                pending.append((positions, sizes))
                waiting += len(positions)
                first = int(pending[0][0][0]) if first is None else first
            if waiting >= batch or (first is not None and walker.position - first >= span):
                pos, size = ifhd.join_columns(pending)
                for a in range(0, len(pos), batch):
                    yield self._envelopes(stream, pos[a : a + batch], size[a : a + batch])
                pending, waiting, first = [], 0, None
            if sequential:  # nothing before the first pending sample is needed any more
                walker.release(first if first is not None else walker.position)
        if pending:
            pos, size = ifhd.join_columns(pending)
            for a in range(0, len(pos), batch):
                yield self._envelopes(stream, pos[a : a + batch], size[a : a + batch])

    def _envelopes(
        self, stream: Stream, pos: np.ndarray, size: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The sample envelopes of one stream's sample chunks at `pos` (chunk sizes `size`),
        read with one record gather per sample."""
        kind = stream.kind
        env = _record(kind, self.header.endian)
        short = size < env.itemsize
        if short.any():
            at = int(pos[int(np.flatnonzero(short)[0])])
            raise SampleError("sample envelope does not fit its chunk", path=self.path, offset=at)
        rec = gather_records(np.frombuffer(self._buf, dtype=np.uint8), pos, env)
        out = {"time_ns": self._ns(rec["time"], self.time_unit_ns, pos)}
        start = pos + env.itemsize
        sub = np.zeros(len(pos), dtype=np.int64)
        if kind == KIND_ADTF3:
            flags = rec["flags"]
            length = rec["length"].astype(np.int64)
            has_sub = (flags & ADTF3_FLAG_SUBSTREAM) != 0
            if has_sub.any():
                data = np.frombuffer(self._buf, dtype=np.uint8)
                le = {c: np.dtype("<" + c) for c in ("u4",)}
                at = start + length
                info = (flags & ADTF3_FLAG_INFO) != 0
                if info.any():
                    at = at + np.where(info, 5 + read_scalars(data, at + 1, le["u4"]), 0)
                sub[has_sub] = read_scalars(data, at[has_sub], le["u4"])
            ns = stream.serializer in NS_SERIALIZERS
            out["sample_time_ns"] = self._ns(rec["sample_time"], 1 if ns else 1000, pos)
        elif kind == KIND_ADTF2:
            length = rec["length"].astype(np.int64)
            out["sample_time_ns"] = self._ns(rec["sample_time"], 1000, pos)
        else:
            length = size - 32
            out["sample_time_ns"] = out["time_ns"]
        bad = (length < 0) | (start + length > pos + size)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise SampleError(
                "sample buffer runs past its chunk", path=self.path, offset=int(pos[first])
            )
        out.update(offset=start, length=length, substream_id=sub)
        return out

    def _ns(self, ticks: np.ndarray, unit: int, positions: np.ndarray) -> np.ndarray:
        """Ticks as int64 ns; a time that does not fit (a damaged field) is an error, not a
        silently wrapped number."""
        limit = np.iinfo(np.int64).max // unit
        bad = (ticks > limit) if ticks.dtype.kind == "u" else (np.abs(ticks) > limit)
        if bad.any():
            at = int(positions[int(np.flatnonzero(bad)[0])])
            raise ChunkError("time stamp out of the int64 ns range", path=self.path, offset=at)
        return ticks.astype(np.int64) * unit

    def decode(self, key: int | str, *, substream: int | None = None) -> pa.Table:
        """All samples of a DDL-described stream as an Arrow table, vectorized.

        Columns: `time_ns`, `sample_time_ns`, then one per struct element (nested structs as
        Arrow structs, arrays as (fixed-size) lists). For substream streams pass the id.
        The chunks are located with numpy and decoded in batches of about DECODE_BATCH
        samples, so the memory besides the result stays bounded for any file size.
        """
        stream = self.stream(key)
        ddl, struct_name, layout = stream.ddl, stream.ddl_struct, stream.stored_layout
        if substream is not None:
            subs = stream.stream_type.substreams() if stream.stream_type else {}
            match = [t for i, t in subs.values() if i == substream]
            if not match:
                raise KeyError(f"stream {stream.name} has no substream {substream}")
            props = match[0].properties
            if "md_struct" in props and "md_definitions" in props:
                ddl = ddl_mod.parse_ddl(props["md_definitions"].value)
                struct_name, layout = props["md_struct"].value, None
        if ddl is None or struct_name is None:
            raise DDLError(f"stream {stream.name!r} has no DDL description", path=self.path)
        data = np.frombuffer(self._buf, dtype=np.uint8)

        def one(table: dict[str, np.ndarray]) -> pa.Table:
            if substream is not None:
                keep = table["substream_id"] == substream
                table = {k: v[keep] for k, v in table.items()}
            decoded = decode(
                ddl,
                struct_name,
                data,
                table["offset"],
                table["length"],
                layout=layout or "deserialized",
                path=self.path,
            )
            times = {"time_ns": table["time_ns"], "sample_time_ns": table["sample_time_ns"]}
            head = pa.table(times)
            for name, column in zip(decoded.column_names, decoded.columns, strict=True):
                head = head.append_column(decoded.schema.field(name), column)
            return head

        tables = [one(table) for table in self._sample_batches(stream)]
        if not tables:
            none = np.zeros(0, dtype=np.int64)
            tables = [one(self._envelopes(stream, none, none))]
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Unmap and close. Views handed out keep the map alive until they are released."""
        self._buf = memoryview(b"")
        if getattr(self, "_map", None) is not None:
            # A caller still holding a sample view keeps the map alive; it closes with it.
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
        self._fd.close()

    def __enter__(self) -> DatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def attach_ddl(
    stream: Stream, stype: StreamType, *, path: str, offset: int, issues: ifhd.Issues
) -> None:
    """Give an ADTF 3 stream the DDL its type describes (`md_struct` in `md_definitions`);
    a DDL that does not parse is reported (the samples then stay bytes). Shared by the
    reader (types from the index) and the live follower (types from type chunks)."""
    struct_prop = stype.properties.get("md_struct")
    defs = stype.properties.get("md_definitions")
    if struct_prop is None or defs is None:
        return
    try:
        parsed = ddl_mod.parse_ddl(defs.value)
    except DDLError as exc:  # the stream's samples stay bytes (adtf_payloads)
        reason = f"stream {stream.name!r}: {DDL_UNUSABLE}: {exc.reason}"
        issues.report(DDLError(reason, path=path, offset=offset))
        return
    if struct_prop.value in parsed.structs:
        stream.ddl, stream.ddl_struct = parsed, struct_prop.value
        if stream.serializer in MD_SERIALIZERS:
            stream.stored_layout = "serialized"


def _raw_view(stream: Stream) -> Stream:
    """A copy of `stream` whose chunks are read as plain payload (after a bad envelope)."""
    return Stream(
        stream.stream_id, stream.name, stream.item_count, 0, 0, KIND_RAW, stream.stream_type
    )


def open_dat(
    path: str | os.PathLike[str], *, strict: bool = True, description: str | None = None
) -> DatFile:
    """Open an ADTF recording (.dat/.adtfdat, IFHD 0x0200...0x0500).

    strict=True raises the first format problem (a typed `AdtfError` naming file and offset);
    strict=False reads on past damage and lists the problems in `DatFile.issues`.
    `description` overrides the ADTF 2 DDL sidecar path (default `<path>.description`).
    """
    return DatFile(path, strict=strict, description=description)


def recording_parts(path: str | os.PathLike[str]) -> list[Path]:
    """All existing parts of a split recording, starting from any one of them, in time order.

    Follows `referencedfiles` transitively (a part lists its neighbours, maybe itself); parts
    that are named but missing are left out, so a partial copy still reads."""
    seen: dict[Path, int] = {}
    todo = [Path(path).resolve()]
    while todo:
        part = todo.pop()
        if part in seen or not part.is_file():
            continue
        with open_dat(part, strict=False) as f:
            firsts = [s.first_time_ns for s in f.streams if s.item_count]
            seen[part] = min(firsts) if firsts else 0
            todo.extend(f.referenced_files)
    return sorted(seen, key=lambda p: (seen[p], str(p)))


RECORDING_SUFFIXES = (".dat", ".adtfdat")
"""The names recorders usually give recordings. Only a hint (the manifest flags a file named
so that is not one): whether a file is a recording is decided by its content, `sniff`."""


def sniff(head: bytes | str | os.PathLike[str]) -> tuple[bool, int | None]:
    """(is an IFHD/ADTF file, its version) from the first 80 bytes, or a path to read them.

    The one rule for "is an ADTF recording": the IFHD magic, whatever the file is called
    (recorders name files freely). The raw manifest and the normalizer both decide by it.
    Cheap enough for a landing-zone scan: no mapping, no validation beyond magic, byte order
    and version field."""
    if not isinstance(head, bytes | bytearray | memoryview):
        with Path(head).open("rb") as fh:
            head = fh.read(80)
    head = bytes(head[:80])
    if len(head) < 8 or head[:4] != ifhd.MAGIC:
        return False, None
    order = head[72] if len(head) > 72 else 1
    version = int.from_bytes(head[4:8], "big" if order == 2 else "little")
    return True, version


__all__ = [
    "RECORDING_SUFFIXES",
    "DatFile",
    "Item",
    "Sample",
    "Stream",
    "open_dat",
    "recording_parts",
    "sniff",
]

"""Rewrite a damaged MCAP file as a valid, indexed one, in the same single pass as its scan.

Whole chunks are copied byte for byte (no recompression: recovery runs at the speed of
reading and decompressing) and followed by message indexes built from their records. The
whole records of a chunk cut by the end of the file become a new chunk in the compression
the cut one had; messages outside chunks are gathered into uncompressed chunks. The summary
(schemas, channels, statistics, chunk / attachment / metadata indexes, summary offsets) and
the footer are written from what the pass kept, with the mcap library's own record classes,
so every reader finds an index: `mcap.reader.make_reader(...).get_summary()` is not None.

The output of a recovery is itself an intact file, and recovering it again writes the same
bytes (the layout depends only on the records kept).
"""

from __future__ import annotations

import os
import struct
import zlib

from mcap.data_stream import RecordBuilder
from mcap.opcode import Opcode
from mcap.records import (
    Attachment,
    AttachmentIndex,
    Channel,
    Chunk,
    ChunkIndex,
    DataEnd,
    Footer,
    Header,
    MessageIndex,
    Metadata,
    MetadataIndex,
    Schema,
    Statistics,
    SummaryOffset,
)

from bridge_lake.formats.ros import compression as comp
from bridge_lake.formats.ros.damage import RecoveryFile, ScanReport, recover_with
from bridge_lake.formats.ros.files import MCAP_MAGIC
from bridge_lake.formats.ros.mcap_scan import (
    ChunkContent,
    McapScanner,
    record_bytes,
    walk_records,
)

LOOSE_CHUNK_BYTES = 4 << 20
"""Messages found outside chunks are gathered into chunks of about this size."""
LIBRARY = "bridge_lake recover"


class McapRecoveryWriter(RecoveryFile):
    """The `McapSink` that writes the recovered file (see the module docstring)."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        super().__init__(out, MCAP_MAGIC)
        self._header_written = False
        self.schemas: dict[int, Schema] = {}
        self.channels: dict[int, Channel] = {}
        self.chunk_indexes: list[ChunkIndex] = []
        self.attachment_indexes: list[AttachmentIndex] = []
        self.metadata_indexes: list[MetadataIndex] = []
        self.counts: dict[int, int] = {}
        self.first: int | None = None
        self.last: int | None = None
        self._loose = bytearray()

    # -- McapSink ----------------------------------------------------------------------------

    def header(self, raw: bytes) -> None:
        if not self._header_written:
            self._header_written = True
            self._write(raw)

    def _ensure_header(self) -> None:
        if not self._header_written:  # a file cut before its header record: a neutral one
            self.header(record_bytes(Header(profile="", library=LIBRARY)))

    def schema(self, schema: Schema, raw: bytes | None) -> None:
        self.schemas.setdefault(schema.id, schema)
        if raw is not None:
            self._flush_loose()
            self._ensure_header()
            self._write(raw)

    def channel(self, channel: Channel, raw: bytes | None) -> None:
        self.channels.setdefault(channel.id, channel)
        if raw is not None:
            self._flush_loose()
            self._ensure_header()
            self._write(raw)

    def chunk(
        self, head: bytes, body: memoryview, content: ChunkContent, compression: str, size: int
    ) -> None:
        """A whole chunk, copied as it is, then its message indexes."""
        self._flush_loose()
        self._ensure_header()
        start = self._write(head)
        self._write(body)
        (dlen,) = struct.unpack_from("<Q", body, 32 + len(compression.encode()))
        self._indexes(start, len(head) + len(body), content, compression, dlen, size)

    def records(self, data: bytes, content: ChunkContent, compression: str) -> None:
        """Whole records of a cut chunk (or loose messages): a new chunk of them."""
        self._flush_loose()
        self._ensure_header()
        packed = comp.compress(compression, data)
        chunk = Chunk(
            compression=compression,
            data=packed,
            message_start_time=content.start,
            message_end_time=content.end,
            uncompressed_crc=zlib.crc32(data),
            uncompressed_size=len(data),
        )
        raw = record_bytes(chunk)
        start = self._write(raw)
        self._indexes(start, len(raw), content, compression, len(packed), len(data))

    def loose_message(self, raw: bytes, channel_id: int, log_time: int) -> None:
        self._loose += raw
        if len(self._loose) >= LOOSE_CHUNK_BYTES:
            self._flush_loose()

    def _flush_loose(self) -> None:
        if not self._loose:
            return
        data, self._loose = bytes(self._loose), bytearray()
        content = ChunkContent()
        walk_records(data, content)
        self.records(data, content, "")

    def attachment(self, raw: bytes, a: Attachment) -> None:
        self._flush_loose()
        self._ensure_header()
        at = self._write(raw)
        self.attachment_indexes.append(
            AttachmentIndex(
                offset=at,
                length=len(raw),
                create_time=a.create_time,
                log_time=a.log_time,
                data_size=len(a.data),
                name=a.name,
                media_type=a.media_type,
            )
        )

    def metadata(self, raw: bytes, m: Metadata) -> None:
        self._flush_loose()
        self._ensure_header()
        at = self._write(raw)
        self.metadata_indexes.append(MetadataIndex(offset=at, length=len(raw), name=m.name))

    # -- indexes -----------------------------------------------------------------------------

    def _indexes(
        self,
        start: int,
        length: int,
        content: ChunkContent,
        compression: str,
        packed: int,
        size: int,
    ) -> None:
        offsets: dict[int, int] = {}
        index_start = self._pos
        builder = RecordBuilder()
        for cid, entries in content.index.items():
            offsets[cid] = index_start + builder.count
            MessageIndex(cid, entries).write(builder)
            self.counts[cid] = self.counts.get(cid, 0) + len(entries)
        self._write(builder.end())
        if content.index:
            self.first = content.start if self.first is None else min(self.first, content.start)
            self.last = content.end if self.last is None else max(self.last, content.end)
        self.chunk_indexes.append(
            ChunkIndex(
                message_start_time=content.start,
                message_end_time=content.end,
                chunk_start_offset=start,
                chunk_length=length,
                message_index_offsets=offsets,
                message_index_length=self._pos - index_start,
                compression=compression,
                compressed_size=packed,
                uncompressed_size=size,
            )
        )

    def finish(self) -> None:
        """Data end, summary, summary offsets, footer and closing magic (mcap's layout)."""
        self._flush_loose()
        self._ensure_header()
        self._write(record_bytes(DataEnd(0)))
        summary_start = self._pos
        builder = RecordBuilder()
        offsets: list[SummaryOffset] = []
        stats = Statistics(
            message_count=sum(self.counts.values()),
            schema_count=len(self.schemas),
            channel_count=len(self.channels),
            attachment_count=len(self.attachment_indexes),
            metadata_count=len(self.metadata_indexes),
            chunk_count=len(self.chunk_indexes),
            message_start_time=self.first or 0,
            message_end_time=self.last or 0,
            channel_message_counts=dict(sorted(self.counts.items())),
        )
        groups = (
            (Opcode.SCHEMA, [self.schemas[k] for k in sorted(self.schemas)]),
            (Opcode.CHANNEL, [self.channels[k] for k in sorted(self.channels)]),
            (Opcode.STATISTICS, [stats]),
            (Opcode.CHUNK_INDEX, self.chunk_indexes),
            (Opcode.ATTACHMENT_INDEX, self.attachment_indexes),
            (Opcode.METADATA_INDEX, self.metadata_indexes),
        )
        for opcode, records in groups:
            if not records:
                continue
            group_start = builder.count
            for record in records:
                record.write(builder)
            offsets.append(
                SummaryOffset(opcode, summary_start + group_start, builder.count - group_start)
            )
        offset_start = summary_start + builder.count
        for offset in offsets:
            offset.write(builder)
        summary = builder.end()
        crc = zlib.crc32(summary)
        crc = zlib.crc32(struct.pack("<BQQQ", Opcode.FOOTER, 20, summary_start, offset_start), crc)
        self._write(summary)
        self._write(record_bytes(Footer(summary_start, offset_start, crc)))
        self._write(MCAP_MAGIC)
        self._f.close()


def recover_mcap(src: str | os.PathLike[str], out: str | os.PathLike[str]) -> ScanReport:
    """Scan `src` and write everything whole of it to `out` as an indexed MCAP; the report
    says what was kept and dropped."""
    return recover_with(McapScanner, McapRecoveryWriter, src, out)


def scan_mcap(path: str | os.PathLike[str]) -> ScanReport:
    """The damage report of an MCAP file, without writing anything."""
    return McapScanner(path).scan()

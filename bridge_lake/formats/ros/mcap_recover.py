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

from mcap.data_stream import RecordBuilder
from mcap.records import (
    Attachment,
    AttachmentIndex,
    Channel,
    Chunk,
    ChunkIndex,
    DataEnd,
    Header,
    MessageIndex,
    Metadata,
    MetadataIndex,
    Schema,
)
from zlib_ng.zlib_ng import crc32

from bridge_lake.formats.ros import compression as comp
from bridge_lake.formats.ros.damage import RecoveryFile, ScanReport, recover_with
from bridge_lake.formats.ros.files import MCAP_MAGIC
from bridge_lake.formats.ros.mcap_scan import (
    ChunkContent,
    McapScanner,
    record_bytes,
    walk_records,
)
from bridge_lake.formats.ros.mcap_summary import summary_and_footer

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

    def _append(self, raw: bytes | memoryview) -> int:
        """Write a record after all that comes before it in file order: the loose messages
        gathered so far (as their chunk) and the header; returns its offset."""
        self._flush_loose()
        self._ensure_header()
        return self._write(raw)

    def schema(self, schema: Schema, raw: bytes | None) -> None:
        self.schemas.setdefault(schema.id, schema)
        if raw is not None:
            self._append(raw)

    def channel(self, channel: Channel, raw: bytes | None) -> None:
        self.channels.setdefault(channel.id, channel)
        if raw is not None:
            self._append(raw)

    def chunk(
        self, head: bytes, body: memoryview, content: ChunkContent, compression: str, size: int
    ) -> None:
        """A whole chunk, copied as it is, then its message indexes."""
        start = self._append(head)
        self._write(body)
        (dlen,) = struct.unpack_from("<Q", body, 32 + len(compression.encode()))
        self._indexes(start, len(head) + len(body), content, compression, dlen, size)

    def records(self, data: bytes, content: ChunkContent, compression: str) -> None:
        """Whole records of a cut chunk (or loose messages): a new chunk of them."""
        packed = comp.compress(compression, data)
        chunk = Chunk(
            compression=compression,
            data=packed,
            message_start_time=content.start,
            message_end_time=content.end,
            uncompressed_crc=crc32(data),
            uncompressed_size=len(data),
        )
        raw = record_bytes(chunk)
        start = self._append(raw)
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
        at = self._append(raw)
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
        at = self._append(raw)
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
        self._append(record_bytes(DataEnd(0)))
        self._write(
            summary_and_footer(
                self._pos,
                schemas=[self.schemas[k] for k in sorted(self.schemas)],
                channels=[self.channels[k] for k in sorted(self.channels)],
                chunk_indexes=self.chunk_indexes,
                attachment_indexes=self.attachment_indexes,
                metadata_indexes=self.metadata_indexes,
                message_count=sum(self.counts.values()),
                channel_message_counts=dict(sorted(self.counts.items())),
                message_start_time=self.first or 0,
                message_end_time=self.last or 0,
            )
        )
        self._write(MCAP_MAGIC)
        self._f.close()


def recover_mcap(src: str | os.PathLike[str], out: str | os.PathLike[str]) -> ScanReport:
    """Scan `src` and write everything whole of it to `out` as an indexed MCAP; the report
    says what was kept and dropped."""
    return recover_with(McapScanner, McapRecoveryWriter, src, out)


def scan_mcap(path: str | os.PathLike[str]) -> ScanReport:
    """The damage report of an MCAP file, without writing anything."""
    return McapScanner(path).scan()

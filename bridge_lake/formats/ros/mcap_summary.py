"""The end of an MCAP file after its data section: the summary, its offsets and the footer.

The export's writer (export/mcap_writer.py) and a recovery (mcap_recover.py) both end their
files this way, so the layout (https://mcap.dev/spec#summary-section) is stated here once:
every Schema and Channel, Statistics, then the ChunkIndex, AttachmentIndex and MetadataIndex
records; one SummaryOffset per non-empty group; the Footer, whose CRC covers the summary
and the footer up to its crc field. All records are serialized by the mcap library.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from mcap.data_stream import RecordBuilder
from mcap.opcode import Opcode
from mcap.records import (
    AttachmentIndex,
    Channel,
    ChunkIndex,
    Footer,
    McapRecord,
    MetadataIndex,
    Schema,
    Statistics,
    SummaryOffset,
)
from zlib_ng.zlib_ng import crc32

_FOOTER_HEAD = struct.Struct("<BQQQ")
"""The Footer record up to its crc field: opcode, length 20, summary and offsets start."""


def summary_and_footer(
    summary_start: int,
    *,
    schemas: Sequence[Schema],
    channels: Sequence[Channel],
    chunk_indexes: Sequence[ChunkIndex],
    attachment_indexes: Sequence[AttachmentIndex],
    metadata_indexes: Sequence[MetadataIndex],
    message_count: int,
    channel_message_counts: Mapping[int, int],
    message_start_time: int,
    message_end_time: int,
) -> bytes:
    """The summary section starting at file offset `summary_start`, its SummaryOffset
    records and the Footer (the closing magic is the caller's)."""
    statistics = Statistics(
        message_count=message_count,
        schema_count=len(schemas),
        channel_count=len(channels),
        attachment_count=len(attachment_indexes),
        metadata_count=len(metadata_indexes),
        chunk_count=len(chunk_indexes),
        message_start_time=message_start_time,
        message_end_time=message_end_time,
        channel_message_counts=dict(channel_message_counts),
    )
    groups: list[tuple[Opcode, Sequence[McapRecord]]] = [
        (Opcode.SCHEMA, schemas),
        (Opcode.CHANNEL, channels),
        (Opcode.STATISTICS, [statistics]),
        (Opcode.CHUNK_INDEX, chunk_indexes),
        (Opcode.ATTACHMENT_INDEX, attachment_indexes),
        (Opcode.METADATA_INDEX, metadata_indexes),
    ]
    builder = RecordBuilder()
    offsets: list[SummaryOffset] = []
    for opcode, records in groups:
        if not records:
            continue
        start = builder.count
        for record in records:
            record.write(builder)
        offsets.append(SummaryOffset(opcode, summary_start + start, builder.count - start))
    offsets_start = summary_start + builder.count
    for offset in offsets:
        offset.write(builder)
    summary = builder.end()
    head = _FOOTER_HEAD.pack(Opcode.FOOTER, 20, summary_start, offsets_start)
    crc = crc32(head, crc32(summary))
    footer = RecordBuilder()
    Footer(summary_start, offsets_start, crc).write(footer)
    return summary + footer.end()

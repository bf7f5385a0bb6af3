"""The reader's data model: streams, samples, items, walk statistics.

Samples and items are NamedTuples: a reader creates millions of them and tuple construction
is the cheapest object Python has; streams are plain dataclasses built once per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from bridge_lake.formats.adtf.ddl import DDL
from bridge_lake.formats.adtf.samples import (
    Adtf2Type,
    StreamType,
    adtf2_sample_infos,
    adtf3_sample_infos,
)

KIND_RAW = "raw"
KIND_ADTF2 = "adtf2"
KIND_ADTF3 = "adtf3"


@dataclass
class Stream:
    """One stream of the recording, as its `index<N>` extension describes it."""

    stream_id: int
    name: str
    item_count: int
    """Chunks of this stream per the index: samples + triggers + stream-type changes."""
    first_time_ns: int
    last_time_ns: int
    kind: str
    """'adtf2', 'adtf3', or 'raw' (plain IFHD: no stream info, chunk body = payload)."""
    stream_type: StreamType | None
    """The initial stream type (ADTF 2 media types are mapped the way the vendor maps them)."""
    serializer: str | None = None
    adtf2: Adtf2Type | None = None
    ddl: DDL | None = None
    ddl_struct: str | None = None
    """DDL struct that describes each sample buffer, if any."""
    stored_layout: str | None = None
    """'serialized' if the file stores DDL-serialized buffers that `data` converts."""
    stream_index_offset: int = 0
    """Items overwritten by a history ring buffer (index_add<N>)."""
    index_offset: int | None = None
    """File offset of the `index<N>` payload (None for streams found only by the walk)."""

    @property
    def meta_type(self) -> str | None:
        return self.stream_type.meta_type if self.stream_type else None


class Sample(NamedTuple):
    """One sample. `data` is what the vendor reader returns, `raw` what the file stores.

    A tuple, because a reader creates millions of them and tuple construction is the cheapest
    object Python has."""

    stream_id: int
    time_ns: int
    sample_time_ns: int
    data: memoryview | bytes
    raw: memoryview
    flags: int
    substream_id: int
    stream_index: int
    offset: int
    info: tuple[str, memoryview] | None
    """(envelope kind, raw info table) when the sample carries sample infos."""

    def sample_info(self) -> dict[int, object]:
        """The sample's info table (ADTF 2 sample infos / ADTF 3 info block), decoded."""
        if self.info is None:
            return {}
        kind, raw = self.info
        return (
            adtf2_sample_infos(bytes(raw)) if kind == KIND_ADTF2 else adtf3_sample_infos(bytes(raw))
        )


ITEM_SAMPLE = "sample"
ITEM_TRIGGER = "trigger"
ITEM_STREAM_TYPE = "stream_type"


class Item(NamedTuple):
    """A chunk in file order: a sample, a trigger or a stream-type change."""

    kind: str
    stream_id: int
    time_ns: int
    stream_index: int
    offset: int
    flags: int
    stream_type: StreamType | None
    """For a stream_type item the new type; otherwise the type in effect for this item."""
    sample: Sample | None = None


@dataclass
class WalkReport:
    """What the last complete walk found, for cross-checks and `info`."""

    chunks: int = 0
    per_stream: dict[int, list[int]] = field(default_factory=dict)
    """stream id -> [samples, triggers, types]."""

"""The live bridge's stand-in for the lake's `DriveSink`: the normalizer's rows, in memory.

The ADTF normalizer's jobs (`normalize.adtf.stream_job`) decode samples into exactly the
rows the lake would hold and hand them to a sink. Offline that sink writes Parquet; here
it keeps the rows of one poll until the publisher has turned them into messages
(`LiveSink.take`), and keeps the same accounting: records read, rows written and records
quarantined per stream, so the summary can show that nothing was lost.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from bridge_lake.lake.paths import MAX_NAME_LENGTH
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.normalize.sink import StreamInfo, conform


@dataclass
class LiveStream:
    info: StreamInfo
    read: int = 0
    written: int = 0
    quarantined: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    """quarantine reason -> count"""


@dataclass
class Written:
    stream: str
    table: str
    rows: pa.Table


class LiveSink:
    """Implements what the ADTF normalizer calls on a `DriveSink` (see module)."""

    def __init__(self) -> None:
        self.schemas: dict[str, pa.Schema] = {n: spec.schema for n, spec in NORMALIZED.items()}
        self.streams: dict[tuple[str, str], LiveStream] = {}
        self._written: list[Written] = []
        self._next_scan_id = 0

    def register_table(self, name: str, schema: pa.Schema) -> str:
        """A generic table; `name_<hash>` when the name is taken by another schema (as the
        lake's sink does)."""
        known = self.schemas.get(name)
        if known is not None and not known.equals(schema):
            digest = hashlib.sha256(str(schema).encode("utf-8")).hexdigest()[:6]
            name = f"{name[: MAX_NAME_LENGTH - 7]}_{digest}"
        self.schemas.setdefault(name, schema)
        return name

    def declare(self, info: StreamInfo) -> LiveStream:
        """A stream; declared again (the same name in a rewritten file) it keeps counting."""
        key = (info.stream, info.table)
        if key not in self.streams:
            self.streams[key] = LiveStream(info)
        return self.streams[key]

    def read(self, stream: str, table: str, n: int) -> None:
        self.streams[(stream, table)].read += int(n)

    def scan_ids(self, n: int) -> np.ndarray:
        ids = np.arange(self._next_scan_id, self._next_scan_id + n, dtype=np.int64)
        self._next_scan_id += n
        return ids

    def reordered(self, stream: str, table: str, n: int) -> None:
        """Samples moved to restore time order within a batch (kept in the rows' order)."""

    def write(self, stream: str, table: str, data: pa.RecordBatch | pa.Table) -> None:
        rows = conform(data, self.schemas[table], stream=stream)
        if rows.num_rows:
            self._written.append(Written(stream, table, rows))
            self.streams[(stream, table)].written += rows.num_rows

    def quarantine(
        self,
        stream: str,
        table: str,
        *,
        source_file: str,
        reasons: list[str],
        **_: object,
    ) -> None:
        """Records that could not be normalized: counted per reason (the offsets are in the
        reasons the follower reports; the normalizer's own give sample offsets offline)."""
        stats = self.streams[(stream, table)]
        for reason in reasons:
            stats.quarantined += 1
            stats.reasons[reason] = stats.reasons.get(reason, 0) + 1

    def take(self) -> list[Written]:
        """The rows written since the last call, in the order they were written."""
        out, self._written = self._written, []
        return out

    def ddl_catalog(self) -> dict[str, tuple[str | None, str | None]]:
        """stream -> (DDL struct, DDL text) of the generic streams met so far."""
        return {
            info.stream: (info.ddl_struct, info.ddl)
            for info in (s.info for s in self.streams.values())
            if info.ddl is not None
        }


__all__ = ["LiveSink", "LiveStream", "Written"]

"""What a scan of a bag or MCAP file found: its damage, what is readable, what is lost.

The record scanners (`mcap_scan`, `bag1_scan`) fill a `ScanReport` in one pass; `health`
turns it into its diagnosis of a damaged file and `recover` into its kept/dropped summary.
Damage is always stated where the valid data ends, never as a length read from the bytes
after that point: a scanner stops trusting the file at the first record that is not whole.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge_lake.errors import FormatError

CUT = "cut"
"""The file ends inside a record (a crash or an interrupted copy)."""
NO_INDEX = "no-index"
"""The summary / index section is missing or incomplete (the data itself may be whole)."""
CRC = "crc"
"""A chunk whose content does not match its CRC."""
CORRUPT = "corrupt"
"""A record that is whole but cannot be read (does not decompress, inner records broken)."""
INVALID = "invalid"
"""Bytes that are not a record at all where one must start: the end of the valid data."""


class RosFormatError(FormatError):
    """A file that is not a bag or MCAP at all (wrong magic, too short for its header)."""


@dataclass(frozen=True)
class Damage:
    kind: str
    """CUT | NO_INDEX | CRC | CORRUPT | INVALID"""
    offset: int
    """Where in the file the damaged record (or the invalid bytes) starts."""
    message: str
    chunk: int | None = None
    """0-based number of the chunk in file order, for chunk damage."""


@dataclass
class TopicCount:
    topic: str
    type: str
    kept: int = 0
    """Messages readable (and kept by a recovery)."""
    dropped: int = 0
    """Messages counted in damaged chunks that cannot be kept."""
    first_ns: int | None = None
    last_ns: int | None = None

    def add_times(self, first: int, last: int) -> None:
        self.first_ns = first if self.first_ns is None else min(self.first_ns, first)
        self.last_ns = last if self.last_ns is None else max(self.last_ns, last)


MessageIndex = dict[int, list[tuple[int, int]]]
"""connection (MCAP: channel) id -> [(time ns, offset of the message record in the chunk)],
in chunk order: what a recovery writes as the chunk's index."""


@dataclass
class ChunkMessages:
    """What a walk of one chunk's records found (bag1 and MCAP alike): the messages per
    connection, their time span and how far the records are whole."""

    index: MessageIndex = field(default_factory=lambda: defaultdict(list))
    start: int = 0
    end: int = 0
    """Earliest and latest message time (0 and 0 without messages)."""
    whole: int = 0
    """Bytes of the content that are whole records."""

    @property
    def messages(self) -> int:
        return sum(len(v) for v in self.index.values())

    def walked(self, whole: int) -> None:
        """The walk ended after `whole` bytes: note them and the span of the messages found."""
        self.whole = whole
        if self.index:
            self.start = min(min(e)[0] for e in self.index.values())
            self.end = max(max(e)[0] for e in self.index.values())


@dataclass
class ScanReport:
    path: str
    format: str
    """mcap | bag1"""
    file_size: int
    valid_end: int = 0
    """End of the last complete record (or of the whole records of a partial chunk)."""
    complete_chunks: int = 0
    dropped_chunks: int = 0
    partial_chunk_messages: int = 0
    """Messages kept from a chunk cut by the end of the file (whole records only)."""
    indexed: bool = False
    """The file ends with a complete index / summary (a finished file)."""
    damages: list[Damage] = field(default_factory=list)
    topics: dict[str, TopicCount] = field(default_factory=dict)
    unknown_dropped: int = 0
    """Damaged chunks whose message count cannot be known (they do not decompress)."""

    @property
    def ok(self) -> bool:
        return not self.damages

    @property
    def kept(self) -> int:
        return sum(t.kept for t in self.topics.values())

    @property
    def dropped(self) -> int:
        return sum(t.dropped for t in self.topics.values())

    @property
    def lost_bytes(self) -> int:
        """Bytes after the end of the valid data (a cut file's torn last record)."""
        return max(0, self.file_size - self.valid_end)

    def time_range(self) -> tuple[int | None, int | None]:
        firsts = [t.first_ns for t in self.topics.values() if t.first_ns is not None]
        lasts = [t.last_ns for t in self.topics.values() if t.last_ns is not None]
        return (min(firsts) if firsts else None, max(lasts) if lasts else None)

    def topic(self, name: str, typename: str) -> TopicCount:
        t = self.topics.get(name)
        if t is None:
            t = self.topics[name] = TopicCount(name, typename)
        return t

    def diagnosis(self) -> list[str]:
        """The damage, what is readable and what is lost, one line each."""
        lines = [d.message for d in self.damages]
        first, last = self.time_range()
        span = f", log times {first} .. {last} ns" if first is not None else ""
        partial = (
            f" + {self.partial_chunk_messages} from the cut chunk"
            if self.partial_chunk_messages
            else ""
        )
        lines.append(
            f"readable: {self.complete_chunks} complete chunks, {self.kept} messages{partial} "
            f"in {len(self.topics)} topics{span}"
        )
        lost = [f"{self.lost_bytes} bytes after the last complete record at {self.valid_end}"]
        if self.dropped or self.dropped_chunks:
            lost.append(f"{self.dropped_chunks} damaged chunks ({self.dropped} messages counted)")
        lines.append("lost: " + "; ".join(lost))
        return lines

    def to_json(self) -> dict[str, Any]:
        first, last = self.time_range()
        return {
            "path": self.path,
            "format": self.format,
            "bytes": self.file_size,
            "indexed": self.indexed,
            "valid_end": self.valid_end,
            "lost_bytes": self.lost_bytes,
            "complete_chunks": self.complete_chunks,
            "dropped_chunks": self.dropped_chunks,
            "partial_chunk_messages": self.partial_chunk_messages,
            "kept": self.kept,
            "dropped": self.dropped,
            "unknown_dropped_chunks": self.unknown_dropped,
            "first_ns": first,
            "last_ns": last,
            "damages": [
                {"kind": d.kind, "offset": d.offset, "chunk": d.chunk, "message": d.message}
                for d in self.damages
            ],
            "topics": {
                n: {
                    "type": t.type,
                    "kept": t.kept,
                    "dropped": t.dropped,
                    "first_ns": t.first_ns,
                    "last_ns": t.last_ns,
                }
                for n, t in sorted(self.topics.items())
            },
        }


MAX_RECORD = 1 << 32
"""Largest record (bytes) a scanner loads into memory; a bigger claimed length is treated
as invalid data: chunked writers write chunks of a few MB."""


def recovered_name(path: str | os.PathLike[str]) -> Path:
    """Where a recovery of `path` goes by default: beside it, `.recovered` before the suffix
    (`drive.bag` -> `drive.recovered.bag`; a bag folder `run1` -> `run1.recovered`)."""
    p = Path(path)
    return p.with_name(f"{p.stem}.recovered{p.suffix}")


class RecordScanner(ABC):
    """What the record scanners share: the file, its size, the report, an optional sink
    that receives what is whole (a recovery writer), and how damage is noted."""

    def __init__(self, path: str | os.PathLike[str], fmt: str, sink: Any = None) -> None:
        self.path = str(path)
        self.sink = sink
        self.size = os.stat(path).st_size
        self.report = ScanReport(self.path, fmt, self.size)

    @abstractmethod
    def scan(self) -> ScanReport:
        """Walk the file once; the report says what is whole, damaged and lost."""

    def _damage(self, kind: str, at: int, text: str, chunk: int | None = None) -> None:
        self.report.damages.append(Damage(kind, at, text, chunk))

    @abstractmethod
    def _names(self, cid: int) -> tuple[str, str]:
        """Topic and type name of connection (MCAP: channel) `cid`, as far as known."""

    def _count(self, index: MessageIndex, *, kept: bool) -> None:
        """Count a chunk's messages per topic as kept (with their time span) or dropped."""
        for cid, entries in index.items():
            t = self.report.topic(*self._names(cid))
            if kept:
                t.kept += len(entries)
                t.add_times(min(entries)[0], max(entries)[0])
            else:
                t.dropped += len(entries)

    def _keep_partial(
        self, whole: bytes | memoryview, content: ChunkMessages, compression: str
    ) -> int:
        """The whole records (`whole`, walked into `content`) of the chunk cut by the end of
        the file: its messages counted as kept and the records given to the sink; how many
        messages that is."""
        kept = content.messages
        if kept:
            self._count(content.index, kept=True)
            self.report.partial_chunk_messages = kept
            if self.sink:
                self.sink.records(bytes(whole), content, compression)
        return kept

    def _drop(
        self, pos: int, n: int, why: str, kind: str = CORRUPT, content: ChunkMessages | None = None
    ) -> None:
        """Chunk `n` at `pos` is damaged and dropped whole; its messages are counted as
        dropped when its records could be walked (`content`), else its count is unknown."""
        self.report.dropped_chunks += 1
        counted = ""
        if content is not None:
            self._count(content.index, kept=False)
            counted = f", {content.messages} messages dropped"
        else:
            self.report.unknown_dropped += 1
        self._damage(kind, pos, f"chunk {n} at offset {pos}: {why}; chunk dropped{counted}", n)

    def _drop_undefined(
        self, pos: int, n: int, content: ChunkMessages, lost: set[int], what: str
    ) -> None:
        """Count and report the messages of chunk `n` on the `lost` connections (`what`:
        connections | channels) whose only definition went with a dropped chunk."""
        gone = {cid: entries for cid, entries in content.index.items() if cid in lost}
        self._count(gone, kept=False)
        count = sum(len(v) for v in gone.values())
        self._damage(
            CORRUPT,
            pos,
            f"chunk {n} at offset {pos}: {count} messages on {what} "
            f"{', '.join(map(str, sorted(lost)))}, defined only in a dropped chunk; dropped",
            n,
        )


def recover_with(
    scanner: type[RecordScanner],
    writer: Any,
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
) -> ScanReport:
    """Scan `src` into `writer(out)` (a recovery writer: finish() completes the file,
    abort() gives it up); a failure removes `out`, and `out` is never `src`."""
    if Path(out).resolve() == Path(src).resolve():
        raise ValueError(f"{out}: recover never writes over its input")
    sink = writer(out)
    try:
        report = scanner(src, sink).scan()
    except BaseException:
        sink.abort()
        Path(out).unlink(missing_ok=True)
        raise
    sink.finish()
    return report


class RecoveryFile:
    """The output of a recovery writer: written front to back from `start`, each write's
    offset returned (indexes point at it); `abort` gives the file up (`recover_with`)."""

    def __init__(self, out: str | os.PathLike[str], start: bytes) -> None:
        self._f = Path(out).open("wb")  # noqa: SIM115 - closed in finish() / abort()
        self._f.write(start)
        self._pos = len(start)

    def _write(self, data: bytes | memoryview) -> int:
        at = self._pos
        self._f.write(data)
        self._pos += len(data)
        return at

    def abort(self) -> None:
        self._f.close()

"""Does the live MCAP agree with the offline export of the same drive?

Counts messages per topic in both files with the mcap library's stream reader (it reads a
live MCAP whose bridge was killed: whole chunks, no summary) and compares the topics the
live bridge can make; the topics it cannot (the calibrated layer's /tf, /tf_static) are
listed, not compared.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from mcap.exceptions import McapError
from mcap.records import Channel, Chunk, Message
from mcap.stream_reader import StreamReader, breakup_chunk

from bridge_lake.errors import BridgeLakeError

NOT_LIVE = ("/tf", "/tf_static")
"""Topics of the default ADTF mapping made from the calibrated layer (poses fitted over the
whole drive): the live bridge does not have them."""


class CheckError(BridgeLakeError):
    """An MCAP to compare that cannot be read at all."""


def topic_counts(path: str | os.PathLike[str]) -> tuple[Counter[str], bool]:
    """(messages per topic, whether the file ended cleanly) of an MCAP, read linearly; a
    file cut after its last whole chunk (a killed live bridge) counts up to there."""
    channels: dict[int, str] = {}
    counts: Counter[str] = Counter()
    complete = True

    def take(record: object) -> None:
        if isinstance(record, Channel):
            channels[record.id] = record.topic
        elif isinstance(record, Message):
            counts[channels.get(record.channel_id, f"#{record.channel_id}")] += 1

    try:
        with open(path, "rb") as f:
            try:
                for record in StreamReader(f, skip_magic=False, emit_chunks=True).records:
                    if isinstance(record, Chunk):
                        for inner in breakup_chunk(record, validate_crc=True):
                            take(inner)
                    else:
                        take(record)
            except (McapError, EOFError, ValueError):
                complete = False
    except OSError as exc:
        raise CheckError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return counts, complete


@dataclass
class CountCheck:
    live: dict[str, int]
    offline: dict[str, int]
    live_complete: bool
    mismatches: dict[str, tuple[int, int]] = field(default_factory=dict)
    not_live: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def render(self) -> str:
        state = "complete" if self.live_complete else "cut: counted to its last whole chunk"
        lines = [f"live MCAP {state}"]
        for topic in sorted(set(self.live) | set(self.offline)):
            if topic in self.not_live:
                continue
            a, b = self.live.get(topic, 0), self.offline.get(topic, 0)
            lines.append(f"  {'ok ' if a == b else 'BAD'} {topic}: live {a}, offline {b}")
        if self.not_live:
            lines.append(f"  not live (offline only): {', '.join(self.not_live)}")
        return "\n".join(lines)


def compare_counts(live: str | os.PathLike[str], offline: str | os.PathLike[str]) -> CountCheck:
    """Messages per topic of the live MCAP against the offline export (see module)."""
    a, complete = topic_counts(live)
    b, _ = topic_counts(offline)
    not_live = sorted(t for t in b if t in NOT_LIVE and t not in a)
    check = CountCheck(dict(a), dict(b), complete, not_live=not_live)
    for topic in set(a) | set(b):
        if topic in not_live:
            continue
        if a.get(topic, 0) != b.get(topic, 0):
            check.mismatches[topic] = (a.get(topic, 0), b.get(topic, 0))
    return check


__all__ = ["NOT_LIVE", "CheckError", "CountCheck", "compare_counts", "topic_counts"]

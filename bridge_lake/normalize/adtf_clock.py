"""Each ADTF recording's place on the drive's master clock (ns since the Unix epoch).

ADTF chunk times count from the writer's clock: Unix-epoch ns in newer ADTF 3 files, but µs
since the recorder started in most others (spec §7). A drive folder may hold several
independent recordings (two recorders, a restarted one), each on its own clock; their streams
stay separate streams, and this module finds the offset that puts each recording on one
master clock:

1. `absolute`: chunk times already on the epoch (first chunk after 2001-09-09): offset 0.
2. `header`: the IFHD header's creation time (`file_time`, Unix seconds) belongs to its
   reference time (`time_offset`): offset = file_time * 10^9 - time_offset. Good to ±1 s.
3. `fitted`: two recordings that carry the same stream (the same CAN bus or IMU seen by both
   recorders) are aligned on the samples they share: payloads that occur exactly once in both
   are matched, and the offset is the median of their time differences (its RMS residual and
   the number of matches are reported). The first recording of the drive is the reference.

The catalog keeps, per stream, the offset added to its chunk times and how it was found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bridge_lake.formats.adtf import open_dat
from bridge_lake.formats.adtf.errors import AdtfError

EPOCH_FLOOR_NS = 1_000_000_000 * 1_000_000_000
"""Chunk times from this value on (2001-09-09) are taken as Unix-epoch ns already."""
MAX_FIT_SAMPLES = 20_000
"""Samples per stream read for the fit: enough for a robust median, bounded work."""
MIN_MATCHES = 3


@dataclass(frozen=True)
class RecordingClock:
    offset_ns: int
    """added to every chunk time of the recording"""
    method: str
    """how it was found: a line for the catalog and the report"""


def header_clock(parts: list[Path]) -> RecordingClock:
    """The recording's clock from its first part's header (methods 1 and 2 above)."""
    try:
        with open_dat(parts[0], strict=False) as f:
            firsts = [s.first_time_ns for s in f.streams if s.item_count]
            header = f.header
            unit = f.time_unit_ns
    except AdtfError:
        return RecordingClock(0, "unreadable header: chunk times as recorded")
    if firsts and min(firsts) >= EPOCH_FLOOR_NS:
        return RecordingClock(0, "absolute: chunk times on the Unix epoch")
    if header.file_time > 0:
        offset = header.file_time * 1_000_000_000 - header.time_offset * unit
        return RecordingClock(offset, "header: file creation time (±1 s)")
    return RecordingClock(0, "relative: no absolute time in the file")


def _stream_samples(parts: list[Path], name: str) -> tuple[np.ndarray, list[bytes]]:
    """(chunk times, payloads) of the stream `name` across a recording's parts, capped."""
    times: list[int] = []
    payloads: list[bytes] = []
    for part in parts:
        try:
            with open_dat(part, strict=False) as f:
                ids = {s.stream_id for s in f.streams if s.name == name}
                for s in f.samples():
                    if s.stream_id in ids:
                        times.append(s.time_ns)
                        payloads.append(bytes(s.raw))
                        if len(times) >= MAX_FIT_SAMPLES:
                            return np.asarray(times, dtype=np.int64), payloads
        except AdtfError:
            continue
    return np.asarray(times, dtype=np.int64), payloads


def _stream_names(parts: Iterable[Path]) -> set[str]:
    names: set[str] = set()
    for part in parts:
        try:
            with open_dat(part, strict=False) as f:
                names |= {s.name for s in f.streams if s.item_count}
        except AdtfError:
            continue
    return names


def fit_offset(
    reference: list[Path], ref_clock: RecordingClock, other: list[Path]
) -> RecordingClock | None:
    """`other`'s clock fitted to `reference` on a stream both carry, or None."""
    for name in sorted(_stream_names(reference) & _stream_names(other)):
        t_ref, p_ref = _stream_samples(reference, name)
        t_oth, p_oth = _stream_samples(other, name)
        ref_once = _unique_times(t_ref, p_ref)
        oth_once = _unique_times(t_oth, p_oth)
        shared = ref_once.keys() & oth_once.keys()
        if len(shared) < MIN_MATCHES:
            continue
        deltas = np.array(
            [ref_once[p] + ref_clock.offset_ns - oth_once[p] for p in shared], dtype=np.int64
        )
        offset = int(np.sort(deltas)[(len(deltas) - 1) // 2])  # exact: no float median
        rms = float(np.sqrt(np.mean((deltas - offset).astype(np.float64) ** 2)))
        return RecordingClock(
            offset,
            f"fitted to {reference[0].name} on stream {name} "
            f"({len(shared)} shared samples, residual RMS {rms / 1e3:.1f} µs)",
        )
    return None


def _unique_times(times: np.ndarray, payloads: list[bytes]) -> dict[bytes, int]:
    """payload → its time, for payloads that occur exactly once."""
    seen: dict[bytes, int] = {}
    twice: set[bytes] = set()
    for t, p in zip(times.tolist(), payloads, strict=True):
        if p in seen:
            twice.add(p)
        seen[p] = t
    return {p: t for p, t in seen.items() if p not in twice}


def recording_clocks(recordings: list[list[Path]]) -> list[RecordingClock]:
    """One clock per recording (a list of parts): the header clock, refined by a fit to the
    drive's first recording where the two share a stream."""
    clocks = [header_clock(parts) for parts in recordings]
    for i in range(1, len(recordings)):
        fitted = fit_offset(recordings[0], clocks[0], recordings[i])
        if fitted is not None:
            clocks[i] = fitted
    return clocks


__all__ = ["RecordingClock", "fit_offset", "header_clock", "recording_clocks"]

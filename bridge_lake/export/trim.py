"""What part of a drive an export carries: time windows and topic globs.

A window is half-open [start, end) on the master clock (int64 ns). `--start/--end` accept
seconds relative to the drive's first message (`12.5`) or absolute nanoseconds since the
epoch (an integer above ABSOLUTE_NS, e.g. 1700000000123456789); several windows (scene sets)
are merged where they overlap. A trimmed export keeps /tf_static (stamped at the first
window's start) and the latest /tf before each window, so a replay never starts without its
transforms.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bridge_lake.errors import BridgeLakeError

ABSOLUTE_NS = 10**15
"""A time above this (11.6 days in ns) is absolute ns since the epoch, below it seconds."""
ALWAYS = ("/tf_static",)
"""Topics every export carries, whatever --topics selects."""


class TrimError(BridgeLakeError):
    """A window or topic selection that selects nothing or makes no sense."""


@dataclass(frozen=True)
class Window:
    start_ns: int
    end_ns: int


def parse_time(value: str | float | int, drive_start_ns: int) -> int:
    """A --start/--end value: relative seconds, or absolute ns when above ABSOLUTE_NS."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TrimError(f"not a time: {value!r} (seconds from the drive's start, or ns)") from None
    if abs(number) >= ABSOLUTE_NS:
        return (
            int(value)
            if isinstance(value, int) or str(value).lstrip("-").isdigit()
            else int(number)
        )
    return drive_start_ns + round(number * 1e9)


def window(
    start: str | float | int | None,
    end: str | float | int | None,
    drive_start_ns: int,
    drive_end_ns: int,
) -> list[Window] | None:
    """The window of --start/--end, clipped to the drive; None means the whole drive."""
    if start is None and end is None:
        return None
    a = drive_start_ns if start is None else parse_time(start, drive_start_ns)
    b = drive_end_ns + 1 if end is None else parse_time(end, drive_start_ns)
    return windows([(a, b)], drive_start_ns, drive_end_ns)


def windows(
    spans: Iterable[tuple[int, int]], drive_start_ns: int, drive_end_ns: int
) -> list[Window]:
    """Windows (absolute ns) sorted, merged where they overlap, clipped to the drive; a
    selection that keeps nothing is an error naming the drive's span."""
    clipped = sorted((max(a, drive_start_ns), min(b, drive_end_ns + 1)) for a, b in spans if b > a)
    out: list[Window] = []
    for a, b in clipped:
        if b <= a:
            continue
        if out and a <= out[-1].end_ns:
            out[-1] = Window(out[-1].start_ns, max(out[-1].end_ns, b))
        else:
            out.append(Window(a, b))
    if not out:
        span = (drive_end_ns - drive_start_ns) / 1e9
        raise TrimError(
            f"the time window selects nothing: the drive runs from {drive_start_ns} to "
            f"{drive_end_ns} ns ({span:.1f} s; relative times are seconds from its start)"
        )
    return out


def select_topics(available: Sequence[str], patterns: Sequence[str] | None) -> list[str]:
    """Topics matching any glob (plus ALWAYS); a pattern matching nothing is an error that
    lists what exists."""
    if not patterns:
        return list(available)
    chosen = set(t for t in available if t in ALWAYS)
    for p in patterns:
        hit = [t for t in available if fnmatch.fnmatchcase(t, p)]
        if not hit:
            raise TrimError(f"no topic matches {p!r}; topics: {', '.join(available)}")
        chosen.update(hit)
    return [t for t in available if t in chosen]

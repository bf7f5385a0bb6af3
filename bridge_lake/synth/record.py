"""A recorder for the live bridge's tests and benchmark: re-records a finished ADTF file at
its own pace, as a car's recorder writes it.

Every item of the source goes through the project's `DatWriter` in chunk-time order, each
one flushed to the OS as soon as it is written (a recorder flushing per chunk), sleeping
until its time at `speed` times real time (`speed=0`: as fast as the disk takes it).
ADTF 3 output writes each stream's type chunk before its first sample, as ADTF 3 does;
ADTF 2 output (version 0x0201) declares DDL streams as major/sub 0/0 with their struct in
the `.description` sidecar written at close, other streams as 0x0300/0 (bytes of an
unspecified layout). `parts > 1` splits the recording into parts of equal duration
(`name.dat`, `name_001.dat`, ...) that reference each other; the next part is opened and
written to before the previous one is closed, as a recorder's split does.

`--log FILE.npy` keeps, per sample, (chunk time ns, CLOCK_MONOTONIC ns after its flush): the
writer side of the live bridge's lag.

    python -m bridge_lake.synth.record SRC.dat OUT.dat [--speed 1] [--version 0x0201]
        [--parts N] [--log FILE.npy]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from bridge_lake.formats.adtf import DatWriter, Stream, open_dat

UNSPECIFIED_LAYOUT = (0x0300, 0)
"""ADTF 2 major/sub of structured data without a description (spec §8.1)."""


def _declare(w: DatWriter, s: Stream, version: int) -> None:
    if version >= 0x0400:
        w.add_stream(s.name, stream_type=s.stream_type, stream_id=s.stream_id)
    elif s.ddl is not None and s.ddl_struct is not None:
        w.add_stream(s.name, ddl=s.ddl, ddl_struct=s.ddl_struct, stream_id=s.stream_id)
    else:
        major, sub = UNSPECIFIED_LAYOUT
        w.add_stream(s.name, major=major, sub=sub, stream_id=s.stream_id)


def _part_path(out: Path, i: int) -> Path:
    return out if i == 0 else out.with_name(f"{out.stem}_{i:03d}{out.suffix}")


def record(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    speed: float = 1.0,
    version: int | None = None,
    parts: int = 1,
    log: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Re-record `src` into `out` (see module); returns the parts written."""
    out = Path(out)
    written: list[Path] = []
    stamps: list[tuple[int, int]] = []
    with open_dat(src) as f:
        version = f.version if version is None else version
        spans = [s for s in f.streams if s.item_count]
        first = min(s.first_time_ns for s in spans)
        last = max(s.last_time_ns for s in spans)
        part_ns = max(1, (last - first) // parts + 1)
        names = [_part_path(out, i) for i in range(parts)]

        def open_part(i: int) -> DatWriter:
            refs = tuple(f"./{names[j].name}" for j in (i - 1, i + 1) if 0 <= j < parts)
            w = DatWriter(
                names[i],
                version=version,
                file_time=f.header.file_time,
                description=f.header.description,
                inline_types=True,
                referenced_files=refs if version >= 0x0400 else (),
            )
            for s in f.streams:
                _declare(w, s, version)
            written.append(names[i])
            return w

        current, writer = 0, open_part(0)
        start = time.monotonic_ns()
        try:
            for s in f.samples():
                part = min((s.time_ns - first) // part_ns, parts - 1)
                if speed > 0:
                    due = start + int((s.time_ns - first) / speed)
                    wait = due - time.monotonic_ns()
                    if wait > 0:
                        time.sleep(wait / 1e9)
                previous = None
                if part != current:
                    previous, current, writer = writer, part, open_part(part)
                writer.write_sample(
                    s.stream_id,
                    s.time_ns,
                    bytes(s.raw),
                    sample_time_ns=s.sample_time_ns,
                    flags=s.flags,
                    substream_id=s.substream_id if version >= 0x0400 else 0,
                )
                writer.flush()
                if log is not None:
                    stamps.append((s.time_ns, time.monotonic_ns()))
                if previous is not None:
                    previous.close()
        finally:
            writer.close()
    if log is not None:
        np.save(log, np.array(stamps, np.int64).reshape(-1, 2))
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bridge_lake.synth.record", description=__doc__)
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--speed", type=float, default=1.0, help="x real time; 0: no pauses")
    p.add_argument("--version", type=lambda v: int(v, 0), default=None)
    p.add_argument("--parts", type=int, default=1)
    p.add_argument("--log", type=Path)
    a = p.parse_args(argv)
    record(a.src, a.out, speed=a.speed, version=a.version, parts=a.parts, log=a.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())

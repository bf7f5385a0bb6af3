"""velodyne_sync/<utime>.bin: one revolution of bare 8-byte hits, named by its utime."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.formats.nclt.velodyne import read_velodyne_sync
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 8 << 10


def seeds(work: Path) -> dict[str, bytes]:
    folder = corpus.synth_nclt(work) / "velodyne_sync"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.bin"))[:3]}


def one_input(data: bytes) -> None:
    read_velodyne_sync(scratch_file("velodyne_sync/1328374413511821.bin", data))

"""lb3/Cam<k>/<utime>.tiff: the TIFF header and first IFD, every offset validated."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.formats.nclt.images import read_lb3_image, tiff_info
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 4 << 10


def seeds(work: Path) -> dict[str, bytes]:
    paths = sorted((corpus.synth_nclt(work) / "lb3").glob("Cam*/*.tiff"))[:2]
    return {p.name: p.read_bytes() for p in paths}


def one_input(data: bytes) -> None:
    tiff_info(data)
    read_lb3_image(scratch_file("lb3/Cam3/1328374413789694.tiff", data))

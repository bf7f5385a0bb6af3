"""NCLT session tarballs (`<date>_sen.tar.gz`, ...) streamed out with tarfile's data filter:
members leaving the folder, links, devices and damaged archives must be typed errors.

Input: the uncompressed tar (the harness gzips it, so mutations reach tar headers rather
than dying in the gzip CRC)."""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
from pathlib import Path

from bridge_lake.formats.nclt.archives import unpacked
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 32 << 10


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buf.getvalue()


def seeds(work: Path) -> dict[str, bytes]:
    session = corpus.synth_nclt(work)
    date = session.name
    gps = b"".join((session / "gps.csv").read_bytes().splitlines(keepends=True)[:5])
    sync = sorted((session / "velodyne_sync").glob("*.bin"))[0]
    return {
        "sen": _tar({f"{date}/gps.csv": gps, f"{date}/kvh.csv": b"1,0.5\n"}),
        "vel": _tar({f"{date}/velodyne_sync/{sync.name}": sync.read_bytes()}),
        "escape": _tar({f"../{date}/gps.csv": gps}, {f"{date}/wheels.csv": "/etc/passwd"}),
    }


def one_input(data: bytes) -> None:
    drive = scratch_file("drive/2012-01-08_sen.tar.gz", gzip.compress(data, mtime=0)).parent
    try:
        with unpacked(drive) as root:
            outside = [p for p in root.rglob("*") if not p.resolve().is_relative_to(root.resolve())]
            if outside:
                raise AssertionError(f"archive members outside the folder: {outside}")
    finally:
        shutil.rmtree(drive, ignore_errors=True)

"""velodyne_hits.bin: packet walk, resynchronisation past damage, hit decoding and the
revolutions (scans) built from it."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.formats.nclt.scans import ScanReport, iter_scans
from bridge_lake.formats.nclt.velodyne import HitsReport, iter_velodyne_packets
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 32 << 10


def seeds(work: Path) -> dict[str, bytes]:
    data = (corpus.synth_nclt(work) / "velodyne_hits.bin").read_bytes()
    return {"head": data[:MAX_LEN], "short": data[:2048]}


def one_input(data: bytes) -> None:
    path = scratch_file("velodyne_hits.bin", data)
    report = HitsReport()
    for batch in iter_velodyne_packets(path, batch_hits=512, report=report, threads=1):
        batch.hits.num_rows  # noqa: B018
    for scan in iter_scans(path, batch_hits=512, report=ScanReport()):
        scan.points.num_rows  # noqa: B018

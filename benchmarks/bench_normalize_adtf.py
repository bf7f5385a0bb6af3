"""ADTF normalization throughput vs our reader alone, and peak RSS vs drive length.

    python benchmarks/bench_normalize_adtf.py --smoke    # seconds: 0.2 + 0.4 minute drives
    python benchmarks/bench_normalize_adtf.py            # 5-minute drive (+ 2.5 for RSS)

Timed on the same synthetic drive (bridge_lake.synth.adtf), best of `--repeat` runs:
- reader:        `open_dat(...).samples()` iterated to the end (every sample touched);
- reader+decode: that plus `DatFile.decode()` of every DDL stream (the reader's own
                 vectorized decode, the fairer "raw reader" for struct streams);
- normalize:     `normalize_adtf` into a sink that only counts (mapping, decode, column
                 building: the normalizer's own cost);
- normalize+lake: `normalize_adtf` into the real `DriveSink` plus `finish()` (Parquet writes).
Ratios are reader time / normalize time (1.0 = normalizing is as fast as reading).
Peak RSS is VmHWM (peak_rss.py) of a fresh subprocess running normalize+lake on one drive.
Every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from peak_rss import peak_rss_mb

from bridge_lake.formats.adtf import open_dat
from bridge_lake.lake import Lake
from bridge_lake.normalize.adtf import normalize_adtf
from bridge_lake.normalize.sink import DriveSink, StreamInfo
from bridge_lake.synth.adtf import write_adtf_drive


class CountingSink:
    """Duck-typed DriveSink that keeps counts only: isolates the normalizer's own time."""

    def __init__(self) -> None:
        self.rows = 0
        self.read_n = 0
        self.quarantined = 0

    def declare(self, info: StreamInfo) -> None:
        pass

    def read(self, stream: str, table: str, n: int) -> None:
        self.read_n += n

    def reordered(self, stream: str, table: str, n: int) -> None:
        pass

    def write(self, stream: str, table: str, data) -> None:
        self.rows += data.num_rows

    def scan_ids(self, n: int) -> np.ndarray:
        return np.arange(n, dtype=np.int64)

    def quarantine(self, stream: str, table: str, *, reasons, **_: object) -> None:
        self.quarantined += len(list(reasons))


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _reader(path: Path) -> None:
    with open_dat(path) as f:
        for _ in f.samples():
            pass


def _reader_decode(path: Path) -> None:
    with open_dat(path) as f:
        for _ in f.samples():
            pass
        for s in f.streams:
            if s.ddl is not None:
                f.decode(s.stream_id)


def _normalize_full(drive: Path, lake_dir: Path) -> int:
    with DriveSink(Lake(str(lake_dir)), "bench") as sink:
        normalize_adtf(drive, sink)
        return sum(sink.finish().table_rows.values())


def _rss_child(drive: str, lake_dir: str) -> None:
    _normalize_full(Path(drive), Path(lake_dir))
    print(peak_rss_mb())


def _peak_rss_mb(drive: Path, lake_dir: Path) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(drive), str(lake_dir)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--minutes", type=float, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rss-child", nargs=2, metavar=("DRIVE", "LAKE"))
    args = ap.parse_args()
    if args.rss_child:
        _rss_child(*args.rss_child)
        return
    minutes = args.minutes or (0.2 if args.smoke else 5.0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        drives = {}
        for m in (minutes / 2, minutes):
            d = root / f"drive_{m:g}"
            d.mkdir()
            drives[m] = (d, write_adtf_drive(d, minutes=m, seed=11)[0])
        drive, path = drives[minutes]
        counting = CountingSink()
        t_reader = _best(lambda: _reader(path), args.repeat)
        t_decode = _best(lambda: _reader_decode(path), args.repeat)
        t_norm = _best(lambda: normalize_adtf(drive, CountingSink()), args.repeat)
        normalize_adtf(drive, counting)
        runs = iter(range(10_000))
        t_full = _best(lambda: _normalize_full(drive, root / f"lake{next(runs)}"), args.repeat)
        rss = {m: round(_peak_rss_mb(d, root / f"rss{m:g}"), 1) for m, (d, _) in drives.items()}
        size = path.stat().st_size
        with open_dat(path) as f:
            samples = sum(s.item_count for s in f.streams)
        report = {
            "minutes": minutes,
            "file_mb": round(size / 1e6, 1),
            "samples": samples,
            "rows_written": counting.rows,
            "quarantined": counting.quarantined,
            "seconds": {
                "reader": round(t_reader, 3),
                "reader_decode": round(t_decode, 3),
                "normalize": round(t_norm, 3),
                "normalize_lake": round(t_full, 3),
            },
            "ratio_vs_reader": {
                "normalize": round(t_reader / t_norm, 3),
                "normalize_lake": round(t_reader / t_full, 3),
            },
            "ratio_vs_reader_decode": {
                "normalize": round(t_decode / t_norm, 3),
                "normalize_lake": round(t_decode / t_full, 3),
            },
            "normalize_mb_s": round(size / 1e6 / t_norm, 1),
            "peak_rss_mb": {f"{m:g} min": v for m, v in rss.items()},
        }
        if counting.read_n != counting.rows + counting.quarantined:
            raise SystemExit(f"conservation broken: {counting.read_n} read, {counting.rows} rows")
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

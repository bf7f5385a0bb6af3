"""ADTF normalization throughput vs our reader alone, and peak RSS vs drive length.

    python benchmarks/bench_normalize_adtf.py --smoke    # seconds: 0.2 + 0.4 minute drives
    python benchmarks/bench_normalize_adtf.py            # 5-minute drive, RSS 5 vs 30 min
    python benchmarks/bench_normalize_adtf.py --workdir /tmp/adtf_drives   # keep, reuse drives

Timed on the same synthetic drive (bridge_lake.synth.adtf), best of `--repeat` runs:
- reader:        `open_dat(...).samples()` iterated to the end (every sample touched);
- reader+decode: that plus `DatFile.decode()` of every DDL stream (the reader's own
                 vectorized decode, the fairer "raw reader" for struct streams);
- normalize:     `normalize_adtf` into a sink that only counts (mapping, decode, column
                 building: the normalizer's own cost);
- normalize+lake: `normalize_adtf` into the real `DriveSink` plus `finish()` (Parquet writes).
Ratios are reader time / normalize time (1.0 = normalizing is as fast as reading).
Peak RSS is VmHWM (peak_rss.py) of a fresh subprocess running normalize+lake on one drive,
for each of `--rss-minutes` (synthesizing 30 minutes takes minutes: `--workdir` keeps them).
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
from figures import figure
from peak_rss import peak_rss_mb

from bridge_lake.formats.adtf import open_dat
from bridge_lake.lake import Lake
from bridge_lake.memory import release_large_frees
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


def _drive(root: Path, minutes: float) -> tuple[Path, Path]:
    """The synthetic drive of `minutes` under root (written once, reused when there)."""
    d = root / f"drive_{minutes:g}"
    done = d / ".complete"
    if not done.exists():
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.dat"):
            old.unlink()
        write_adtf_drive(d, minutes=minutes, seed=11)
        done.touch()
    (path,) = sorted(d.glob("*.dat"))
    return d, path


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
    release_large_frees()  # as normalize_drive does in the pipeline
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
    ap.add_argument("--rss-minutes", type=float, nargs="*", help="drive lengths for peak RSS")
    ap.add_argument("--workdir", type=Path, help="keep the synthesized drives here and reuse them")
    ap.add_argument("--rss-child", nargs=2, metavar=("DRIVE", "LAKE"))
    args = ap.parse_args()
    if args.rss_child:
        _rss_child(*args.rss_child)
        return
    minutes = args.minutes or (0.2 if args.smoke else 5.0)
    rss_minutes = args.rss_minutes or ([minutes / 2, minutes] if args.smoke else [minutes, 30.0])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keep = args.workdir or root
        drives = {m: _drive(keep, m) for m in sorted({minutes, *rss_minutes})}
        drive, path = drives[minutes]
        counting = CountingSink()
        t_reader = _best(lambda: _reader(path), args.repeat)
        t_decode = _best(lambda: _reader_decode(path), args.repeat)
        t_norm = _best(lambda: normalize_adtf(drive, CountingSink()), args.repeat)
        normalize_adtf(drive, counting)
        runs = iter(range(10_000))
        t_full = _best(lambda: _normalize_full(drive, root / f"lake{next(runs)}"), args.repeat)
        rss = {m: round(_peak_rss_mb(drives[m][0], root / f"rss{m:g}"), 1) for m in rss_minutes}
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
        figure(f"ADTF normalize into the lake, {minutes:g}-min drive", size / 1e6 / t_full,
               size / 1e6 / t_decode, "MB/s", baseline_name="reader + DDL decode alone",
               peak_rss_mb=rss.get(minutes))  # fmt: skip
        short, long = min(rss), max(rss)
        figure(f"ADTF normalize peak RSS, {long:g} vs {short:g} min", rss[long], rss[short],
               "MB", more_is_better=False, baseline_name="the shorter drive")  # fmt: skip


if __name__ == "__main__":
    main()

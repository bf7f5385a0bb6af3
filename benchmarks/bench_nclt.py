"""velodyne_hits.bin -> Arrow batches: ours vs the devkit's per-hit struct.unpack loop.

    python benchmarks/bench_nclt.py --smoke     # a few seconds (CI): small file, same checks
    python benchmarks/bench_nclt.py             # full: ratio, 3 GB streaming RSS, linearity

Both decoders read the same synthetic file (bridge_lake.synth.nclt at a realistic 50k hits
per revolution) and produce Arrow record batches. The loop is the devkit's read_vel_hits.py
style (read 2 bytes at a time, struct.unpack each field, convert per hit) with its values
collected into Arrow batches. Larger files are the base file repeated with shifted packet
utimes. Peak RSS is VmHWM (peak_rss.py) of a fresh subprocess that
only streams the file. Every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
from figures import figure

from bridge_lake.formats.nclt.velodyne import HITS_SCHEMA, iter_velodyne_packets
from bridge_lake.synth.nclt import write_nclt_drive

MB = 1e6


def devkit_loop(path: Path, flush_hits: int = 1 << 20) -> int:
    """The per-hit loop of the dataset's read_vel_hits.py, emitting Arrow batches."""
    cols: list[list] = [[] for _ in range(6)]
    rows = 0
    with path.open("rb") as f:
        while True:
            magic = f.read(8)
            if len(magic) < 8:
                break
            num_hits = struct.unpack("<I", f.read(4))[0]
            utime = struct.unpack("<Q", f.read(8))[0]
            f.read(4)
            for _ in range(num_hits):
                x = struct.unpack("<H", f.read(2))[0]
                y = struct.unpack("<H", f.read(2))[0]
                z = struct.unpack("<H", f.read(2))[0]
                i = struct.unpack("B", f.read(1))[0]
                laser = struct.unpack("B", f.read(1))[0]
                for col, value in zip(
                    cols,
                    (utime, x * 0.005 - 100.0, y * 0.005 - 100.0, z * 0.005 - 100.0, i, laser),
                    strict=True,
                ):
                    col.append(value)
            if len(cols[0]) >= flush_hits:
                rows += pa.RecordBatch.from_arrays(
                    [pa.array(c) for c in cols], schema=HITS_SCHEMA
                ).num_rows
                cols = [[] for _ in range(6)]
    if cols[0]:
        rows += pa.RecordBatch.from_arrays([pa.array(c) for c in cols], schema=HITS_SCHEMA).num_rows
    return rows


def ours(path: Path, threads: int | None = None) -> int:
    return sum(b.hits.num_rows for b in iter_velodyne_packets(path, threads=threads))


def timed(fn: Callable[..., int], *args: object, repeat: int = 1) -> tuple[float, int]:
    best, rows = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, rows


def base_file(work: Path, seconds: float, hits_per_rev: int) -> Path:
    write_nclt_drive(
        work / "drive", minutes=seconds / 60, seed=7, date="2012-04-29", hits_per_rev=hits_per_rev
    )
    return work / "drive" / "2012-04-29" / "velodyne_hits.bin"


def tiled(base: Path, out: Path, copies: int) -> Path:
    """`copies` repetitions of base, each copy's packet utimes shifted past the previous one."""
    data = np.frombuffer(base.read_bytes(), np.uint8)
    counts = np.concatenate([b.counts for b in iter_velodyne_packets(base)])
    offsets = np.concatenate([[0], np.cumsum(24 + 8 * counts)[:-1]])
    utime_at = (offsets[:, None] + 12 + np.arange(8)).ravel()
    utimes = data[utime_at].view("<u8").astype(np.int64)
    span = int(utimes.max() - utimes.min()) + 553
    with out.open("wb") as f:
        for i in range(copies):
            chunk = data.copy()
            chunk[utime_at] = (utimes + i * span).astype("<u8").view(np.uint8)
            f.write(chunk.tobytes())
    return out


def peak_rss_streaming(path: Path) -> tuple[float, float]:
    """(seconds, peak RSS MB) of a fresh process that streams `path` through our reader."""
    code = (
        f"import sys, time; sys.path.insert(0, {str(Path(__file__).parent)!r});"
        "from pathlib import Path; from peak_rss import peak_rss_mb;"
        "from bridge_lake.formats.nclt.velodyne import iter_velodyne_hits;"
        "t0 = time.perf_counter();"
        "n = sum(b.num_rows for b in iter_velodyne_hits(Path(sys.argv[1])));"
        "dt = time.perf_counter() - t0;"
        "print(dt, peak_rss_mb(), n)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    dt, rss, _ = out.stdout.split()
    return float(dt), float(rss)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_nclt_"))
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, object] = {}
    try:
        seconds, loop_copies = (3.0, 1) if args.smoke else (30.0, 1)
        base = base_file(work, seconds, 50_000 if not args.smoke else 20_000)
        size = base.stat().st_size
        figures["base_file_mb"] = round(size / MB, 1)
        t_loop, n_loop = timed(devkit_loop, base)
        t_ours, n_ours = timed(ours, base, repeat=3)
        t_one, _ = timed(ours, base, 1, repeat=3)
        assert n_loop == n_ours, (n_loop, n_ours)
        figures.update(
            hits=n_ours,
            loop_mb_s=round(size / MB / t_loop, 1),
            loop_mhits_s=round(n_loop / t_loop / 1e6, 2),
            ours_mb_s=round(size / MB / t_ours, 1),
            ours_one_thread_mb_s=round(size / MB / t_one, 1),
            ratio=round(t_loop / t_ours, 1),
            ratio_one_thread=round(t_loop / t_one, 1),
        )
        print(f"file {size / MB:.1f} MB, {n_ours:,} hits (both decoders agree)")
        print(
            f"devkit loop : {size / MB / t_loop:8.1f} MB/s  ({n_loop / t_loop / 1e6:.2f} M hits/s)"
        )
        print(f"ours 1 thr  : {size / MB / t_one:8.1f} MB/s  ratio {t_loop / t_one:.0f}x")
        print(f"ours        : {size / MB / t_ours:8.1f} MB/s  ratio {t_loop / t_ours:.0f}x")
        copies = [1, 2] if args.smoke else [3, 6, 12, 25]
        rows = []
        for c in copies:
            path = tiled(base, work / f"hits_x{c}.bin", c * loop_copies)
            dt, rss = peak_rss_streaming(path)
            mb = path.stat().st_size / MB
            rows.append(
                {
                    "mb": round(mb, 1),
                    "seconds": round(dt, 3),
                    "mb_s": round(mb / dt, 1),
                    "peak_rss_mb": round(rss),
                }
            )
            print(f"stream {mb:8.1f} MB: {dt:6.2f} s  {mb / dt:7.1f} MB/s  peak RSS {rss:6.0f} MB")
            path.unlink()
        figures["streaming"] = rows
        rates = [r["mb_s"] for r in rows]
        figures["linearity_rate_spread"] = round((max(rates) - min(rates)) / np.mean(rates), 3)
        print(f"throughput spread across sizes: {figures['linearity_rate_spread']:.1%}")
        figure("NCLT velodyne_hits.bin read", size / MB / t_ours, size / MB / t_loop, "MB/s",
               baseline_name="devkit per-hit struct loop",
               peak_rss_mb=max(r["peak_rss_mb"] for r in rows))  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

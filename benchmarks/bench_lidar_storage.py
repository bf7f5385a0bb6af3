"""lidar_points on disk: bytes per point and time, ours vs a plain pyarrow file of the same hits.

    python benchmarks/bench_lidar_storage.py --smoke          # seconds (CI): a tiny session
    python benchmarks/bench_lidar_storage.py                  # 3-minute NCLT drive, 5 pairs
    python benchmarks/bench_lidar_storage.py --session DIR    # an existing NCLT session

"ours" normalizes velodyne_hits.bin through the sink exactly as normalize_nclt does
(normalize_velodyne_hits into a DriveSink on a fresh lake, published): lidar_points and
lidar_scans. "plain" streams the same file through the same reader (iter_velodyne_hits),
adds the packet time per point as int64 ns and writes every batch with pyarrow's
ParquetWriter at its defaults plus zstd (dictionary on every column, one encoding thread).
Bytes per point are the lidar_points partition's files over its points (lidar_scans beside
it), and the plain file's size over its rows; both must hold the same points (counts and
the sum of x, y, z checked). Each run is a fresh subprocess (peak RSS is VmHWM, see
peak_rss.py); ours and plain alternate, pair after pair, and the ratio is taken per pair,
so a machine shared with other work loads both sides alike. Medians are printed with the
spread and the load average. Every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import figure
from peak_rss import peak_rss_mb

HERE = Path(__file__).resolve()


def hits_file(session: Path) -> Path:
    found = sorted(session.rglob("velodyne_hits.bin"))
    if not found:
        raise SystemExit(f"no velodyne_hits.bin under {session}")
    return found[0]


def child_ours(hits: Path, out: Path) -> dict[str, float]:
    """velodyne_hits.bin → lidar_points/lidar_scans through the sink, published."""
    from bridge_lake.lake import Lake
    from bridge_lake.normalize.nclt_sensors import normalize_velodyne_hits
    from bridge_lake.normalize.sink import DriveSink

    lake = Lake(str(out))
    t0, c0 = time.perf_counter(), time.process_time()
    with DriveSink(lake, "bench") as sink:
        normalize_velodyne_hits(sink, hits, hits.name)
        result = sink.finish()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    points = result.table_rows["lidar_points"]
    files = result.table_files["lidar_points"]
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "points": points,
        "bytes": sum(os.path.getsize(f) for f in files),
        "scan_bytes": sum(os.path.getsize(f) for f in result.table_files["lidar_scans"]),
        "files": files,
    }


def child_plain(hits: Path, out: Path) -> dict[str, float]:
    """The same points (the same revolutions, columns and types as lidar_points) plus their
    time as int64 ns, written on the calling thread by pyarrow's ParquetWriter at its
    defaults (dictionary on every column) with zstd, about 1 Mi points per write."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bridge_lake.formats.nclt.scans import RING_INVALID, iter_scans
    from bridge_lake.lake.schemas import LIDAR_POINTS

    schema = pa.schema([pa.field("time_ns", pa.int64(), nullable=False), *LIDAR_POINTS.schema])
    path = out / "plain.parquet"
    t0, c0 = time.perf_counter(), time.process_time()
    rows, pending, pending_rows = 0, [], 0
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for scan in iter_scans(hits):
            p = scan.points
            offset = p.column("time_offset_ns").to_numpy()
            ring = p.column("ring").to_numpy()
            invalid = ring == RING_INVALID
            columns = [
                pa.array(scan.start_utime * 1000 + offset),
                pa.array(np.full(p.num_rows, scan.scan_id, dtype=np.int64)),
                *(p.column(k) for k in "xyz"),
                p.column("intensity").cast(pa.float32()),
                pa.array(ring.astype(np.int16), mask=invalid if invalid.any() else None),
                pa.array(offset.astype(np.int32)),
            ]
            pending.append(pa.record_batch(columns, schema=schema))
            pending_rows += p.num_rows
            if pending_rows >= 1 << 20:
                writer.write_table(pa.Table.from_batches(pending))
                rows, pending, pending_rows = rows + pending_rows, [], 0
        if pending:
            writer.write_table(pa.Table.from_batches(pending))
            rows += pending_rows
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "points": rows,
        "bytes": path.stat().st_size,
        "files": [str(path)],
    }


def xyz_sums(files: list[str]) -> list[float]:
    """Sum of x, y and z over the files (float64): both sides hold the same points."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    sums = [0.0, 0.0, 0.0]
    for f in files:
        for batch in pq.ParquetFile(f).iter_batches(columns=["x", "y", "z"], batch_size=1 << 20):
            for i, col in enumerate(batch.columns):
                sums[i] += pc.sum(col.cast("float64")).as_py()
    return sums


def in_subprocess(kind: str, hits: Path, out: Path) -> dict[str, float]:
    run = subprocess.run(
        [sys.executable, str(HERE), "--child", kind, str(hits), str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def synthesize(work: Path, minutes: float, hits_per_rev: int) -> Path:
    from bridge_lake.synth.nclt import write_nclt_drive

    write_nclt_drive(work / "session", minutes=minutes, seed=0, hits_per_rev=hits_per_rev)
    return work / "session"


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny session, one pair")
    parser.add_argument("--session", type=Path, help="an NCLT session to use (else synthesized)")
    parser.add_argument("--minutes", type=float, default=3.0, help="synthesized drive length")
    parser.add_argument("--pairs", type=int, default=5, help="ours/plain pairs")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, hits, out = args.child
        fn = child_ours if kind == "ours" else child_plain
        figures = fn(Path(hits), Path(out))
        figures["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(figures))
        return
    work = Path(tempfile.mkdtemp(prefix="bench_lidar_storage_"))
    try:
        if args.smoke:
            args.minutes, args.pairs = 0.2, 1
        session = args.session or synthesize(work, args.minutes, 5_000 if args.smoke else 50_000)
        hits = hits_file(session)
        runs: dict[str, list[dict]] = {"ours": [], "plain": []}
        loads = [os.getloadavg()[0]]
        for i in range(args.pairs):
            for kind in ("ours", "plain") if i % 2 == 0 else ("plain", "ours"):
                out = work / f"{kind}{i}"
                out.mkdir()
                runs[kind].append(in_subprocess(kind, hits, out))
                loads.append(os.getloadavg()[0])
                if i == 0:
                    runs[kind][-1]["sums"] = xyz_sums(runs[kind][-1]["files"])
                shutil.rmtree(out)
        ours, plain = runs["ours"], runs["plain"]
        if ours[0]["points"] != plain[0]["points"]:
            raise SystemExit(f"point counts differ: {ours[0]['points']} vs {plain[0]['points']}")
        for a, b in zip(ours[0]["sums"], plain[0]["sums"], strict=True):
            if abs(a - b) > 1e-3 + 1e-12 * abs(b):  # same float32 values, summed in float64
                raise SystemExit(f"coordinate sums differ: {ours[0]['sums']} vs {plain[0]['sums']}")
        points = ours[0]["points"]
        ratios = [p["seconds"] / o["seconds"] for o, p in zip(ours, plain, strict=True)]
        figures = {
            "points": points,
            "hits_mb": round(hits.stat().st_size / 1e6, 1),
            "ours_bytes_per_point": round(ours[0]["bytes"] / points, 3),
            "ours_scan_bytes_per_point": round(ours[0]["scan_bytes"] / points, 4),
            "plain_bytes_per_point": round(plain[0]["bytes"] / points, 3),
            "ours_seconds": round(statistics.median(r["seconds"] for r in ours), 2),
            "plain_seconds": round(statistics.median(r["seconds"] for r in plain), 2),
            "speed_ratio": round(statistics.median(ratios), 2),
            "speed_ratio_spread": spread(ratios),
            "ours_peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in ours)),
            "plain_peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in plain)),
            "pairs": args.pairs,
            "load_avg": spread(loads),
        }
        print(f"{points:,} points ({figures['hits_mb']} MB velodyne_hits.bin), {args.pairs} "
              f"pairs, load average {figures['load_avg']} on {os.cpu_count()} cores")  # fmt: skip
        print(f"{'':6} {'bytes/point':>12} {'median s':>9} {'Mpts/s':>7} {'peak RSS MB':>12}")
        for kind, rs in runs.items():
            s = statistics.median(r["seconds"] for r in rs)
            rss = statistics.median(r["peak_rss_mb"] for r in rs)
            print(f"{kind:6} {rs[0]['bytes'] / points:12.3f} {s:9.2f} {points / s / 1e6:7.1f} "
                  f"{rss:12.0f}")  # fmt: skip
        print(f"ours faster by {figures['speed_ratio']:.2f}x (median of per-pair ratios, "
              f"spread {figures['speed_ratio_spread']}); lidar_scans adds "
              f"{figures['ours_scan_bytes_per_point']:.4f} bytes/point")  # fmt: skip
        figure(
            "lidar_points on disk, NCLT",
            ours[0]["bytes"] / points,
            plain[0]["bytes"] / points,
            "bytes/point",
            more_is_better=False,
            baseline_name="plain pyarrow file + time (defaults, zstd)",
        )
        figure("lidar_points: normalize velodyne_hits", figures["ours_seconds"],
               figures["plain_seconds"], "s", more_is_better=False,
               baseline_name="plain pyarrow file + time, one thread",
               peak_rss_mb=figures["ours_peak_rss_mb"])  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

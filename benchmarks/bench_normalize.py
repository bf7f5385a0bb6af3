"""NCLT normalization vs the raw readers alone, and peak RSS against drive length.

    python benchmarks/bench_normalize.py --smoke   # a few seconds: tiny drives, same checks
    python benchmarks/bench_normalize.py           # full: 30-minute drive, RSS 10 vs 30 min

Both sides run on the same synthetic session (bridge_lake.synth.nclt at a realistic
50,000 hits per revolution): "readers" iterates every record of every file with the format
readers the normalizer itself uses (load_table for each CSV, iter_scans for
velodyne_hits.bin, read_velodyne_sync per scan file, iter_hokuyo, read_lb3_image) and
touches nothing else; "normalize" runs normalize_nclt into a fresh temporary lake and
publishes it (sink.finish). Throughput is the session's file bytes over wall time. Each run
is a fresh subprocess, so its peak RSS (VmHWM, see peak_rss.py) is that run's alone. The
readers run before and after normalizing and the faster run counts: a drive of many GB is not
all in the page cache after synthesis, and the first pass warms it. Target
(issue 6): normalization at >= 50% of the readers' throughput, peak RSS independent of the
drive's length. Every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import figure
from peak_rss import peak_rss_mb

MB = 1e6
HERE = Path(__file__).resolve()


def session_bytes(raw: Path) -> int:
    """Bytes of the session's recording files (the generator's truth file excluded)."""
    return sum(p.stat().st_size for p in raw.rglob("*") if p.is_file() and p.suffix != ".json")


def child_readers(raw: Path) -> dict[str, float]:
    """Iterate every record of every file with the format readers; nothing is kept."""
    from bridge_lake.formats.nclt import (
        iter_hokuyo,
        iter_scans,
        load_table,
        locate_session,
        read_lb3_image,
        read_velodyne_sync,
    )
    from bridge_lake.formats.nclt.csv_tables import COLUMNS

    t0 = time.perf_counter()
    session = locate_session(raw)
    records = 0
    for kind, path in session.files.items():
        if kind in COLUMNS:
            table = load_table(kind, path)
            records += table.frame.height + table.quarantine.height
    if "velodyne_hits" in session.files:
        records += sum(s.points.num_rows for s in iter_scans(session.files["velodyne_hits"]))
    records += sum(read_velodyne_sync(p).num_rows for p in session.scans)
    for kind in ("hokuyo_30m", "hokuyo_4m"):
        if kind in session.files:
            records += sum(b.num_rows for b in iter_hokuyo(kind, session.files[kind]))
    for paths in session.images.values():
        records += sum(len(read_lb3_image(p)["data"]) > 0 for p in paths)
    return {"seconds": time.perf_counter() - t0, "records": records}


def child_normalize(raw: Path, lake_dir: Path) -> dict[str, float]:
    """normalize_nclt into a fresh lake and publish; conservation is checked per stream."""
    from bridge_lake.lake import Lake
    from bridge_lake.normalize.nclt import normalize_nclt
    from bridge_lake.normalize.sink import DriveSink

    t0 = time.perf_counter()
    with DriveSink(Lake(str(lake_dir)), "bench") as sink:
        normalize_nclt(raw, sink)
        result = sink.finish()
    seconds = time.perf_counter() - t0
    broken = [s.info.stream for s in result.streams if not s.conserved]
    if broken:
        raise SystemExit(f"conservation failed for {broken}")
    return {
        "seconds": seconds,
        "rows": sum(result.table_rows.values()),
        "points": result.table_rows["lidar_points"],
        "streams": len(result.streams),
    }


def in_subprocess(*args: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", *args], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def synthesize(root: Path, minutes: float, hits_per_rev: int) -> tuple[Path, float]:
    from bridge_lake.synth.nclt import write_nclt_drive

    t0 = time.perf_counter()
    write_nclt_drive(root, minutes=minutes, seed=7, hits_per_rev=hits_per_rev)
    return root, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny drives, a few seconds")
    parser.add_argument("--minutes", type=float, default=30.0, help="long drive length")
    parser.add_argument("--short-minutes", type=float, default=10.0, help="short drive length")
    parser.add_argument("--hits-per-rev", type=int, default=50_000)
    parser.add_argument("--workdir", type=Path, default=None, help="where to put the drives")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *paths = args.child
        if kind == "readers":
            figures = child_readers(Path(paths[0]))
        else:
            figures = child_normalize(Path(paths[0]), Path(paths[1]))
        figures["max_rss_mb"] = peak_rss_mb()
        print(json.dumps(figures))
        return
    if args.smoke:
        args.minutes, args.short_minutes, args.hits_per_rev = 0.4, 0.2, 5_000
    work = Path(tempfile.mkdtemp(prefix="bench_normalize_", dir=args.workdir))
    try:
        rows = {}
        for label, minutes in (("short", args.short_minutes), ("long", args.minutes)):
            raw, synth_s = synthesize(work / label / "raw", minutes, args.hits_per_rev)
            size = session_bytes(raw)
            print(f"{label}: {minutes:g} min, {size / MB:,.0f} MB synthesized in {synth_s:.1f} s")
            first = in_subprocess("readers", str(raw))
            normalized = in_subprocess("normalize", str(raw), str(work / label / "lake"))
            again = in_subprocess("readers", str(raw))  # warm: a 30-min drive is 12 GB
            readers = min(first, again, key=lambda r: r["seconds"])
            rows[label] = (minutes, size, readers, normalized)
            shutil.rmtree(work / label / "lake")
            if label == "short":
                shutil.rmtree(raw)
        minutes, size, readers, normalized = rows["long"]
        r_mbs = size / MB / readers["seconds"]
        n_mbs = size / MB / normalized["seconds"]
        ratio = n_mbs / r_mbs
        print(f"\n{minutes:g}-minute drive, {size / MB:,.0f} MB, hits_per_rev {args.hits_per_rev}")
        print(f"  readers:   {readers['seconds']:8.2f} s  {r_mbs:8.1f} MB/s")
        print(
            f"  normalize: {normalized['seconds']:8.2f} s  {n_mbs:8.1f} MB/s"
            f"  ({normalized['points'] / normalized['seconds'] / 1e6:.1f} M points/s, "
            f"{normalized['rows']:,} rows, {normalized['streams']} streams)"
        )
        print(f"  ratio normalize/readers: {ratio:.2f} (target >= 0.50: {ratio >= 0.5})")
        print("\npeak RSS (fresh subprocess each):")
        for label in ("short", "long"):
            m, s, r, n = rows[label]
            print(
                f"  {m:5g} min ({s / MB:8,.0f} MB): readers {r['max_rss_mb']:7.0f} MB, "
                f"normalize {n['max_rss_mb']:7.0f} MB"
            )
        growth = rows["long"][3]["max_rss_mb"] / rows["short"][3]["max_rss_mb"]
        figure(
            f"NCLT normalize, {minutes:g}-min drive",
            n_mbs,
            r_mbs,
            "MB/s",
            baseline_name="the readers alone",
            peak_rss_mb=normalized["max_rss_mb"],
        )
        figure(f"NCLT normalize peak RSS, {minutes:g} vs {rows['short'][0]:g} min",
               rows["long"][3]["max_rss_mb"], rows["short"][3]["max_rss_mb"], "MB",
               more_is_better=False, baseline_name="the shorter drive")  # fmt: skip
        print(
            f"  normalize RSS long/short: {growth:.2f} "
            f"(length ratio {minutes / rows['short'][0]:g})"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

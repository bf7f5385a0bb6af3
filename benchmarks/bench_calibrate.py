"""The calibrated layer's costs, side by side with their baselines in one run.

    python benchmarks/bench_calibrate.py --smoke                  # seconds, for CI
    python benchmarks/bench_calibrate.py                          # 20 M points; a 3-min drive
    python benchmarks/bench_calibrate.py --minutes 3 30 --hits 8000   # RSS vs drive length

1. Transform: lidar points into base_link with `geometry.transform_points` (float32, in
   place) against the naive path, scipy `Rotation.apply` per scan (float64 in, float32 out),
   on the same points in the same process, one thread (OMP/OpenBLAS pinned to 1).
2. Layer: for synthetic NCLT drives of the given lengths, the normalized layer and then the
   calibrated layer, each in a fresh subprocess: wall time and peak RSS (VmHWM) of each, so
   `calibrate / normalize` is the issue's "at most as much time as its normalized layer" and
   the RSS of the longest drive against the shortest is its memory figure.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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

HERE = Path(__file__).resolve()


def bench_transform(points: int, per_scan: int, repeats: int) -> None:
    from scipy.spatial.transform import Rotation

    from bridge_lake.geometry import Transform, transform_points

    rng = np.random.default_rng(0)
    az = rng.uniform(0, 2 * np.pi, points)
    r = rng.uniform(2, 80, points)
    xyz = np.stack([r * np.cos(az), r * np.sin(az), rng.uniform(-2, 8, points)]).astype(np.float32)
    x, y, z = xyz
    t = Transform.from_rpy([0.002, 0.004, 0.957], [180.807, -0.166, 90.703], degrees=True)
    out = np.empty_like(xyz)

    def ours() -> None:
        transform_points(t.matrix, t.translation, x, y, z, out=out)

    rot = Rotation.from_matrix(t.matrix)

    def naive() -> None:
        for lo in range(0, points, per_scan):
            p = xyz[:, lo : lo + per_scan].T.astype(np.float64)
            out[:, lo : lo + per_scan] = (rot.apply(p) + t.translation).T.astype(np.float32)

    best = {}
    for name, fn in (("ours", ours), ("naive", naive)):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        best[name] = min(times)
    check = transform_points(t.matrix, t.translation, x, y, z)
    naive()
    assert np.abs(check - out).max() < 1e-4
    rate = {k: points / v / 1e6 for k, v in best.items()}
    print(
        f"transform {points / 1e6:.0f} M points, {per_scan} per scan, best of {repeats}, 1 thread"
    )
    print(f"  {'path':28} {'s':>7} {'M points/s':>11}")
    print(f"  {'ours (transform_points)':28} {best['ours']:7.3f} {rate['ours']:11.1f}")
    print(f"  {'naive (per-scan Rotation)':28} {best['naive']:7.3f} {rate['naive']:11.1f}")
    print(f"  ratio ours / naive: {best['naive'] / best['ours']:.1f}x")
    figure("calibrate: lidar points into base_link, 1 thread", rate["ours"], rate["naive"],
           "M points/s", baseline_name="scipy Rotation.apply per scan")  # fmt: skip


def child(step: str, root: Path, drive: str, source: str) -> dict:
    from bridge_lake.calibrate.drive import calibrate_drive
    from bridge_lake.lake import Lake
    from bridge_lake.landing import LandingZone
    from bridge_lake.normalize.drive import normalize_drive

    lake = Lake(str(root / "lake"))
    start = peak_rss_mb()
    t0 = time.perf_counter()
    if step == "normalize":
        result, ok = normalize_drive(LandingZone(str(root / "landing")), lake, drive, source)
        rows = sum(result.table_rows.values())
    else:
        result, ok = calibrate_drive(lake, drive)
        rows = sum(result.table_rows.values())
    return {
        "seconds": time.perf_counter() - t0,
        "rows": rows,
        "published": ok,
        "import_mb": start,
        "peak_mb": peak_rss_mb(),
    }


def run_child(step: str, root: Path, drive: str, source: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", step, str(root), drive, source],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_layer(minutes_list: list[float], hits: int, tmp: Path) -> None:
    from bridge_lake.lake import Lake
    from bridge_lake.landing import LandingZone
    from bridge_lake.manifest import build_manifest
    from bridge_lake.synth import synthesize

    print(f"\nlayer on synthetic NCLT drives ({hits} hits per revolution), fresh process each")
    print(
        f"  {'minutes':>7} {'points':>12} {'normalize s':>11} {'calibrate s':>11} {'ratio':>6} "
        f"{'norm MB':>8} {'cal MB':>7}"
    )
    peaks = []
    for minutes in minutes_list:
        root = tmp / f"m{minutes:g}"
        (d,) = synthesize(
            root / "landing", drives=1, minutes=minutes, source="nclt", nclt_hits_per_rev=hits
        )
        lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
        m = build_manifest(landing, d.drive_id)
        lake.write_partition("raw", "manifest", d.drive_id, m.files_table())
        lake.write_partition("raw", "drives", d.drive_id, m.drive_table())
        norm = run_child("normalize", root, d.drive_id, "nclt")
        cal = run_child("calibrate", root, d.drive_id, "nclt")
        assert norm["published"] and cal["published"]
        n_points = sum(  # the calibrated layer keeps no second copy of the points (issue 30)
            b.num_rows for b in lake.iter_batches("normalized", "lidar_points", d.drive_id)
        )
        peaks.append(cal["peak_mb"])
        figure(f"calibrate layer, {minutes:g}-min NCLT drive", cal["seconds"], norm["seconds"],
               "s", more_is_better=False, baseline_name="its normalize layer",
               peak_rss_mb=cal["peak_mb"])  # fmt: skip
        print(
            f"  {minutes:7g} {n_points:12,} {norm['seconds']:11.2f} {cal['seconds']:11.2f} "
            f"{cal['seconds'] / norm['seconds']:6.2f} {norm['peak_mb']:8.0f} {cal['peak_mb']:7.0f}"
        )
    if len(peaks) > 1:
        print(f"  calibrate peak RSS, longest / shortest drive: {peaks[-1] / peaks[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--points", type=int, default=20_000_000)
    parser.add_argument("--minutes", type=float, nargs="*", default=[3.0])
    parser.add_argument("--hits", type=int, default=20_000, help="lidar hits per revolution")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        step, root, drive, source = args.child
        print(json.dumps(child(step, Path(root), drive, source)))
        return
    if args.smoke:
        args.points, args.minutes, args.hits = 500_000, [0.1], 1000
    bench_transform(args.points, 50_000, 1 if args.smoke else 5)
    with tempfile.TemporaryDirectory(prefix="bench_calibrate_") as tmp:
        bench_layer(args.minutes, args.hits, Path(tmp))


if __name__ == "__main__":
    main()

"""ADTF read benchmark: our reader vs the vendor's `adtf_file`, and DDL decode to Arrow.

    python benchmarks/bench_adtf.py            # >= 1 GB synthetic drive in a temp dir
    python benchmarks/bench_adtf.py --smoke    # 0.5-minute drive, a few seconds
    python benchmarks/bench_adtf.py --file X.dat

Both readers read every sample and touch every byte of it (crc32 over the buffer; the vendor
buffer must first become `bytes`, which is how its Python API hands data out). The file is
read once before timing so both runs see the page cache; the two readers alternate and the
best of `--repeat` runs counts. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from figures import figure
from peak_rss import peak_rss_mb

from bridge_lake.formats.adtf import open_dat
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.synth.adtf import write_adtf_drive

MB = 1_000_000


def ours(path: Path) -> tuple[int, int, int]:
    n = size = crc = 0
    with open_dat(path) as f:
        for s in f.samples():
            crc = zlib.crc32(s.data, crc)
            size += len(s.data)
            n += 1
    return n, size, crc


def vendor(path: Path) -> tuple[int, int, int]:
    import adtf_file

    sample = adtf_file.ItemType.Sample
    n = size = crc = 0
    reader = adtf_file.create_reader(str(path))
    while (item := reader.get_next_item()) is not None:
        if item.type == sample:
            data = bytes(item.sample.buffer)
            crc = zlib.crc32(data, crc)
            size += len(data)
            n += 1
    return n, size, crc


def timed(fn, path: Path) -> tuple[float, tuple[int, int, int]]:
    start = time.perf_counter()
    result = fn(path)
    return time.perf_counter() - start, result


def warm(path: Path) -> None:
    with path.open("rb") as fh:
        while fh.read(1 << 24):
            pass


def bench_read(path: Path, repeat: int) -> tuple[float, float]:
    warm(path)
    best = {"ours": float("inf"), "vendor": float("inf")}
    results = {}
    for _ in range(repeat):
        for name, fn in (("vendor", vendor), ("ours", ours)):
            seconds, results[name] = timed(fn, path)
            best[name] = min(best[name], seconds)
    if results["ours"] != results["vendor"]:
        raise SystemExit(f"readers disagree: ours {results['ours']} vendor {results['vendor']}")
    n, size, _ = results["ours"]
    file_mb = path.stat().st_size / MB
    print(f"file: {path.name}  {file_mb:.1f} MB, {n} samples, {size / MB:.1f} MB of sample data")
    for name in ("ours", "vendor"):
        s = best[name]
        print(
            f"  {name:6s} {s:7.3f} s  {file_mb / s:8.1f} MB/s (file)  "
            f"{n / s / 1e6:6.3f} M samples/s"
        )
    print(f"  ratio (vendor time / our time): {best['vendor'] / best['ours']:.2f}")
    return file_mb / best["ours"], file_mb / best["vendor"]


def bench_rss(path: Path) -> dict[str, float]:
    """Peak resident memory of a full read, each reader in a fresh process."""
    rss = {}
    for name in ("ours", "vendor"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", name, str(path)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        print(f"  {name:6s} peak RSS of a full read: {float(out):7.1f} MB")
        rss[name] = float(out)
    return rss


def bench_decode(path: Path, repeat: int) -> None:
    with open_dat(path) as f:
        for name in ("can_powertrain", "imu", "lidar_top"):
            stream = f.stream(name)
            start = time.perf_counter()
            table = f.sample_table(name)
            walk = time.perf_counter() - start
            rows = len(table["offset"])
            best = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                decoded = decode(
                    stream.ddl,
                    stream.ddl_struct,
                    f.view,
                    table["offset"],
                    table["length"],
                    layout="deserialized",
                )
                best = min(best, time.perf_counter() - start)
            assert decoded.num_rows == rows
            if name == "lidar_top":
                points = int(decoded.column("ui32PointCount").to_numpy().sum())
                print(
                    f"  decode {name:15s} {points:9d} points  {points / best / 1e6:6.2f} M points/s"
                )
                continue
            print(
                f"  decode {name:15s} {rows:9d} records  {rows / best / 1e6:7.2f} M records/s "
                f"(decode only)  {rows / (best + walk) / 1e6:6.2f} M records/s (incl. "
                f"{walk:.2f} s chunk walk)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small file, a few seconds")
    parser.add_argument("--file", type=Path, help="benchmark an existing recording")
    parser.add_argument("--minutes", type=float, default=38.0, help="synthetic drive length")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        {"ours": ours, "vendor": vendor}[args.child[0]](Path(args.child[1]))
        print(peak_rss_mb())
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.file:
            path = args.file
        else:
            minutes = 0.5 if args.smoke else args.minutes
            start = time.perf_counter()
            (path,) = write_adtf_drive(Path(tmp), minutes=minutes, seed=1)
            took = time.perf_counter() - start
            size_mb = path.stat().st_size / MB
            print(f"synthesized {minutes:g} min drive: {size_mb:.1f} MB in {took:.1f} s")
        ours_mb_s, vendor_mb_s = bench_read(path, 1 if args.smoke else args.repeat)
        rss = bench_rss(path)
        figure("ADTF read, every sample", ours_mb_s, vendor_mb_s, "MB/s",
               baseline_name="adtf_file (vendor)", peak_rss_mb=rss["ours"])  # fmt: skip
        with open_dat(path) as f:
            synthetic = {"can_powertrain", "imu", "lidar_top"} <= {s.name for s in f.streams}
        if synthetic:
            bench_decode(path, 1 if args.smoke else args.repeat)


if __name__ == "__main__":
    main()

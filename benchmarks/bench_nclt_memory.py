"""Peak RSS and wall time of the NCLT CSV and Hokuyo readers on given files.

    python benchmarks/bench_nclt_memory.py --smoke   # seconds: files of a tiny synthetic drive
    python benchmarks/bench_nclt_memory.py <session>/odometry_cov_100hz.csv
    python benchmarks/bench_nclt_memory.py --runs 3 <session>/hokuyo_30m.bin <cut>/hokuyo_30m.bin

The reader comes from the file name (nclt_kind): a CSV is parsed with load_table (the typed
frame is kept, as the normalizer keeps it), a Hokuyo binary is iterated with iter_hokuyo
(nothing kept). Every run is a fresh subprocess, so its peak RSS (VmHWM, peak_rss.py) is that run's
alone. `import` is the peak after importing the libraries and before the file is opened:
peak - import is what reading the file cost. Issue 6 wants that independent of the drive's
length, so give a file and a cut of it (e.g. `head -n` of a CSV) and compare. Every figure
printed is measured in this run; the files should be in the page cache (run twice).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peak_rss import peak_rss_mb

MB = 1e6
HERE = Path(__file__).resolve()


def child(path: Path) -> dict[str, float]:
    """Read `path` with its reader; figures of this process only."""
    from bridge_lake.formats.nclt import iter_hokuyo, load_table
    from bridge_lake.formats.nclt.kinds import nclt_kind

    kind = nclt_kind(path.name)
    imported = peak_rss_mb()
    t0 = time.perf_counter()
    if kind in ("hokuyo_30m", "hokuyo_4m"):
        records = sum(b.num_rows for b in iter_hokuyo(kind, path))
    elif kind is not None and path.suffix == ".csv":
        table = load_table(kind, path)
        records = table.frame.height + table.quarantine.height
    else:
        raise SystemExit(f"{path.name}: not an NCLT CSV or Hokuyo file")
    seconds = time.perf_counter() - t0
    return {"records": records, "seconds": seconds, "import_mb": imported, "peak_mb": peak_rss_mb()}


def in_subprocess(path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=1, help="fresh processes per file")
    parser.add_argument("--smoke", action="store_true", help="files of a 0.3-minute drive")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    with tempfile.TemporaryDirectory(prefix="bench_nclt_memory_") as tmp:
        files = _smoke_files(Path(tmp)) if args.smoke else args.files
        if not files:
            parser.error("give NCLT CSV or Hokuyo files, or --smoke")
        _report(files, args.runs)


def _smoke_files(tmp: Path) -> list[Path]:
    from bridge_lake.synth.nclt import write_nclt_drive

    write_nclt_drive(tmp, minutes=0.3, seed=1, hits_per_rev=500)
    return sorted(tmp.glob("*/odometry_cov_100hz.csv")) + sorted(tmp.glob("*/hokuyo_30m.bin"))


def _report(files: list[Path], runs_per_file: int) -> None:
    print(f"{'file':28} {'MB':>8} {'records':>9} {'s':>7} {'import MB':>10} {'peak MB':>8}")
    for path in files:
        runs = [in_subprocess(path) for _ in range(runs_per_file)]
        best = min(r["seconds"] for r in runs)
        peak = max(r["peak_mb"] for r in runs)
        print(
            f"{path.name:28} {path.stat().st_size / MB:8.1f} {runs[0]['records']:9,} "
            f"{best:7.2f} {runs[0]['import_mb']:10.0f} {peak:8.0f}"
        )


if __name__ == "__main__":
    main()

"""Scene rules over whole drives: the camera statistics, every rule and the catalog, timed.

    python benchmarks/bench_scenes.py --smoke            # seconds, for CI (1.5-minute drives)
    python benchmarks/bench_scenes.py                    # the issue's figures: 30-minute drives
    python benchmarks/bench_scenes.py --minutes 3 30     # any lengths

For each source (ADTF, NCLT) a synthetic drive of each length, with its planted events, is
written, normalized and calibrated by the library (not timed). Then, on that drive:

1. camera statistics: every frame decoded and measured (H.264 for ADTF, six TIFF cameras
   for NCLT), written to scenes/camera_stats;
2. every rule of sql/scenes/ with the drive's parameters on one DuckDB connection over the
   lake's views, best of --repeats runs each, with the rows of the table it reads;
3. the catalog: merge, pad, clip and write; and `build_scene_catalog` end to end (fresh
   connection, rules loaded and checked, everything written).

The scenes found are printed against the planted events.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from figures import figure


def build(root: Path, source: str, minutes: float) -> tuple[object, str, list[str]]:
    """A drive of `source` in a fresh lake, normalized and calibrated; its planted kinds."""
    from bridge_lake.calibrate.drive import calibrate_drive
    from bridge_lake.drive_meta import DRIVE_YAML, DriveMeta
    from bridge_lake.lake import Lake
    from bridge_lake.landing import LandingZone
    from bridge_lake.manifest import build_manifest
    from bridge_lake.normalize.drive import normalize_drive
    from bridge_lake.synth import adtf, nclt

    drive = f"{source}-bench"
    path = root / "landing" / drive
    path.mkdir(parents=True)
    if source == "adtf":  # lidar density does not matter to the rules
        adtf.write_adtf_drive(path, minutes=minutes, seed=3, lidar_points=200)
        meta = DriveMeta(vehicle="test-vehicle-01", source="adtf")
        kinds = [e.kind for e in adtf.planted_events(minutes, 3)]
    else:
        files = nclt.write_nclt_drive(path, minutes=minutes, seed=3, hits_per_rev=1000)
        meta = DriveMeta(vehicle="nclt-segway", source="nclt")
        truth = json.loads(next(f for f in files if f.name == nclt.TRUTH_FILE).read_text())
        kinds = [e["kind"] for e in truth["events"]]
    (path / DRIVE_YAML).write_text(meta.to_yaml())
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    m = build_manifest(landing, drive)
    lake.write_partition("raw", "manifest", drive, m.files_table())
    lake.write_partition("raw", "drives", drive, m.drive_table())
    assert normalize_drive(landing, lake, drive, source)[1]
    assert calibrate_drive(lake, drive)[1]
    return lake, drive, sorted(kinds)


def rows_of(lake, layer: str, table: str, drive: str) -> int:
    if not lake.has_partition(layer, table, drive):
        return 0
    import pyarrow.parquet as pq

    return sum(
        pq.ParquetFile(f).metadata.num_rows for f in lake.partition_files(layer, table, drive)
    )


def bench_drive(lake, drive: str, source: str, minutes: float, kinds: list[str], repeats: int):
    from bridge_lake.lake.query import connect
    from bridge_lake.scenes.camera_stats import write_camera_stats
    from bridge_lake.scenes.catalog import build_scene_catalog, drive_extent, merge_hits
    from bridge_lake.scenes.rules import hits_table, load_params, load_rules, run_rule

    rules, params = load_rules(), load_params()
    print(f"\n{source} drive, {minutes:g} min")
    t0 = time.perf_counter()
    stats = write_camera_stats(lake, drive, params.max_rate_hz)
    cam_s = time.perf_counter() - t0
    print(
        f"  camera_stats    {cam_s:7.2f} s   {stats.frames:,} frames "
        f"({stats.frames / cam_s:,.0f}/s), {stats.undecoded} undecoded"
    )
    con = connect(lake)
    runs, total = [], 0.0
    print(f"  {'rule':15} {'best s':>7} {'hits':>5}  reads")
    for rule in rules:
        values = params.for_rule(rule.name, source)
        best = None
        for _ in range(repeats):
            run = run_rule(con, rule, drive, values)
            best = run if best is None or run.seconds < best.seconds else best
        runs.append(best)
        total += best.seconds
        reads = ", ".join(
            f"{layer}/{table} {rows_of(lake, layer, table, drive):,}" for layer, table in rule.reads
        )
        print(f"  {rule.name:15} {best.seconds:7.3f} {best.hits.num_rows:5d}  {reads}")
    print(f"  {'all rules':15} {total:7.3f}")
    t0 = time.perf_counter()
    catalog = merge_hits(drive, hits_table(runs), params.pad_ns, drive_extent(con, drive))
    lake.write_partition("scenes", "catalog", drive, catalog)
    print(f"  {'catalog':15} {time.perf_counter() - t0:7.3f}   {catalog.num_rows} scenes")
    con.close()
    t0 = time.perf_counter()
    result = build_scene_catalog(lake, drive)
    whole = time.perf_counter() - t0
    steps = ", ".join(f"{k} {v:.2f}" for k, v in result.seconds.items())
    print(f"  {'end to end':15} {whole:7.2f} s ({steps})")
    figure(f"scene rules (all {len(rules)}), {source} {minutes:g}-min drive", total, None, "s")
    figure(f"scene catalog end to end, {source} {minutes:g}-min drive", whole, None, "s")
    tags = sorted({t for ts in result.catalog.column("tags").to_pylist() for t in ts})
    found = [k for k in kinds if k in tags]
    print(f"  planted {len(kinds)}: {', '.join(kinds)}; found {len(found)}; scene tags: {tags}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="1.5-minute drives, for CI")
    parser.add_argument("--minutes", type=float, nargs="*", default=[30.0])
    parser.add_argument("--sources", nargs="*", default=["adtf", "nclt"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.smoke:
        args.minutes, args.repeats = [1.5], 1
    for minutes in args.minutes:
        for source in args.sources:
            with tempfile.TemporaryDirectory(prefix="bench_scenes_") as tmp:
                t0 = time.perf_counter()
                lake, drive, kinds = build(Path(tmp), source, minutes)
                print(
                    f"\n[{source}, {minutes:g} min: synthesized, normalized and calibrated in "
                    f"{time.perf_counter() - t0:.0f} s (not part of the figures)]"
                )
                bench_drive(lake, drive, source, minutes, kinds, args.repeats)


if __name__ == "__main__":
    main()

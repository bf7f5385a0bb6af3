"""Scene sets end to end: a scene (trimmed MCAP + manifest + lake snapshot) against a plain
export of the same window, then fault injection and replay-check, in one run.

    python benchmarks/bench_scene_sets.py --smoke     # seconds, for CI
    python benchmarks/bench_scene_sets.py             # the issue's figures

The lake is bench_export's (IMU at 1 kHz and a 10 Hz lidar, generated tables, no recording
synthesis) plus a scene catalog of evenly spaced windows. Each round exports every window
plainly and as a scene, alternating, so drift on the VM hits both; the ratio is the median
over rounds of (scene time / plain time). The issue asks for scene throughput within 20 % of
the plain export. Then:

2. the lake snapshot: fingerprints from the Parquet footers (what manifests record) against
   hashing every byte of the same partitions;
3. fault injection (drop, delay, reorder, clock offset on the IMU, a missing lidar span) and
   replay-check (data, timing, content against the clean scene) per scene, in MB/s of file.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from bench_export import T0, build_lake
from figures import figure

CATALOG = pa.schema(
    [
        ("scene_id", pa.string()),
        ("t_start_ns", pa.int64()),
        ("t_end_ns", pa.int64()),
        ("tags", pa.list_(pa.string())),
        ("score", pa.float64()),
        ("rules", pa.list_(pa.string())),
        ("rule_hashes", pa.list_(pa.string())),
    ]
)
FAULTS = "imu:drop=1%,imu:delay=30ms,imu:reorder=3@window=20ms,lidar:missing=300ms"


def write_catalog(lake, drive: str, scenes: int, seconds: float, span_s: float) -> None:
    step = (span_s - seconds) / max(scenes - 1, 1)
    rows = [
        {
            "scene_id": f"{drive}-{i:03d}",
            "t_start_ns": T0 + round(i * step * 1e9),
            "t_end_ns": T0 + round((i * step + seconds) * 1e9),
            "tags": ["bench"],
            "score": float(i),
            "rules": ["bench.sql"],
            "rule_hashes": ["0" * 64],
        }
        for i in range(scenes)
    ]
    lake.write_partition("scenes", "catalog", drive, pa.Table.from_pylist(rows, CATALOG))


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_scenes(lake, drive: str, root: Path, rounds: int) -> list:
    from bridge_lake.export.exporter import ExportRequest, export_drive
    from bridge_lake.scenes.sets import Snapshots, build_scene, read_catalog

    mapping = root / "mapping.yaml"
    scenes = read_catalog(lake, drive)
    plain_dir, scene_dir = root / "plain", root / "scenes"
    plain_dir.mkdir(exist_ok=True)
    scene_dir.mkdir(exist_ok=True)
    ratios, plain_s, scene_s, made = [], [], [], []
    nbytes = messages = 0
    warm = ExportRequest(spans=[(scenes[0].t_start_ns, scenes[0].t_end_ns)], mapping=mapping)
    export_drive(lake, drive, plain_dir / "warm-up.mcap", warm)  # imports, page cache
    (root / "warm-up").mkdir(exist_ok=True)
    build_scene(lake, scenes[0], root / "warm-up", mapping=mapping)
    for r in range(rounds):
        t_plain = t_scene = 0.0
        snapshots = Snapshots(lake, drive)  # per scene set, as the asset does
        for s in scenes:
            req = ExportRequest(spans=[(s.t_start_ns, s.t_end_ns)], mapping=mapping, force=True)
            out = plain_dir / f"{s.scene_id}.mcap"
            dt, _ = timed(lambda: export_drive(lake, drive, out, req))  # noqa: B023
            t_plain += dt
            dt, f = timed(
                lambda: build_scene(lake, s, scene_dir, mapping=mapping, snapshots=snapshots)  # noqa: B023
            )
            t_scene += dt
            if r == 0:
                made.append(f)
                nbytes += f.bytes
                messages += f.messages
                assert out.read_bytes() == f.path.read_bytes()
        ratios.append(t_scene / t_plain)
        plain_s.append(t_plain)
        scene_s.append(t_scene)
    p, s = statistics.median(plain_s), statistics.median(scene_s)
    print(
        f"\n1. {len(scenes)} scenes, {messages:,} messages, {nbytes / 1e6:.1f} MB of MCAP "
        f"(median of {rounds} rounds)"
    )
    print(f"  {'path':44} {'s':>7} {'MB/s':>8} {'msgs/s':>10}")
    print(f"  {'plain export of each window':44} {p:7.3f} {nbytes / 1e6 / p:8.1f} {messages / p:10,.0f}")  # fmt: skip
    print(f"  {'scene: export + manifest + snapshot':44} {s:7.3f} {nbytes / 1e6 / s:8.1f} {messages / s:10,.0f}")  # fmt: skip
    ratio = statistics.median(ratios)
    print(f"  scene / plain time: {ratio:.3f} (per round: {', '.join(f'{x:.3f}' for x in ratios)})")
    print(f"  within 20 %: {'yes' if ratio <= 1.2 else 'NO'}")
    figure("scene sets: scene export (MCAP + manifest + snapshot)", nbytes / 1e6 / s,
           nbytes / 1e6 / p, "MB/s", baseline_name="plain export of the same windows")  # fmt: skip
    from bridge_lake.scenes.faults import sha256_file

    t_sha, _ = timed(lambda: [sha256_file(f.path) for f in made])
    print(f"  of which sha256 of the files: {t_sha:.3f} s ({t_sha / p:.1%} of the plain export)")
    return made


def bench_snapshot(lake, drive: str, tables: list[str]) -> None:
    from bridge_lake.scenes.sets import table_snapshot

    size = sum(table_snapshot(lake, t, drive).bytes for t in tables)
    footer, _ = timed(lambda: [table_snapshot(lake, t, drive) for t in tables])
    full, _ = timed(lambda: [table_snapshot(lake, t, drive, content=True) for t in tables])
    print(f"\n2. lake snapshot of {len(tables)} partitions, {size / 1e6:.1f} MB of Parquet")
    print(f"  {'footers (name, size, footer bytes)':44} {footer * 1e3:9.1f} ms")
    print(f"  {'every byte (sha256)':44} {full * 1e3:9.1f} ms  ({full / footer:.0f}x)")
    figure("scene sets: lake snapshot from Parquet footers", footer * 1e3, full * 1e3, "ms",
           more_is_better=False, baseline_name="sha256 of every byte")  # fmt: skip


def bench_faults(made: list, root: Path) -> None:
    from bridge_lake.scenes.faults import VariantSpec, parse_compact
    from bridge_lake.scenes.replay import replay_check
    from bridge_lake.scenes.sets import build_variant

    variant = VariantSpec("bench", tuple(parse_compact(FAULTS)), seed=1)
    nbytes = sum(f.bytes for f in made)
    t_inject, variants = timed(lambda: [build_variant(f, variant, f.path.parent) for f in made])
    t_clean, reports = timed(lambda: [replay_check(f.path) for f in made])
    t_var, vreports = timed(lambda: [replay_check(v.path) for v in variants])
    assert all(r.ok for r in reports + vreports)
    faults = sum(v.manifest["faults"]["count"] for v in variants)
    print(f"\n3. fault injection and replay-check, {len(made)} scenes ({FAULTS})")
    print(f"  {'step':44} {'s':>7} {'MB/s':>8}")
    print(f"  {f'inject ({faults} faults)':44} {t_inject:7.3f} {nbytes / 1e6 / t_inject:8.1f}")  # fmt: skip
    print(f"  {'replay-check clean scenes':44} {t_clean:7.3f} {nbytes / 1e6 / t_clean:8.1f}")
    print(f"  {'replay-check variants (vs clean scene)':44} {t_var:7.3f} {nbytes / 1e6 / t_var:8.1f}")  # fmt: skip
    figure("scene sets: replay-check of the variants", nbytes / 1e6 / t_var, None, "MB/s")
    found = sum(r.count("found") for r in vreports)
    print(f"  faults found {found}/{faults}, unexpected {sum(r.count('unexpected') for r in vreports)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--seconds", type=float, default=60.0, help="drive length")
    parser.add_argument("--points", type=int, default=70_016, help="points per cloud")
    parser.add_argument("--scenes", type=int, default=6)
    parser.add_argument("--scene-seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.points, args.scenes, args.scene_seconds, args.rounds = 6, 4_096, 3, 1, 5
    with tempfile.TemporaryDirectory(prefix="bench_scene_sets_") as tmp:
        root = Path(tmp)
        t, (lake, drive) = timed(
            lambda: build_lake(
                root,
                imu_rows=int(args.seconds * 1000),
                scans=int(args.seconds * 10),
                points=args.points,
            )
        )
        write_catalog(lake, drive, args.scenes, args.scene_seconds, args.seconds - 0.2)
        print(f"lake: {args.seconds:g} s drive, IMU 1 kHz, lidar 10 Hz x {args.points:,} points ({t:.1f} s to build)")  # fmt: skip
        made = bench_scenes(lake, drive, root, args.rounds)
        tables = list(made[0].manifest["lake_snapshot"]["tables"])
        bench_snapshot(lake, drive, tables)
        bench_faults(made, root)


if __name__ == "__main__":
    main()

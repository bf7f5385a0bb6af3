"""The landing-zone sensor over a large fleet: time per tick and cursor size.

    python benchmarks/bench_sensor.py --smoke          # 100 drives, for CI
    python benchmarks/bench_sensor.py                  # the issue's figure: 10,000 drives
    python benchmarks/bench_sensor.py --drives 2000 --s3   # landing zone on moto's S3 server

A landing zone of --drives folders (drive.yaml and two small recordings each, plus an upload
tool's scratch folder and a folder with a bad name) is watched by `landing_zone_sensor` on a
SQLite Dagster instance, tick after tick, as the daemon would: each tick's result is applied
to the instance (partitions added, asset events recorded) before the next. Phases:

1. discover: ticks until every drive was requested (once each);
2. steady: three ticks over the unchanged zone (no request);
3. change: --changed drives get a new file and --new drives arrive; ticks until exactly those
   are requested;
4. steady again.

Per tick: the sensor's evaluation time (what Dagster's 60 s sensor timeout bounds), the
time to apply its result to the instance (daemon work), requests, asset events and the size
of the cursor it stores. The run fails if a drive is requested twice, missed, or requested
without a change. For scale, the daemon's own work per request is measured too: creating a
run of lake_job for a drive (--run-cost runs, not in --smoke).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from bridge_lake.defs.resources import LandingZoneResource
from bridge_lake.defs.sensors import landing_zone_sensor

BAD = {"_upload_tmp/part.dat": b"x", "bad name/x.dat": b"x", "README.txt": b"x"}


@dataclass
class Tick:
    phase: str
    seconds: float
    apply_seconds: float
    requested: list[str]
    events: int
    cursor_bytes: int
    skip: str
    cursor: str | None


def write_drives(root: Path, first: int, count: int) -> list[str]:
    ids = []
    for i in range(first, first + count):
        drive = root / f"drive-{i:05d}"
        (drive / "rec").mkdir(parents=True)
        (drive / "drive.yaml").write_text("vehicle: test-vehicle-01\nsource: adtf\n")
        (drive / "rec" / "front.dat").write_bytes(b"x" * (i % 97 + 1))
        (drive / "gps.csv").write_text(f"{i},0\n")
        ids.append(drive.name)
    return ids


class Zone:
    """The landing zone on local disk, or mirrored to a bucket on a moto server (its own
    process, so the server does not share the sensor's interpreter lock)."""

    def __init__(self, local: Path, s3: bool) -> None:
        self.local, self.s3, self.server = local, s3, None
        if not s3:
            self.resource = LandingZoneResource(root=str(local))
            return
        from s3fs import S3FileSystem

        os.environ.update(
            AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
        )
        port = _free_port()
        self.server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(port)
        options = {"client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
        self.fs = S3FileSystem(**options)
        self.fs.mkdir("bench-sensor")
        self.resource = LandingZoneResource(
            root="s3://bench-sensor/fleet/landing", storage_options=options
        )

    def sync(self, drives: list[str]) -> None:
        """Upload these drive folders (all of them the first time)."""
        if not self.s3:
            return
        files = [p for d in drives for p in sorted((self.local / d).rglob("*")) if p.is_file()]
        remote = [f"bench-sensor/fleet/landing/{p.relative_to(self.local)}" for p in files]
        self.fs.put([str(p) for p in files], remote)  # one call: uploads run concurrently

    def add_bad(self) -> None:
        for rel, data in BAD.items():
            (self.local / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.local / rel).write_bytes(data)
            if self.s3:
                self.fs.pipe_file(f"bench-sensor/fleet/landing/{rel}", data)

    def close(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"bench_sensor: moto server did not start on port {port}")


def tick(instance: dg.DagsterInstance, zone: Zone, cursor: str | None, phase: str) -> Tick:
    ctx = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"landing": zone.resource}
    )
    t0 = time.perf_counter()
    result = landing_zone_sensor(ctx)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    for req in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    events = list(getattr(result, "asset_events", None) or [])
    for event in events:
        instance.report_runless_asset_event(event)
    apply_seconds = time.perf_counter() - t0
    skip = result.skip_reason.skip_message if result.skip_reason else ""
    return Tick(
        phase,
        seconds,
        apply_seconds,
        [r.partition_key for r in result.run_requests],
        len(events),
        len((result.cursor or "").encode()),
        skip,
        result.cursor,
    )


def run(drives: int, changed: int, new: int, s3: bool) -> list[Tick]:
    ticks: list[Tick] = []
    with tempfile.TemporaryDirectory(prefix="bench_sensor_") as tmp, dg.instance_for_test() as inst:
        local = Path(tmp) / "landing"
        t0 = time.perf_counter()
        ids = write_drives(local, 0, drives)
        zone = Zone(local, s3)
        try:
            zone.sync(ids)
            zone.add_bad()
            print(
                f"landing zone: {drives:,} drives ({3 * drives:,} files) "
                f"{'on S3 (moto)' if s3 else 'on local disk'}, made in "
                f"{time.perf_counter() - t0:.1f} s",
                flush=True,
            )
            cursor = None

            def step(phase: str) -> Tick:
                nonlocal cursor
                t = tick(inst, zone, cursor, phase)
                cursor = t.cursor
                ticks.append(t)
                return t

            requested: list[str] = []
            for _ in range(drives // 100 + 10):
                requested += step("discover").requested
                if len(requested) >= drives:
                    break
            _expect(sorted(requested) == ids, "discover: every drive requested exactly once")
            for _ in range(3):
                _expect(step("steady").requested == [], "steady: nothing requested")
            touched = ids[:: max(1, drives // changed)][:changed]
            for d in touched:
                (local / d / "late.dat").write_bytes(b"late")
            arrived = write_drives(local, drives, new)
            zone.sync(touched + arrived)
            again: list[str] = []
            for _ in range(6):
                again += step("change").requested
                if len(again) >= changed + new:
                    break
            _expect(sorted(again) == sorted(touched + arrived), "change: exactly those requested")
            _expect(step("steady").requested == [], "steady again: nothing requested")
        finally:
            zone.close()
    return ticks


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"bench_sensor: FAILED: {what}")


def run_cost(count: int) -> None:
    """Seconds to create one run of lake_job (what the daemon does per run request) on the
    same kind of instance, beside the observation each request adds."""
    from bridge_lake.definitions import defs
    from bridge_lake.defs.landing import observation

    job = defs.resolve_job_def("lake_job")
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("drives", [f"d{i}" for i in range(count)])
        t0 = time.perf_counter()
        for i in range(count):
            inst.report_runless_asset_event(observation(f"d{i}", "fp", 1, 1))
        obs = (time.perf_counter() - t0) / count
        t0 = time.perf_counter()
        for i in range(count):
            inst.create_run_for_job(job_def=job, tags={"dagster/partition": f"d{i}"})
        run = (time.perf_counter() - t0) / count
        events = len(inst.get_records_for_run(inst.get_runs(limit=1)[0].run_id).records)
    print(
        f"per request: one observation {obs * 1e3:.0f} ms; creating the lake_job run "
        f"{run * 1e3:.0f} ms ({events} events), mean of {count}"
    )


def report(ticks: list[Tick]) -> None:
    print(
        f"\n{'tick':>4} {'phase':9} {'sensor s':>9} {'apply s':>8} {'requests':>8} "
        f"{'events':>7} {'cursor B':>9}  skip reason"
    )
    for i, t in enumerate(ticks, 1):
        print(
            f"{i:4d} {t.phase:9} {t.seconds:9.3f} {t.apply_seconds:8.2f} {len(t.requested):8d} "
            f"{t.events:7d} {t.cursor_bytes:9,d}  {t.skip[:60]}"
        )
    steady = [t.seconds for t in ticks if t.phase == "steady"]
    print(
        f"\nmax tick {max(t.seconds for t in ticks):.3f} s; steady tick "
        f"{statistics.median(steady):.3f} s (median of {len(steady)}); max cursor "
        f"{max(t.cursor_bytes for t in ticks):,} B; last cursor {ticks[-1].cursor_bytes:,} B; "
        f"ticks to request every drive {sum(t.phase == 'discover' for t in ticks)}"
    )


def main() -> None:
    logging.getLogger("dagster").setLevel(logging.ERROR)  # the rejected folder, every tick
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="100 drives, for CI")
    parser.add_argument("--drives", type=int, default=10_000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--new", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="landing zone on moto's S3 server")
    parser.add_argument("--run-cost", type=int, default=5, help="runs created for scale")
    args = parser.parse_args()
    if args.smoke:
        args.drives, args.run_cost = 100, 0
    report(run(args.drives, args.changed, args.new, args.s3))
    if args.run_cost:
        run_cost(args.run_cost)


if __name__ == "__main__":
    main()

"""`bridge-lake live`: lag at the demo ADTF drive's rate, throughput when the recording is
appended as fast as the disk takes it, memory against the recording's length.

    python benchmarks/bench_live.py --smoke     # 6 s lag run; throughput on 6 s and 18 s
    python benchmarks/bench_live.py             # 60 s lag run; throughput on 1 and 3 minutes

Lag: the project's recorder (`python -m bridge_lake.synth.record --speed 1`, flushing per
chunk) re-records a synthetic demo drive (H.264 camera 15 fps, lidar 10 Hz with 2000
points, 2 CAN buses ~500 frames/s each, IMU 100 Hz, GNSS 10 Hz) at real-time pace and logs
CLOCK_MONOTONIC after each chunk's flush; `bridge-lake live` (its own process) follows the
file, a Foxglove WebSocket client (`websockets`, this process) logs CLOCK_MONOTONIC at each
message's arrival. Lag = arrival - flush of the chunk with that log time (chunk times are on
the epoch: log time = chunk time). Baseline: the issue's target, 50 ms.

Keeping up: the bridge (its own process: follower, normalizer jobs, builders, live MCAP; no
client) catches up with a finished file, i.e. bytes arriving faster than it can read them,
on a lidar-heavy drive (8,000 points a scan at smoke size, 40,000 at full size): MB of ADTF
file per CPU second, beside the reader alone (`open_dat().samples()`) and the follower
alone; once with the camera kept as H.264 (CompressedVideo), once decoded to RGB Images
(the default mapping, as the offline export does). CPU seconds from the first poll: the
bridge's warm-up (message definitions, ~0.1 CPU s) is done before, as a bridge started
before the recording does it, and printed apart. Two bridges on two copies in two
processes give the scaling.

Memory: peak RSS (VmHWM) of the in-process bridge on a drive and on one 3x as long.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from figures import figure
from peak_rss import peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
RECORDER_1X = 1_200
"""MB/s of the recorder the issue sizes against (8 cameras plus radar)."""


def _drive(root: Path, minutes: float, seed: int, points: int = 2000) -> Path:
    from bridge_lake.synth.adtf import write_adtf_drive
    from bridge_lake.synth.record import record

    folder = root / f"src_{minutes}_{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    [src] = write_adtf_drive(folder, minutes=minutes, seed=seed, lidar_points=points)
    rec = root / f"rec_{minutes}_{seed}.dat"
    record(src, rec, speed=0)  # with inline type chunks, as a recorder writes
    return rec


async def _client(url: str, arrivals: list[tuple[int, int]]) -> None:
    import websockets

    subs: dict[int, str] = {}
    async with websockets.connect(url, subprotocols=["foxglove.websocket.v1"]) as ws:
        async for frame in ws:
            now = time.monotonic_ns()
            if isinstance(frame, str):
                msg = json.loads(frame)
                if msg.get("op") == "advertise":
                    new = []
                    for ch in msg["channels"]:
                        subs[len(subs) + 1] = ch["topic"]
                        new.append({"id": len(subs), "channelId": ch["id"]})
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": new}))
                continue
            if frame[0] != 1:  # 2: the server's time
                continue
            _, sub, t = struct.unpack_from("<BIQ", frame)
            if subs[sub] != "/tf_static":
                arrivals.append((t, now))


def lag(root: Path, src: Path) -> np.ndarray:
    """Lags in ns of every message of a real-time recording (see module)."""
    target, log = root / "live.dat", root / "flush.npy"
    cmd = [sys.executable, "-m", "bridge_lake.cli", "live", str(target), "--port", "0"]
    cmd += ["--idle-s", "2", "--catalog-from", str(src)]
    bridge = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = bridge.stdout.readline().decode().split()[1]  # type: ignore[union-attr]
    arrivals: list[tuple[int, int]] = []
    client = threading.Thread(target=lambda: asyncio.run(_client(url, arrivals)))
    client.start()
    time.sleep(0.5)
    rec = [sys.executable, "-m", "bridge_lake.synth.record", str(src), str(target)]
    subprocess.run([*rec, "--speed", "1", "--log", str(log)], env=ENV, check=True)
    out, _ = bridge.communicate(timeout=120)
    client.join(30)
    print(out.decode())
    flushed = np.load(log)
    first_flush: dict[int, int] = {}
    for t, m in flushed.tolist():
        first_flush.setdefault(t, m)
    lags = np.array([m - first_flush[t] for t, m in arrivals if t in first_flush], np.int64)
    print(f"lag: {len(lags)} of {len(arrivals)} messages matched to their chunk's flush")
    return lags


def compressed_mapping(root: Path) -> Path:
    """The default ADTF topic mapping with the camera kept as H.264 (CompressedVideo, what
    Foxglove plays natively) instead of decoded to raw RGB Images."""
    from bridge_lake.export.mapping import default_mapping_path

    text = default_mapping_path("adtf").read_text()
    text = text.replace("type: sensor_msgs/msg/Image", "type: foxglove_msgs/msg/CompressedVideo")
    text = text.replace("    options: {encoding: rgb8}\n", "")
    out = root / "compressed.yaml"
    out.write_text(text)
    return out


def _bridge_once(path: str, mcap: str, mapping: str | None = None) -> dict:
    """Catch up with a finished file in this process; (seconds, CPU seconds, bytes)."""
    from bridge_lake.export.mapping import default_mapping_path, load_mapping
    from bridge_lake.formats.adtf.follow import load_catalog
    from bridge_lake.live.bridge import LiveBridge, LiveConfig
    from bridge_lake.normalize.adtf_mapping import resolve_mapping

    cfg = LiveConfig(
        Path(path),
        resolve_mapping(None),
        load_mapping(mapping or default_mapping_path("adtf")),
        load_catalog(path),
        idle_s=0.5,
    )
    bridge = LiveBridge(cfg, mcap=Path(mcap))
    w0 = time.process_time()
    bridge.warm_up()  # a bridge is started before the recording: not part of keeping up
    t0, c0 = time.perf_counter(), time.process_time()
    summary = asyncio.run(bridge.run())
    return {
        "s": time.perf_counter() - t0,
        "cpu": time.process_time() - c0,
        "warm_up_cpu": c0 - w0,
        "mb": Path(path).stat().st_size / 1e6,
        "messages": summary.messages,
        "rss_mb": peak_rss_mb(),
    }


def _follow_once(path: Path) -> float:
    from bridge_lake.formats.adtf.follow import AdtfFollower

    t0 = time.perf_counter()
    follower = AdtfFollower(path)
    while not follower.poll().closed:
        pass
    return time.perf_counter() - t0


def _read_once(path: Path) -> float:
    from bridge_lake.formats.adtf import open_dat

    t0 = time.perf_counter()
    with open_dat(path) as f:
        for _ in f.samples():
            pass
    return time.perf_counter() - t0


def _subprocess_bridge(path: Path, mcap: Path, mapping: Path | None) -> subprocess.Popen:
    m = str(mapping) if mapping else None
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); from bench_live import _bridge_once;"
        f"print(json.dumps(_bridge_once({str(path)!r}, {str(mcap)!r}, {m!r})))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], env=ENV, cwd=ROOT, stdout=subprocess.PIPE, text=True
    )


def _run(path: Path, mcap: Path, mapping: Path | None) -> dict:
    return json.loads(_subprocess_bridge(path, mcap, mapping).communicate()[0].splitlines()[-1])


def throughput(root: Path, long_src: Path, short_src: Path) -> None:
    size = long_src.stat().st_size / 1e6
    read_s = min(_read_once(long_src) for _ in range(2))
    follow_s = min(_follow_once(long_src) for _ in range(2))
    compressed = compressed_mapping(root)
    runs = {}
    for name, mapping in (("camera as H.264", compressed), ("camera decoded to RGB", None)):
        r = runs[name] = _run(long_src, root / "t.mcap", mapping)
        print(f"{name}: {r['mb']:.0f} MB in {r['s']:.2f} s wall, {r['cpu']:.2f} CPU s "
              f"({r['mb'] / r['cpu']:.0f} MB per CPU s; warm-up before it "
              f"{r['warm_up_cpu']:.2f} CPU s), {r['messages']} messages, "
              f"peak RSS {r['rss_mb']:.0f} MB, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    two = [_subprocess_bridge(long_src, root / f"u{i}.mcap", compressed) for i in range(2)]
    r2 = [json.loads(p.communicate()[0].splitlines()[-1]) for p in two]
    short = _run(short_src, root / "s.mcap", compressed)
    one = runs["camera as H.264"]
    per_core = one["mb"] / one["cpu"]
    both = sum(r["mb"] for r in r2) / max(r["s"] for r in r2)
    print(f"file {size:.0f} MB: reader {size / read_s:.0f} MB/s, follower {size / follow_s:.0f}"
          f" MB/s; 2 processes on 2 copies: {both:.0f} MB/s together "
          f"(1 process: {one['mb'] / one['s']:.0f} MB/s wall)")  # fmt: skip
    print(f"one core covers {100 * per_core / RECORDER_1X:.1f} % of a {RECORDER_1X} MB/s recorder")
    figure("live follower (chunk walk, samples)", size / follow_s, size / read_s, "MB/s",
           baseline_name="open_dat().samples()")  # fmt: skip
    figure("live bridge catching up, one core (camera H.264)", per_core, size / read_s, "MB/s",
           baseline_name="open_dat().samples()", peak_rss_mb=one["rss_mb"])  # fmt: skip
    rgb = runs["camera decoded to RGB"]
    figure("live bridge catching up, one core (camera to RGB)", rgb["mb"] / rgb["cpu"],
           size / read_s, "MB/s", baseline_name="open_dat().samples()",
           peak_rss_mb=rgb["rss_mb"])  # fmt: skip
    figure("live bridge, 2 processes on 2 cores", both, one["mb"] / one["s"], "MB/s",
           baseline_name="1 process")  # fmt: skip
    figure("live bridge peak RSS, 3x longer drive", one["rss_mb"], short["rss_mb"], "MB",
           more_is_better=False, baseline_name="1x drive")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    lag_min, short_min = (0.1, 0.1) if a.smoke else (1.0, 1.0)
    with tempfile.TemporaryDirectory(prefix="bench_live_") as tmp:
        root = Path(tmp)
        lag_src = _drive(root, lag_min, 1)
        lags = lag(root, lag_src)
        p50, p99, mx = (float(np.percentile(lags, q)) / 1e6 for q in (50, 99, 100))
        print(f"lag at the demo drive's rate: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {mx:.1f} ms")
        figure("live lag p99 (chunk flushed -> message at client)", p99, 50.0, "ms",
               more_is_better=False, baseline_name="issue target")  # fmt: skip
        points = 8000 if a.smoke else 40000  # a lidar-heavy drive: MB/s worth measuring
        short = _drive(root, short_min, 2, points)
        long = _drive(root, short_min * 3, 3, points)
        throughput(root, long, short)
    return 0


if __name__ == "__main__":
    sys.exit(main())

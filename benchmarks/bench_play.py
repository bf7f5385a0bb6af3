"""`bridge-lake play` against a naive player, measured at an independent client.

    python benchmarks/bench_play.py --smoke        # seconds-long drives (CI)
    python benchmarks/bench_play.py                # 1-min ADTF drive at 1x, 1 and 3-min NCLT max speed

1. An ADTF drive at the issue's rates (bridge_lake.synth with `ISSUE_RATES`: H.264 camera at
   30 Hz, lidar 10 Hz, 600 CAN frames/s (10 ids at 60 Hz, each frame published on /vehicle/can
   and on its bus's topic), IMU 100 Hz, GNSS 10 Hz; `--demo-rates`: the demo's own drive,
   15 Hz camera and 1,000 CAN frames/s) goes through the library's layers and is exported
   to MCAP.
2. At 1x: `bridge-lake play` (its own process, `--report`) and, side by side in the same run,
   a naive player (same server, same reader: sleep until each message's time, then send),
   each to an independent Python `websockets` client in a third process speaking the
   Foxglove protocol; then both again with SCHED_FIFO (ours `--realtime`, the naive one and
   the client under `chrt -f`), which on a loaded machine shows what the player does when
   the scheduler lets it run. Per player: send error p50/p99/max (handed to the server minus scheduled),
   CPU % of one core and RSS jitter of the player process, receive jitter at the client
   (|arrival offset minus log time offset| around its median) p50/p99/max.
3. The machine's floor (`floor`): how late a nanosleep wakes and how long a busy loop is
   kept from running, measured before the players on the same machine.
4. `--max-speed` on a lidar-heavy NCLT drive (full-density velodyne) to one local client:
   payload MB/s at the client; on two drive lengths, the player's RSS max (memory flat in
   the file's length).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from figures import figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


# --- drives --------------------------------------------------------------------------------


ISSUE_RATES = {"fps": 30, "can_hz": 60}
"""Issue 20's drive: 30 Hz camera, about 600 CAN frames/s (10 ids x 60 Hz)."""


def exported_drive(
    root: Path, source: str, minutes: float, light: bool, adtf_rates: dict | None = None
) -> Path:
    from bridge_lake.calibrate.drive import calibrate_drive
    from bridge_lake.export.exporter import ExportRequest, export_drive
    from bridge_lake.lake import Lake
    from bridge_lake.landing import LandingZone
    from bridge_lake.manifest import build_manifest
    from bridge_lake.normalize.drive import normalize_drive
    from bridge_lake.synth import synthesize

    work = root / f"{source}-{minutes}"
    (made,) = synthesize(work / "landing", drives=1, minutes=minutes, source=source, light=light,
                         adtf_rates=adtf_rates)  # fmt: skip
    lake, landing = Lake(str(work / "lake")), LandingZone(str(work / "landing"))
    m = build_manifest(landing, made.drive_id)
    lake.write_partition("raw", "manifest", made.drive_id, m.files_table())
    lake.write_partition("raw", "drives", made.drive_id, m.drive_table())
    normalize_drive(landing, lake, made.drive_id, made.source)
    calibrate_drive(lake, made.drive_id)
    out = root / f"{source}-{minutes}.mcap"
    export_drive(lake, made.drive_id, out, ExportRequest())
    shutil.rmtree(work)
    return out


# --- the independent client (its own process) ------------------------------------------------


async def client(url: str, out: Path) -> None:
    import websockets

    arrivals, logs, sizes = [], [], 0
    cpu0 = time.process_time()
    async with websockets.connect(url, subprotocols=["foxglove.websocket.v1"], max_size=None) as ws:
        await ws.recv()
        adv = json.loads(await ws.recv())
        subs = [{"id": i, "channelId": c["id"]} for i, c in enumerate(adv["channels"])]
        await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
        try:
            async for m in ws:
                now = time.perf_counter_ns()
                if isinstance(m, bytes) and m[0] == 1:
                    arrivals.append(now)
                    logs.append(struct.unpack_from("<Q", m, 5)[0])
                    sizes += len(m) - 13
        except websockets.ConnectionClosed:
            pass
    cpu = time.process_time() - cpu0
    out.write_text(json.dumps({"arrivals": arrivals, "logs": logs, "bytes": sizes, "cpu_s": cpu}))


def receive_figures(path: Path, rate: float | None) -> dict:
    d = json.loads(path.read_text())
    a = np.array(d["arrivals"], np.int64)
    g = np.array(d["logs"], np.int64)
    out = {"messages": len(a), "bytes": d["bytes"]}
    wall = (a[-1] - a[0]) / 1e9 if len(a) > 1 else 0
    out["mb_per_s"] = d["bytes"] / 1e6 / wall if wall else None
    out["client_cpu_percent"] = 100 * d["cpu_s"] / wall if wall else None
    if rate is not None and len(a) > 1:
        order = np.argsort(g, kind="stable")  # messages logged at once: by arrival
        a, g = a[order], g[order]
        off = (a - a[0]) - (g - g[0]) / rate
        j = np.abs(off - np.median(off)) / 1e3
        out |= {
            "jitter_p50_us": float(np.percentile(j, 50)),
            "jitter_p99_us": float(np.percentile(j, 99)),
            "jitter_max_us": float(j.max()),
        }
    return out


# --- the naive player (its own process) --------------------------------------------------------


async def naive(path: Path, report_path: Path) -> None:
    """Same server and reader as ours; sleep until each message's time, then send."""
    from bridge_lake.formats.ros.readers import open_recording
    from bridge_lake.play.report import PlayReport
    from bridge_lake.play.server import PlayServer

    rec = open_recording(path)
    server = PlayServer("127.0.0.1", 0)
    await server.start()
    ids = {cid: await server.add_channel(ch) for cid, ch in rec.channels.items()}
    print(f"serving {path} on {server.url}", flush=True)
    await server.subscribed.wait()
    await asyncio.sleep(1.0)
    report = PlayReport(str(path), 1.0)
    report.started()
    t0, first = time.perf_counter_ns(), rec.start_ns
    last_rss = 0
    for m in rec.messages():
        due = t0 + (m.log_time - first)
        wait = due - time.perf_counter_ns()
        if wait > 0:
            await asyncio.sleep(wait / 1e9)
        handed = time.perf_counter_ns()
        await server.send(ids[m.channel.id], m.log_time, m.data)
        t = report.topic(m.channel.topic)
        t.messages += 1
        t.bytes += len(m.data)
        t.errors.append(handed - due)
        if handed - last_rss > 100_000_000:
            last_rss = handed
            report.sample_rss()
    report.finished()
    await server.stop()
    report.write(report_path)


# --- what the machine allows (its own process) ----------------------------------------------


def floor(seconds: float) -> None:
    """The machine's timing floor for any Python player, printed as JSON: how late an 800 µs
    nanosleep wakes (1 µs timer slack, as the player's) and the longest a busy loop is kept
    from running. A player's send error cannot be steadier than the wake it spins after
    (clock.SPIN_NS covers the wake's lateness) nor than the machine lets it run."""
    import ctypes
    import gc

    ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)
    gc.disable()
    late = []
    end = time.perf_counter_ns() + int(seconds / 2 * 1e9)
    while time.perf_counter_ns() < end:
        due = time.perf_counter_ns() + 800_000
        time.sleep(0.0008)
        late.append(time.perf_counter_ns() - due)
    # SCHED_FIFO spinning for seconds would meet the kernel's RT throttle (50 ms a second)
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    gaps, prev = [], time.perf_counter_ns()
    end = prev + int(seconds / 2 * 1e9)
    while prev < end:
        now = time.perf_counter_ns()
        if now - prev > 20_000:
            gaps.append(now - prev)
        prev = now
    a = np.array(late) / 1e3
    print(json.dumps({
        "wakes": len(a), "wake_late_p50_us": float(np.percentile(a, 50)),
        "wake_late_p99_us": float(np.percentile(a, 99)), "wake_late_max_us": float(a.max()),
        "wakes_over_60us": int((a > 60).sum()),
        "spin_gaps_over_50us": sum(g > 50_000 for g in gaps),
        "spin_gap_max_us": max(gaps, default=0) / 1e3,
    }))  # fmt: skip


def machine_floor(seconds: float, rt: list[str]) -> dict:
    """`floor` in its own process (under `rt` when the player's runs have it)."""
    cmd = [*rt, sys.executable, __file__, "--floor", str(seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout)


# --- running a player and a client -----------------------------------------------------------


def run_pair(
    player_cmd: list[str], tmp: Path, tag: str, rate: float | None, rt_client: bool = False
) -> tuple[dict, dict]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    player = subprocess.Popen(player_cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert player.stdout is not None
    line = player.stdout.readline()
    m = re.search(r"on (ws://\S+)", line)
    if m is None:
        player.kill()
        raise SystemExit(f"{tag}: the player did not start: {line!r}")
    recv = tmp / f"{tag}-recv.json"
    prio = ["chrt", "-f", "5"] if rt_client else []
    cl = subprocess.Popen(
        [*prio, sys.executable, __file__, "--client", m.group(1), "--out", str(recv)],
        env=env,
        cwd=REPO,
    )
    player.communicate(timeout=3600)
    cl.wait(timeout=120)
    if player.returncode != 0 or cl.returncode != 0:
        raise SystemExit(f"{tag}: player exit {player.returncode}, client {cl.returncode}")
    return json.loads((tmp / f"{tag}.json").read_text()), receive_figures(recv, rate)


def ours_cmd(path: Path, tmp: Path, tag: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "bridge_lake.cli", "play", str(path), "--port", "0",
        "--wait-for-client", "--report", str(tmp / f"{tag}.json"), *extra,
    ]  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--client")
    p.add_argument("--naive", type=Path)
    p.add_argument("--out", type=Path)
    p.add_argument("--report", type=Path)
    p.add_argument("--adtf-minutes", type=float)
    p.add_argument("--keep", type=Path, help="reuse/keep the exported drives in this folder")
    p.add_argument("--demo-rates", action="store_true",
                   help="play the demo's ADTF drive (15 Hz camera, 1,000 CAN frames/s) instead "
                   "of one at the issue's rates")  # fmt: skip
    p.add_argument("--floor", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.floor:
        floor(args.floor)
        return
    if args.client:
        asyncio.run(client(args.client, args.out))
        return
    if args.naive:
        asyncio.run(naive(args.naive, args.report))
        return
    adtf_min = args.adtf_minutes or (0.1 if args.smoke else 1.0)
    nclt_min = (0.05, 0.1) if args.smoke else (1.0, 3.0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_play_"))
    keep = args.keep or tmp
    keep.mkdir(parents=True, exist_ok=True)
    try:

        def drive(source: str, minutes: float, light: bool, rates: dict | None = None) -> Path:
            path = keep / f"{source}-{minutes}{'-issue-rates' if rates else ''}.mcap"
            if not path.exists():
                exported_drive(keep, source, minutes, light, rates).rename(path)
            return path

        adtf = drive("adtf", adtf_min, True, None if args.demo_rates else ISSUE_RATES)
        drive_name = "ADTF demo drive" if args.demo_rates else "ADTF drive at the issue's rates"
        print(f"ADTF drive {adtf_min} min ({'demo' if args.demo_rates else 'issue'} rates): "
              f"{adtf.stat().st_size / 1e6:.1f} MB", flush=True)  # fmt: skip
        rows = {}
        naive_cmd = [sys.executable, __file__, "--naive", str(adtf), "--report"]
        rt = ["chrt", "-f", "10"]  # the naive player at the priority --realtime takes
        runs = [
            ("ours", ours_cmd(adtf, tmp, "ours"), False),
            ("naive", [*naive_cmd, str(tmp / "naive.json")], False),
        ]
        if subprocess.run([*rt, "true"], capture_output=True).returncode == 0:
            runs += [
                ("ours-rt", ours_cmd(adtf, tmp, "ours-rt", "--realtime"), True),
                ("naive-rt", [*rt, *naive_cmd, str(tmp / "naive-rt.json")], True),
            ]
        else:
            print("SCHED_FIFO not permitted here (chrt -f failed): no --realtime rows", flush=True)
        rt_ok = len(runs) > 2
        fl = machine_floor(2.0 if args.smoke else 20.0, rt if rt_ok else [])
        print(
            f"machine floor{' (SCHED_FIFO)' if rt_ok else ''}: an 800 us nanosleep wakes "
            f"p50/p99/max {fl['wake_late_p50_us']:.1f}/{fl['wake_late_p99_us']:.1f}/"
            f"{fl['wake_late_max_us']:.0f} us late ({fl['wakes_over_60us']} of {fl['wakes']} "
            f"over 60 us); a busy loop was kept from running over 50 us "
            f"{fl['spin_gaps_over_50us']} times, longest {fl['spin_gap_max_us']:.0f} us",
            flush=True,
        )
        figure("machine floor: nanosleep wake lateness p99", fl["wake_late_p99_us"], None, "µs",
               more_is_better=False)  # fmt: skip
        figure("machine floor: longest stall of a busy loop", fl["spin_gap_max_us"], None, "µs",
               more_is_better=False)  # fmt: skip
        for tag, cmd, rt_client in runs:
            rep, recv = run_pair(cmd, tmp, tag, 1.0, rt_client)
            rows[tag] = (rep, recv)
            t = rep["total"]
            print(
                f"{tag:8s} {t['messages']} msgs: send error p50/p99/max "
                f"{t['send_error_p50_us']}/{t['send_error_p99_us']}/{t['send_error_max_us']} µs, "
                f"late >1ms {t['late_over_1ms']}, CPU {rep['cpu_percent_of_one_core']} %, RSS "
                f"{rep['rss_min_mb']}-{rep['rss_max_mb']} MB (jitter {rep['rss_jitter_mb']}); "
                f"receive jitter p50/p99/max {recv['jitter_p50_us']:.0f}/"
                f"{recv['jitter_p99_us']:.0f}/{recv['jitter_max_us']:.0f} µs "
                f"({recv['messages']} received{', SCHED_FIFO client' if rt_client else ''})",
                flush=True,
            )
        for ours, naive_, how in (("ours", "naive", ""), ("ours-rt", "naive-rt", "SCHED_FIFO ")):
            if ours not in rows:
                continue
            (o, orecv), (n, nrecv) = rows[ours], rows[naive_]
            base = f"naive player{', SCHED_FIFO' if how else ''}"
            for key, name in (("send_error_p99_us", "p99"), ("send_error_max_us", "max")):
                figure(f"play {how}1x send error {name} ({drive_name})", o["total"][key],
                       n["total"][key], "µs", more_is_better=False, baseline_name=base,
                       peak_rss_mb=o["rss_max_mb"])  # fmt: skip
            figure(f"play {how}1x receive jitter p99 at a websockets client",
                   orecv["jitter_p99_us"], nrecv["jitter_p99_us"], "µs", more_is_better=False,
                   baseline_name=base)  # fmt: skip
            figure(f"play {how}1x CPU (% of one core)", o["cpu_percent_of_one_core"],
                   n["cpu_percent_of_one_core"], "%", more_is_better=False,
                   baseline_name=base)  # fmt: skip
            figure(f"play {how}1x RSS jitter", o["rss_jitter_mb"], n["rss_jitter_mb"], "MB",
                   more_is_better=False, baseline_name=base)  # fmt: skip

        maxes = []
        for minutes in nclt_min:
            nclt = drive("nclt", minutes, False)
            rep, recv = run_pair(ours_cmd(nclt, tmp, f"max-{minutes}", "--max-speed"), tmp,
                                 f"max-{minutes}", None)  # fmt: skip
            maxes.append((minutes, nclt.stat().st_size, rep, recv))
            print(
                f"max speed NCLT {minutes} min ({nclt.stat().st_size / 1e6:.0f} MB file): "
                f"{recv['bytes'] / 1e6:.0f} MB payload in {recv['messages']} msgs at "
                f"{recv['mb_per_s']:.0f} MB/s at the client (client CPU "
                f"{recv['client_cpu_percent']:.0f} %); player RSS "
                f"{rep['rss_min_mb']}-{rep['rss_max_mb']} MB, CPU "
                f"{rep['cpu_percent_of_one_core']} %",
                flush=True,
            )
        short, long_ = maxes[0], maxes[-1]
        figure("play --max-speed payload to one local client (NCLT lidar)",
               long_[3]["mb_per_s"], None, "MB/s", peak_rss_mb=long_[2]["rss_max_mb"])  # fmt: skip
        figure(f"play --max-speed RSS max, {long_[0]} vs {short[0]} min drive",
               long_[2]["rss_max_mb"], short[2]["rss_max_mb"], "MB", more_is_better=False,
               baseline_name=f"{short[0]} min drive")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

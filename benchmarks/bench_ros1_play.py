"""`bridge-lake play --ros1` against `rosbag play` (Debian's C++ player), side by side.

The same bag (rosbags' writer: /chatter at 1 kHz, /imu at 100 Hz, /tf_static) is played into
a private roscore to the same roscpp ShapeShifter subscriber (bridge_lake_tests/ros1_graph),
in alternating runs. Receive jitter: |(arrival - first arrival) - (log time - first log
time)| around its median, per run (printed only: see main); CPU (user + system) and peak RSS of the player process
from wait4. The 1-minute load average is printed with each run.

    python benchmarks/bench_ros1_play.py --smoke      # 3 s of data, one round
    python benchmarks/bench_ros1_play.py              # 20 s of data, three rounds
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from figures import figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bridge_lake_tests.ros1_graph import Subscriber, build_subscriber, roscore  # noqa: E402

TOPICS = ["/chatter", "/imu", "/tf_static"]


def write_bag(path: Path, seconds: float) -> list[int]:
    """The bag, and its messages' log times in order."""
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS1_NOETIC)
    String, Imu = ts.types["std_msgs/msg/String"], ts.types["sensor_msgs/msg/Imu"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    Quat, Vec = ts.types["geometry_msgs/msg/Quaternion"], ts.types["geometry_msgs/msg/Vector3"]
    t0, times = 1_700_000_000 * 10**9, []
    zeros = np.zeros(9)
    with Writer(path) as w:
        chat = w.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
        imu = w.add_connection("/imu", "sensor_msgs/msg/Imu", typestore=ts)
        for k in range(int(seconds * 1000)):
            t = t0 + k * 1_000_000
            w.write(chat, t, ts.serialize_ros1(String(f"hello {k}"), "std_msgs/msg/String"))
            times.append(t)
            if k % 10 == 0:
                h = Header(k, Time(t // 10**9, t % 10**9), "imu")
                m = Imu(h, Quat(0, 0, 0, 1), zeros, Vec(0, 0, 0), zeros, Vec(0, 0, 0), zeros)
                w.write(imu, t, ts.serialize_ros1(m, "sensor_msgs/msg/Imu"))
                times.append(t)
    return times


def run_once(cmd: list[str], env, exe: Path, count: int, seconds: float) -> dict:
    sub = Subscriber(exe, env, TOPICS, count, seconds + 30)
    time.sleep(1.0)  # the subscriber registered: both players see it when they advertise
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    got = sub.results(timeout=seconds + 60)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.read().decode()[-500:]}")
    return {
        "got": got,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
    }


def jitter_us(got) -> np.ndarray:
    """Per /chatter message ("hello K", logged at K ms), |arrival offset - log offset|
    around the median, in µs (each arrival matched to its own log time by its content)."""
    chat = [g for g in got if g.topic == "/chatter"]
    at = np.array([g.at_ns for g in chat], np.int64)
    lt = np.array([int(g.data[4:].split(b" ")[1]) * 1_000_000 for g in chat], np.int64)
    d = (at - at[0]) - (lt - lt[0])
    return np.abs(d - np.median(d)) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    seconds, rounds = (3.0, 1) if args.smoke else (20.0, 3)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        bag = d / "w.bag"
        log_times = write_bag(bag, seconds)
        exe = build_subscriber(d)
        with roscore(d) as env:
            players = {
                "rosbag play": ["/usr/lib/rosbag/play", "-q", str(bag)],
                "bridge-lake play --ros1": [
                    sys.executable, "-m", "bridge_lake.cli", "play", str(bag), "--ros1",
                ],
            }  # fmt: skip
            penv = dict(env, PYTHONPATH=str(REPO))
            results: dict[str, list[dict]] = {k: [] for k in players}
            for r in range(rounds):
                for name, cmd in players.items():  # alternating
                    res = run_once(cmd, penv, exe, len(log_times) + 1, seconds)
                    j = jitter_us(res["got"])
                    n = sum(g.topic != "/tf_static" for g in res["got"])
                    res.update(p50=np.percentile(j, 50), p99=np.percentile(j, 99), max=j.max())
                    results[name].append(res)
                    print(
                        f"round {r + 1} {name:24s} {n}/{len(log_times)} msgs  jitter p50 "
                        f"{res['p50']:.0f} / p99 {res['p99']:.0f} / max {res['max']:.0f} µs  "
                        f"CPU {res['cpu_s']:.2f} s  RSS {res['rss_mb']:.0f} MB  "
                        f"load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
                    if n != len(log_times):
                        raise SystemExit(f"{name}: {n} of {len(log_times)} messages arrived")
    ours, base = results["bridge-lake play --ros1"], results["rosbag play"]
    for q in ("p50", "p99", "max"):
        figure(
            f"ros1 play receive jitter {q}",
            float(np.median([x[q] for x in ours])),
            float(np.median([x[q] for x in base])),
            "µs",
            more_is_better=False,
            baseline_name="rosbag play",
        )
    figure(
        "ros1 play CPU",
        float(np.median([x["cpu_s"] for x in ours])),
        float(np.median([x["cpu_s"] for x in base])),
        "s",
        more_is_better=False,
        baseline_name="rosbag play",
        peak_rss_mb=float(max(x["rss_mb"] for x in ours)),
    )


if __name__ == "__main__":
    main()

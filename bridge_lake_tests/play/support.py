"""Recordings written with libraries we did not write, a player process, a protocol client."""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
REPO = Path(__file__).resolve().parents[2]


def _store():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


def _messages(seconds: float):
    """(topic, type, log_ns, message) in time order: /tf_static once, /chatter 100 Hz,
    /imu 50 Hz."""
    ts = _store()
    String = ts.types["std_msgs/msg/String"]
    Imu = ts.types["sensor_msgs/msg/Imu"]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]
    Quat = ts.types["geometry_msgs/msg/Quaternion"]
    Vec = ts.types["geometry_msgs/msg/Vector3"]
    TFMessage = ts.types["tf2_msgs/msg/TFMessage"]
    TS = ts.types["geometry_msgs/msg/TransformStamped"]
    Tr = ts.types["geometry_msgs/msg/Transform"]

    def header(t: int, frame: str):
        return Header(Time(t // NS, t % NS), frame)

    out = [
        (
            "/tf_static",
            "tf2_msgs/msg/TFMessage",
            T0,
            TFMessage(
                [TS(header(T0, "base_link"), "imu", Tr(Vec(1.0, 0.0, 0.5), Quat(0, 0, 0, 1.0)))]
            ),
        )
    ]
    cov = np.zeros(9)
    for i in range(int(seconds * 100)):
        t = T0 + 1_000_000 + i * 10_000_000
        out.append(("/chatter", "std_msgs/msg/String", t, String(f"hello {i}")))
        if i % 2 == 0:
            imu = Imu(
                header(t, "imu"),
                Quat(0, 0, 0, 1.0),
                cov,
                Vec(0.0, 0.0, i * 0.01),
                cov,
                Vec(0.0, 0.0, 9.81),
                cov,
            )
            out.append(("/imu", "sensor_msgs/msg/Imu", t, imu))
    return out


def write_mcap(path: Path, seconds: float = 2.0) -> Path:
    """A ROS 2 MCAP written with the `mcap` library's Writer, plus a JSON channel."""
    from mcap.writer import CompressionType, Writer

    ts = _store()
    with path.open("wb") as f:
        w = Writer(f, compression=CompressionType.ZSTD, chunk_size=16 * 1024)
        w.start(profile="ros2", library="test")
        channels = {}
        for topic, typ, _, _ in _messages(0.02):
            if topic in channels:
                continue
            text = ts.generate_msgdef(typ, ros_version=2)[0]
            sid = w.register_schema(typ, "ros2msg", text.encode())
            meta = {"offered_qos_profiles": "- durability: 1"} if topic == "/tf_static" else {}
            channels[topic] = w.register_channel(topic, "cdr", sid, meta)
        jsid = w.register_schema("Status", "jsonschema", b'{"type":"object"}')
        channels["/status"] = w.register_channel("/status", "json", jsid)
        for k, (topic, typ, t, msg) in enumerate(_messages(seconds)):
            w.add_message(channels[topic], t, bytes(ts.serialize_cdr(msg, typ)), t, sequence=k)
            if topic == "/chatter" and k % 20 == 0:
                w.add_message(channels["/status"], t, json.dumps({"k": k}).encode(), t)
        w.finish()
    return path


def write_bag1(path: Path, seconds: float = 1.0, compression: str = "bz2") -> Path:
    from rosbags.rosbag1 import Writer

    ts = _store()
    w = Writer(path)
    if compression == "bz2":
        w.set_compression(Writer.CompressionFormat.BZ2)
    w.open()
    conns = {}
    for topic, typ, t, msg in _messages(seconds):
        if topic not in conns:
            conns[topic] = w.add_connection(
                topic, typ, typestore=ts, latching=1 if topic == "/tf_static" else None
            )
        w.write(conns[topic], t, bytes(ts.serialize_ros1(msg, typ)))
    w.close()
    return path


def write_bag2(path: Path, seconds: float = 1.0) -> Path:
    from rosbags.rosbag2 import StoragePlugin, Writer

    ts = _store()
    w = Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3)
    w.open()
    conns = {}
    for topic, typ, t, msg in _messages(seconds):
        if topic not in conns:
            conns[topic] = w.add_connection(topic, typ, typestore=ts)
        w.write(conns[topic], t, bytes(ts.serialize_cdr(msg, typ)))
    w.close()
    return path


# --- the player -------------------------------------------------------------------------------


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "bridge_lake.cli", "play", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


class Player:
    """`bridge-lake play` in a subprocess on a free port; `url` once it serves."""

    def __init__(self, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bridge_lake.cli", "play", *args, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"on (ws://\S+)", line)
        if m is None:
            self.proc.kill()
            raise AssertionError(f"player did not start: {line!r} {self.proc.stderr.read()}")
        self.url = m.group(1)

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err


# --- a Foxglove WebSocket client (the protocol spoken with `websockets`) ----------------------


@dataclass
class Received:
    topic: str
    log_time: int
    data: bytes
    at: float


@dataclass
class Client:
    url: str
    channels: dict[int, dict] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    messages: list[Received] = field(default_factory=list)
    states: list[tuple] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    _subs: dict[int, int] = field(default_factory=dict)

    async def connect(self, subscribe: bool = True) -> None:
        import websockets

        self.ws = await websockets.connect(
            self.url, subprotocols=["foxglove.websocket.v1"], max_size=None
        )
        assert self.ws.subprotocol == "foxglove.websocket.v1"
        self.info = json.loads(await self.ws.recv())
        adv = json.loads(await self.ws.recv())
        assert adv["op"] == "advertise"
        self.channels = {c["id"]: c for c in adv["channels"]}
        if subscribe:
            subs = [{"id": i, "channelId": cid} for i, cid in enumerate(self.channels)]
            self._subs = {s["id"]: s["channelId"] for s in subs}
            await self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        import websockets

        try:
            async for m in self.ws:
                if isinstance(m, str):
                    continue
                if m[0] == 1:
                    sub, t = struct.unpack_from("<IQ", m, 1)
                    topic = self.channels[self._subs[sub]]["topic"]
                    self.messages.append(Received(topic, t, bytes(m[13:]), time.monotonic()))
                elif m[0] == 2:
                    self.times.append(struct.unpack_from("<Q", m, 1)[0])
                elif m[0] == 5:
                    status, t, speed, seek, n = struct.unpack_from("<BQfBI", m, 1)
                    self.states.append((status, t, speed, bool(seek), m[19 : 19 + n].decode()))
        except websockets.ConnectionClosed:
            pass

    async def control(self, play: bool, speed: float = 1.0, seek_ns: int | None = None, rid="r"):
        data = rid.encode()
        await self.ws.send(
            struct.pack(
                "<BBfBQI", 3, 0 if play else 1, speed, seek_ns is not None, seek_ns or 0, len(data)
            )
            + data
        )

    async def closed(self, timeout: float = 60) -> None:
        await asyncio.wait_for(self.task, timeout)

    async def close(self) -> None:
        await self.ws.close()
        await self.task


def by_topic(items) -> dict[str, list]:
    out: dict[str, list] = {}
    for m in items:
        out.setdefault(m.topic, []).append(m)
    return out

"""Processes for the live tests: the recorder, the bridge, a Foxglove WebSocket client, and
the offline export of the same drive to compare with."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import websockets
from mcap.records import Channel, Chunk, Message
from mcap.stream_reader import StreamReader, breakup_chunk

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.export.exporter import export_drive
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake_tests.support import register

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
DRIVE_YAML = "vehicle: test-vehicle-01\nsource: adtf\n"


def recorder(src: Path, out: Path, *args: str) -> subprocess.Popen:
    """The project's writer re-recording `src` at real-time pace, flushing per chunk."""
    cmd = [sys.executable, "-m", "bridge_lake.synth.record", str(src), str(out), *args]
    return subprocess.Popen(cmd, env=ENV)


def bridge(path: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """`bridge-lake live PATH --port 0 ...`; returns the process and its server URL."""
    cmd = [sys.executable, "-m", "bridge_lake.cli", "live", str(path), "--port", "0", *args]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("serving ws://"), line + proc.stderr.read().decode()  # type: ignore[union-attr]
    return proc, line.split()[1]


async def _client(url: str, got: dict[str, list[tuple[int, bytes]]]) -> None:
    """A Foxglove WebSocket client: subscribes to every channel as it is advertised and
    keeps (log time, payload) per topic until the server closes."""
    topics: dict[int, str] = {}
    async with websockets.connect(url, subprotocols=["foxglove.websocket.v1"]) as ws:
        async for frame in ws:
            if isinstance(frame, str):
                msg = json.loads(frame)
                if msg.get("op") == "advertise":
                    subs = []
                    for ch in msg["channels"]:
                        sub = len(topics) + 1
                        topics[sub] = ch["topic"]
                        subs.append({"id": sub, "channelId": ch["id"]})
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
                continue
            if frame[0] != 1:  # 2: the server's time (broadcast per poll)
                continue
            _, sub, t = struct.unpack_from("<BIQ", frame)
            got[topics[sub]].append((t, bytes(frame[13:])))


def listen(url: str) -> tuple[dict[str, list[tuple[int, bytes]]], threading.Thread]:
    """The client on a thread of its own (it ends when the server closes): what it got."""
    got: dict[str, list[tuple[int, bytes]]] = defaultdict(list)
    thread = threading.Thread(target=lambda: asyncio.run(_client(url, got)))
    thread.start()
    return got, thread


def mcap_messages(path: Path) -> tuple[dict[str, list[tuple[int, bytes]]], bool]:
    """(topic -> [(log time, payload)] of an MCAP read linearly, whether it ended cleanly)."""
    channels: dict[int, str] = {}
    out: dict[str, list[tuple[int, bytes]]] = defaultdict(list)

    def take(r: object) -> None:
        if isinstance(r, Channel):
            channels[r.id] = r.topic
        elif isinstance(r, Message):
            out[channels[r.channel_id]].append((r.log_time, bytes(r.data)))

    complete = True
    with path.open("rb") as f:
        try:
            for r in StreamReader(f, emit_chunks=True).records:
                if isinstance(r, Chunk):
                    for inner in breakup_chunk(r, validate_crc=True):
                        take(inner)
                else:
                    take(r)
        except Exception:
            complete = False
    return dict(out), complete


def offline_export(root: Path, files: list[Path], out: Path) -> Path:
    """The drive holding `files` through the lake (normalize, calibrate) and exported."""
    drive = "live-drive"
    folder = root / "landing" / drive
    folder.mkdir(parents=True)
    (folder / "drive.yaml").write_text(DRIVE_YAML)
    for f in files:
        (folder / f.name).write_bytes(f.read_bytes())
        sidecar = Path(f"{f}.description")
        if sidecar.is_file():
            Path(f"{folder / f.name}.description").write_bytes(sidecar.read_bytes())
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    register(landing, lake, drive)
    assert normalize_drive(landing, lake, drive, "adtf")[1]
    assert calibrate_drive(lake, drive)[1]
    export_drive(lake, drive, out)
    return out

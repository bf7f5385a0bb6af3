"""The player's ready-made Message Data frames, read by an independent `websockets` client
that decodes them as the Foxglove WebSocket protocol defines them (opcode 1, subscription id
u32, log time u64 ns, payload; little endian), not with the server's own constants."""

from __future__ import annotations

import asyncio
import json
import struct

import websockets

from bridge_lake.formats.ros.readers import RosChannel
from bridge_lake.play.server import PlayServer

SIZES = (0, 1, 112, 113, 125, 126, 4000, 65522, 65523, 65535, 70_000, 1_500_000)
"""Payloads around the WebSocket length encodings (7-bit, 16-bit, 64-bit) with the 13-byte
header: 112 + 13 = 125 is the last 7-bit length, 65522 + 13 the last 16-bit one."""


def _channel(cid: int, topic: str, latched: bool = False) -> RosChannel:
    return RosChannel(cid, topic, "std_msgs/String", "ros1msg", b"string data", "ros1", latched)


async def _client(url: str, sub_base: int, got: dict[int, list], ready: asyncio.Event) -> None:
    """Subscribe to every channel with ids sub_base + i; collect (log time, payload) per
    channel until the server closes."""
    async with websockets.connect(url, subprotocols=["foxglove.websocket.v1"], max_size=None) as ws:
        assert json.loads(await ws.recv())["op"] == "serverInfo"
        channels = json.loads(await ws.recv())["channels"]
        subs = {sub_base + i: c["id"] for i, c in enumerate(channels)}
        await ws.send(
            json.dumps(
                {
                    "op": "subscribe",
                    "subscriptions": [{"id": s, "channelId": c} for s, c in subs.items()],
                }
            )
        )
        ready.set()
        try:
            async for m in ws:
                assert isinstance(m, bytes)
                assert m[0] == 1, f"opcode {m[0]}"
                sub, log_time = struct.unpack_from("<IQ", m, 1)
                got.setdefault(subs[sub], []).append((log_time, m[13:]))
        except websockets.ConnectionClosed:
            pass


async def _scenario() -> tuple[list, dict, dict, dict]:
    server = PlayServer("127.0.0.1", 0)
    await server.start()
    plain = await server.add_channel(_channel(10, "/chatter"))
    latched = await server.add_channel(_channel(11, "/tf_static", latched=True))
    a_got: dict[int, list] = {}
    b_got: dict[int, list] = {}
    late_got: dict[int, list] = {}
    a_ready, b_ready, late_ready = asyncio.Event(), asyncio.Event(), asyncio.Event()
    a = asyncio.ensure_future(_client(server.url, 0, a_got, a_ready))
    b = asyncio.ensure_future(_client(server.url, 40, b_got, b_ready))  # other sub ids
    await asyncio.wait_for(asyncio.gather(a_ready.wait(), b_ready.wait()), 10)
    await asyncio.sleep(0.2)  # both subscriptions handled
    sent = [(1_000 + i, bytes((i * 7 + k) % 251 for k in range(n))) for i, n in enumerate(SIZES)]
    # built before anyone subscribed to the latched channel's frames, then due as one group
    frames = [server.ready(plain, t, p) for t, p in sent]
    frames.append(server.ready(latched, 5_000, b"tf static payload"))
    for group in (frames[:3], frames[3:6], frames[6:]):
        server.hand_over(group, server.gather(group))
        if server.backlogged():
            await server.drain()
        await asyncio.sleep(0)
    late = asyncio.ensure_future(_client(server.url, 90, late_got, late_ready))
    await asyncio.wait_for(late_ready.wait(), 10)
    await asyncio.sleep(0.3)
    await server.stop()
    await asyncio.wait_for(asyncio.gather(a, b, late), 20)
    return sent, a_got, b_got, late_got


def test_ready_frames_decode_byte_identical_for_each_clients_subscription_ids():
    sent, a_got, b_got, late_got = asyncio.run(_scenario())
    plain, latched = 0, 1
    for got in (a_got, b_got):
        assert got[plain] == sent  # every size, in order, byte-identical
        assert got[latched] == [(5_000, b"tf static payload")]
    # the late joiner gets only the latched message (kept by hand_over)
    assert late_got == {latched: [(5_000, b"tf static payload")]}

"""`bridge-lake play --ros1`: the player's output into a ROS 1 graph instead of the Foxglove
WebSocket (`ros1.node`: our own master/slave XML-RPC and TCPROS, no ROS installed).

It has the server's interface the player paces (`ready`, `gather`, `hand_over`, ...), so
the clock, read-ahead, faults, windows, loop and report are the player's own: the read-ahead
thread converts each payload to ROS 1 where the source is not (`formats.ros.ros1_form`) and
frames it (`tcpros.frame`); at the due time the group's frames go to each subscriber of
their topic in one transport write. A subscriber that falls WRITE_LIMIT behind loses
messages (counted, reported at the end) rather than stalling the others.

What the WebSocket's clients do differently: nothing to broadcast (time, playback state);
a latched topic keeps its last message, as ROS does, for every subscriber that joins, and a
subscriber that stays connected across a seek or loop keeps what it had.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NamedTuple

from bridge_lake.formats.ros.readers import RosChannel
from bridge_lake.formats.ros.ros1_form import CLOCK_TOPIC, ros1_form
from bridge_lake.formats.ros.tcpros import frame
from bridge_lake.ros1.node import Publication, Ros1Node

NODE_NAME = "bridge_lake_play"


class RosReady(NamedTuple):
    """A message framed for TCPROS (its uint32 length, then the ROS 1 bytes)."""

    log_time: int
    channel: int
    frame: bytes
    size: int
    """ROS 1 payload bytes"""


class Ros1Output:
    """The player's output into ROS 1 (see module)."""

    def __init__(self, on_shutdown: Callable[[str], None] | None = None) -> None:
        self.node = Ros1Node(NODE_NAME, on_shutdown=on_shutdown, on_join=self._joined)
        self.url = self.node.master_uri
        self.subscribed = asyncio.Event()
        """set once every topic but /clock has a subscriber (--wait-for-client)"""
        self._pubs: list[Publication] = []
        self._converts: list[Callable[[bytes], Any] | None] = []

    async def start(self) -> None:
        await self.node.start()

    async def add_channel(self, channel: RosChannel) -> int:
        form = ros1_form(channel)  # NoRos1FormError names the topic
        pub = await self.node.advertise(channel.topic, form, channel.latched)
        self._pubs.append(pub)
        self._converts.append(form.convert)
        return len(self._pubs) - 1

    async def connected(self) -> None:
        """Until the subscribers running when the topics were registered have connected."""
        await self.node.wait_connected()
        self._joined(None)

    def _joined(self, pub: Publication | None) -> None:
        topics = [p.topic for p in self._pubs if p.topic != CLOCK_TOPIC]
        if topics and self.node.all_subscribed(topics):
            self.subscribed.set()

    # --- the player's hand-over ----------------------------------------------------------------

    def ready(self, channel_id: int, log_time: int, payload: bytes) -> RosReady:
        """A message as a TCPROS frame (on the read-ahead thread)."""
        convert = self._converts[channel_id]
        data = payload if convert is None else convert(payload)
        return RosReady(log_time, channel_id, frame(data), len(data))

    def latch(self, channel_id: int, log_time: int, payload: bytes) -> None:
        """A latched message logged before the window: sent to each subscriber that joins."""
        pub = self._pubs[channel_id]
        if pub.latched:
            pub.last = self.ready(channel_id, log_time, payload).frame

    def gather(self, group: list[RosReady]) -> list[tuple[Publication, bytes, int]]:
        """Per publication with subscribers, the group's frames joined: (publication, bytes,
        messages)."""
        pubs = self._pubs
        if len(group) == 1:
            r = group[0]
            pub = pubs[r.channel]
            return [(pub, r.frame, 1)] if pub.subscribers else []
        by: dict[int, list[bytes]] = {}
        for r in group:
            if pubs[r.channel].subscribers:
                by.setdefault(r.channel, []).append(r.frame)
        return [(pubs[c], b"".join(f), len(f)) for c, f in by.items()]

    def hand_over(
        self, group: list[RosReady], writes: list[tuple[Publication, bytes, int]]
    ) -> None:
        for pub, data, n in writes:
            pub.write(data, n)
        pubs = self._pubs
        for r in group:
            pub = pubs[r.channel]
            if pub.latched:
                pub.last = r.frame

    def backlogged(self) -> bool:
        """Never: a subscriber that falls behind loses messages instead (see module)."""
        return False

    async def drain(self) -> None:
        return None

    def pending_writes(self) -> bool:
        """Whether a subscriber's transport holds bytes its socket did not take yet (the
        loop writes them when it runs)."""
        return any(s.transport.get_write_buffer_size() for p in self._pubs for s in p.subscribers)

    async def broadcast_time(self, time_ns: int) -> None:
        return None

    async def broadcast_state(self, *args: Any) -> None:
        return None

    async def resend_latched(self) -> None:
        return None

    def dropped(self) -> dict[str, int]:
        """Messages a slow subscriber did not get, per topic."""
        return {p.topic: p.dropped for p in self._pubs if p.dropped}

    async def stop(self) -> None:
        await self.node.stop()


__all__ = ["NODE_NAME", "Ros1Output", "RosReady"]

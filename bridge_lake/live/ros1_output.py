"""`bridge-lake live --ros1`: the live bridge's messages into the ROS 1 graph at
$ROS_MASTER_URI instead of the Foxglove WebSocket.

It is the player's ROS 1 output (`play.ros1_output.Ros1Output`: our own XML-RPC node and
TCPROS) behind the live `Server` interface: each topic is advertised when it first appears,
with the ROS 1 form of its type (CDR converted, md5sum and full definition), latched where
the export latches it; each message goes to the topic's subscribers as it is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bridge_lake.formats.ros.readers import RosChannel
from bridge_lake.play.ros1_output import Ros1Output
from bridge_lake.ros1.node import CONNECT_WAIT_S


class LiveRos1:
    """The live `Server` for ROS 1 (see module)."""

    def __init__(self, on_shutdown: Callable[[str], None] | None = None) -> None:
        self.out = Ros1Output(on_shutdown=on_shutdown)
        self.url = self.out.url
        self.listening = False

    async def start(self) -> None:
        await self.out.start()
        self.listening = True

    async def add_channel(self, channel: RosChannel) -> int:
        return await self.out.add_channel(channel)

    async def wait_subscribed(self, channel_ids: list[int], timeout_s: float) -> None:
        """Until the subscribers the master named for the new topics have connected (at most
        `timeout_s` or the node's CONNECT_WAIT_S if longer: a ROS 1 subscriber connects only
        after the master's publisherUpdate and a requestTopic, which took over the WebSocket's
        0.5 s on this loaded machine, and the topic's first poll would miss it). Topics nobody
        subscribes to do not wait."""
        await self.out.node.wait_connected(max(timeout_s, CONNECT_WAIT_S))

    async def send(self, channel_id: int, log_time: int, payload: bytes) -> None:
        r = self.out.ready(channel_id, log_time, payload)
        self.out.hand_over([r], self.out.gather([r]))

    async def broadcast_time(self, time_ns: int) -> None:
        return None

    async def stop(self) -> None:
        # what the transports still hold goes out before the node closes them
        for _ in range(200):
            if not self.out.pending_writes():
                break
            await asyncio.sleep(0.01)
        await self.out.stop()


__all__ = ["LiveRos1"]

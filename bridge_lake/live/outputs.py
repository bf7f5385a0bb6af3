"""Where live messages go: a live MCAP and the Foxglove WebSocket server.

`LiveMcap` appends each poll's messages to an MCAP and flushes whole chunks after every
poll (`McapWriter.flush`), so a bridge killed at any moment leaves a file of complete chunks
that readers of an MCAP without summary take (the mcap library's stream reader, `bridge-lake
recover`); a clean stop writes the summary and footer.

`LiveServer` is the player's server (`play.server.PlayServer`: `foxglove-websocket`, one
frame per message, latched channels replayed to clients that join later) with what the live
bridge adds: advertise a topic when its first messages exist, and let those wait (at most
SUBSCRIBE_WAIT_S) for the connected clients to subscribe to it, since a client cannot
subscribe to a channel before it is advertised.
"""

from __future__ import annotations

import asyncio
import os
from typing import Protocol

from bridge_lake.export.messages import ExportTypes
from bridge_lake.export.writers import McapOutput
from bridge_lake.formats.ros.readers import RosChannel
from bridge_lake.play.server import PlayServer

ROS2 = 2
LIVE_COMPRESSION = "lz4"
"""The live MCAP's chunk compression: every poll waits for its chunk to be compressed
(flushed whole), and lz4 keeps that wait short; zstd packs tighter for files kept long
(the offline export)."""
SUBSCRIBE_WAIT_S = 0.5
"""How long the first messages of a new topic wait for the connected clients to subscribe."""


def channel_for(types: ExportTypes, topic: str, typename: str, latched: bool = False) -> RosChannel:
    """A topic's channel as the export's MCAP declares it (ROS 2 CDR, ros2msg schema)."""
    d = types.definition(typename, ROS2)
    return RosChannel(0, topic, d.name, d.encoding, d.text.encode(), "cdr", latched)


class Server(Protocol):
    async def start(self) -> None: ...
    async def add_channel(self, channel: RosChannel) -> int: ...
    async def wait_subscribed(self, channel_ids: list[int], timeout_s: float) -> None: ...
    async def send(self, channel_id: int, log_time: int, payload: bytes) -> None: ...
    async def broadcast_time(self, time_ns: int) -> None: ...
    async def stop(self) -> None: ...


class LiveServer(PlayServer):
    """The player's Foxglove WebSocket server, for topics that appear while live."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port, name="bridge-lake live")

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def wait_subscribed(self, channel_ids: list[int], timeout_s: float) -> None:
        """Until every connected client subscribed to `channel_ids`, at most `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline and not self.all_subscribed(channel_ids):
            await asyncio.sleep(0.002)


class LiveMcap:
    """An MCAP appended to as polls complete (see module)."""

    def __init__(self, path: str | os.PathLike[str], types: ExportTypes) -> None:
        self.path = str(path)
        self.output = McapOutput(path, encoding="ros2", compression=LIVE_COMPRESSION, types=types)
        self.channels: dict[str, int] = {}

    def channel(self, topic: str, typename: str, latched: bool = False) -> int:
        channel = self.channels.get(topic)
        if channel is None:
            channel = self.output.add_topic(topic, typename, latched=latched)
            self.channels[topic] = channel
        return channel

    def flush(self) -> None:
        """Whole chunks of everything written so far on disk (see module)."""
        self.output.writer.flush()

    def close(self, metadata: dict[str, str]) -> None:
        self.output.add_metadata("bridge_lake.live", metadata)
        self.output.close()


__all__ = ["LIVE_COMPRESSION", "LiveMcap", "LiveServer", "Server", "channel_for"]

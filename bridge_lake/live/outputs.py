"""Where live messages go: a live MCAP and a Foxglove WebSocket server.

`LiveMcap` appends each poll's messages to an MCAP and flushes whole chunks after every
poll (`McapWriter.flush`), so a bridge killed at any moment leaves a file of complete chunks
that readers of an MCAP without summary take (the mcap library's stream reader, `bridge-lake
recover`); a clean stop writes the summary and footer.

`Server` is the small interface the bridge needs from a Foxglove WebSocket server
(advertise a channel with its schema, send a message). `FoxgloveServerAdapter` implements it
on the `foxglove-websocket` package (asyncio; it sets TCP_NODELAY on every socket, the
receive-side figure that chose it for the player, shared/notes/foxglove-ws.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from dataclasses import dataclass
from typing import Any, Protocol

from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.messages import ExportTypes
from bridge_lake.export.writers import McapOutput

with warnings.catch_warnings():  # foxglove-websocket imports websockets' legacy server API
    warnings.simplefilter("ignore", DeprecationWarning)
    from foxglove_websocket.server import FoxgloveServer

ROS2 = 2
LIVE_COMPRESSION = "lz4"
"""The live MCAP's chunk compression: every poll waits for its chunk to be compressed
(flushed whole), and lz4 keeps that wait short; zstd packs tighter for files kept long
(the offline export)."""


@dataclass(frozen=True)
class LiveChannel:
    topic: str
    schema_name: str
    schema_encoding: str
    schema_data: bytes
    message_encoding: str


def channel_for(types: ExportTypes, topic: str, typename: str) -> LiveChannel:
    """A topic's channel as the export's MCAP declares it (ROS 2 CDR, ros2msg schema)."""
    d = types.definition(typename, ROS2)
    return LiveChannel(topic, d.name, d.encoding, d.text.encode(), "cdr")


SUBSCRIBE_WAIT_S = 0.5
"""How long the first messages of a new topic wait for the connected clients to subscribe to
it (a client cannot subscribe to a channel before it is advertised)."""


class Server(Protocol):
    async def start(self) -> None: ...
    async def add_channel(self, channel: LiveChannel) -> int: ...
    async def wait_subscribed(self, channel_ids: list[int], timeout_s: float) -> None: ...
    async def send(self, channel_id: int, log_time: int, payload: bytes) -> None: ...
    async def stop(self) -> None: ...


class ServerError(BridgeLakeError):
    """The WebSocket server cannot listen (port in use, bad host)."""


class FoxgloveServerAdapter:
    """`Server` on the `foxglove-websocket` package."""

    def __init__(self, host: str, port: int, name: str = "bridge-lake live") -> None:
        self.host, self.port, self.name = host, port, name
        self._server: FoxgloveServer | None = None

    async def start(self) -> None:
        quiet = logging.getLogger("bridge_lake.live.server")
        quiet.propagate = False
        quiet.addHandler(logging.NullHandler())
        server = FoxgloveServer(self.host, self.port, self.name, capabilities=[], logger=quiet)
        server.start()
        try:
            opened = await server.wait_opened()
        except OSError as exc:
            raise ServerError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None
        self.port = opened.sockets[0].getsockname()[1]
        self._server = server

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    async def add_channel(self, channel: LiveChannel) -> int:
        assert self._server is not None
        desc: Any = {
            "topic": channel.topic,
            "encoding": channel.message_encoding,
            "schemaName": channel.schema_name,
            "schema": channel.schema_data.decode("utf-8", "replace"),
            "schemaEncoding": channel.schema_encoding,
        }
        return int(await self._server.add_channel(desc))

    async def send(self, channel_id: int, log_time: int, payload: bytes) -> None:
        assert self._server is not None
        await self._server.send_message(channel_id, log_time, payload)

    async def wait_subscribed(self, channel_ids: list[int], timeout_s: float) -> None:
        """Until every connected client subscribed to `channel_ids`, at most `timeout_s`."""
        assert self._server is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            clients = self._server._clients  # the package has no accessor
            if all(c in x.subscriptions_by_channel for x in clients for c in channel_ids):
                return
            await asyncio.sleep(0.002)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        await self._server.wait_closed()
        self._server = None


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


__all__ = [
    "FoxgloveServerAdapter",
    "LiveChannel",
    "LiveMcap",
    "Server",
    "ServerError",
    "channel_for",
]

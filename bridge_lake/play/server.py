"""The Foxglove WebSocket server of `bridge-lake play` (and of `bridge-lake live`).

Built on `foxglove-websocket` (asyncio, on `websockets`), chosen by the receive-side figure:
asyncio sets TCP_NODELAY on every socket it accepts, so a small frame leaves at once; the
`foxglove-sdk` server (0.30.3) leaves Nagle's algorithm on and a local client saw 20-40 ms
receive jitter at 1,000 messages/s (docs/benchmarks.md, shared/notes/foxglove-ws.md).

The package speaks the protocol; this module adds through its hooks (subclassing the
server's message handlers) what it lacks:

- the `time` capability's clock (`broadcast_time`, the package's own),
- ranged playback: `dataStartTime`/`dataEndTime` in serverInfo, the client's binary Playback
  Control Request (opcode 3) handed to `on_playback`, and Playback State (opcode 5) sent back,
  with the layouts of the protocol as Foxglove's SDK defines them,
- latched channels: the last messages of a latched channel (/tf_static) go to every client
  that subscribes to it, also one that joins mid-play,
- ready frames for the player (`ready`, `gather`, `hand_over`): a message's whole WebSocket
  frame (the package's message-data header, `MessageDataHeader` and
  `BinaryOpcode.MESSAGE_DATA`, framed by `websockets`' own `Frame.serialize`) is built on the
  read-ahead thread; at the due time the player hands each subscribed client the frames of a
  group in one transport write, on the event loop's thread (where websockets writes every
  frame too, so frames never interleave). Through `connection.send` a message cost tens of
  µs of coroutine and framing work and one send() syscall each.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import struct
import warnings
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.ros.readers import RosChannel

with warnings.catch_warnings():  # foxglove-websocket imports websockets' legacy server API
    warnings.simplefilter("ignore", DeprecationWarning)
    from foxglove_websocket.server import (
        FoxgloveServer,
        FoxgloveServerListener,
        MessageDataHeader,
    )
    from foxglove_websocket.types import BinaryOpcode
    from websockets.exceptions import ConnectionClosed
    from websockets.frames import Frame, Opcode
    from websockets.protocol import State

CLIENT_PLAYBACK_CONTROL = 3
SERVER_PLAYBACK_STATE = 5
_CONTROL = struct.Struct("<BfBQI")  # command, speed, had_seek, seek_time, request_id length
_SUBSCRIPTION = struct.Struct("<I")
_STATE = struct.Struct("<BBQfBI")  # opcode, status, current_time, speed, did_seek, id length
PLAYING, PAUSED, BUFFERING, ENDED = 0, 1, 2, 3
LATCHED_KEEP = 64
"""Latched messages kept per channel (ROS keeps one per publisher; bags may hold several)."""
WRITE_LIMIT = 8 << 20
"""Bytes a client's transport may buffer before a send waits (websockets: 64 KiB): a lidar
scan of a few MB goes out while the player reads the next."""
BINARY_SCHEMAS = ("protobuf", "flatbuffer")
"""Schema encodings whose schema data is binary: base64 in the advertisement."""
JOIN_BYTES = 256 << 10
"""A group's frames up to this many bytes go to a client joined into one write (one send()
syscall); a larger group is written frame by frame (the copy would cost more than a call)."""


class PortInUseError(BridgeLakeError):
    """The port the server should listen on is taken."""


@dataclass(frozen=True)
class PlaybackRequest:
    """A client's Playback Control Request."""

    play: bool
    speed: float
    seek_ns: int | None
    request_id: str


def parse_playback_request(message: bytes) -> PlaybackRequest:
    """Opcode 3: command (0 play, 1 pause), speed f32, had_seek u8, seek_time u64 ns,
    request id (u32 length + UTF-8), little endian."""
    if len(message) < 1 + _CONTROL.size:
        raise ValueError(f"playback control request of {len(message)} bytes is too short")
    command, speed, had_seek, seek, n = _CONTROL.unpack_from(message, 1)
    start = 1 + _CONTROL.size
    if len(message) < start + n:
        raise ValueError("playback control request: request id runs past the message")
    if command not in (0, 1):
        raise ValueError(f"playback control request: unknown command {command}")
    rid = bytes(message[start : start + n]).decode("utf-8")
    return PlaybackRequest(command == 0, float(speed), int(seek) if had_seek else None, rid)


def playback_state(
    status: int, time_ns: int, speed: float, did_seek: bool, rid: str | None
) -> bytes:
    data = (rid or "").encode()
    return _STATE.pack(SERVER_PLAYBACK_STATE, status, time_ns, speed, did_seek, len(data)) + data


class Ready(NamedTuple):
    """A message as one ready WebSocket frame (see the module), built for subscription `sub`:
    a client subscribed under another id gets a copy with its id at `at`."""

    log_time: int
    channel: int
    frame: bytes
    sub: int
    at: int
    size: int
    """payload bytes"""
    latched: bytes | None
    """the payload, kept for later subscribers when the channel is latched"""


def message_frame(sub: int, log_time: int, payload: bytes) -> bytes:
    """One unmasked, unfragmented binary WebSocket frame holding a Message Data message."""
    data = MessageDataHeader.pack(BinaryOpcode.MESSAGE_DATA, sub, log_time) + payload
    return Frame(Opcode.BINARY, data).serialize(mask=False)


def _with_sub(r: Ready, sub: int) -> bytes:
    return r.frame[: r.at] + _SUBSCRIPTION.pack(sub) + r.frame[r.at + _SUBSCRIPTION.size :]


def _timestamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


class _Server(FoxgloveServer):
    """The package's server with ranged playback and latched channels added (see module)."""

    owner: PlayServer

    async def _send_server_info(self, connection: Any) -> None:
        info: dict[str, Any] = {
            "op": "serverInfo",
            "name": self.name,
            "capabilities": self.capabilities,
            "metadata": self.metadata or {},
            "sessionId": self.session_id,
        }
        if self.owner.data_range is not None:
            info["dataStartTime"] = _timestamp(self.owner.data_range[0])
            info["dataEndTime"] = _timestamp(self.owner.data_range[1])
        await self._send_json(connection, info)  # type: ignore[arg-type]

    async def _send_message_data(
        self, connection: Any, *, subscription: int, timestamp: int, payload: bytes
    ) -> None:
        """One WebSocket frame per message (the package sends header and payload as a
        fragmented message: three frames, three send() calls, ~30 µs each)."""
        data = MessageDataHeader.pack(BinaryOpcode.MESSAGE_DATA, subscription, timestamp)
        with contextlib.suppress(ConnectionClosed):  # a client gone: the others go on
            await connection.send(data + payload)

    async def _handle_client_text_message(self, client: Any, message: Any) -> None:
        before = set(client.subscriptions)
        await super()._handle_client_text_message(client, message)
        if message.get("op") == "subscribe":
            for sub_id in set(client.subscriptions) - before:
                await self.owner._replay_latched(client, sub_id, client.subscriptions[sub_id])

    async def _handle_client_binary_message(self, client: Any, message: bytes) -> None:
        if message and message[0] == CLIENT_PLAYBACK_CONTROL and self.owner.ranged:
            try:
                request = parse_playback_request(message)
            except (ValueError, struct.error) as exc:
                await self._send_status(client.connection, 2, f"bad playback control: {exc}")
                return
            self.owner._controllers.add(client.connection)
            if self.owner.on_playback is not None:
                self.owner.on_playback(request)
            return
        await super()._handle_client_binary_message(client, message)


class _Listener(FoxgloveServerListener):
    def __init__(self, owner: PlayServer) -> None:
        self.owner = owner

    def on_subscribe(self, server: Any, channel_id: int) -> None:
        self.owner.subscribed.set()

    def on_unsubscribe(self, server: Any, channel_id: int) -> None:
        return None


class PlayServer:
    """A Foxglove WebSocket server for recorded or live ROS channels; run inside an asyncio
    loop: `await start()`, `await add_channel(...)`, `await send(...)`, `await stop()`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8765,
        *,
        name: str = "bridge-lake",
        data_range: tuple[int, int] | None = None,
        on_playback: Callable[[PlaybackRequest], None] | None = None,
    ) -> None:
        self.host, self.port, self.name = host, port, name
        self.data_range = data_range
        self.ranged = data_range is not None
        self.on_playback = on_playback
        self.subscribed = asyncio.Event()
        """set when a client first subscribes to any channel"""
        self._latched: dict[int, deque[tuple[int, bytes]]] = {}
        self._server: _Server | None = None
        self._controllers: weakref.WeakSet[Any] = weakref.WeakSet()
        """connections that sent a Playback Control Request (only they get Playback State)"""

    async def start(self) -> None:
        caps = ["time"] + (["rangedPlayback"] if self.ranged else [])
        quiet = logging.getLogger("bridge_lake.play.server")
        quiet.propagate = False
        quiet.addHandler(logging.NullHandler())
        self._server = _Server(
            self.host,
            self.port,
            self.name,
            capabilities=caps,
            logger=quiet,
            server_kwargs={"compression": None, "write_limit": WRITE_LIMIT},
        )
        self._server.owner = self
        self._server.set_listener(_Listener(self))
        self._server.start()
        opened = asyncio.ensure_future(self._server.wait_opened())
        task = self._server._task
        await asyncio.wait({opened, task}, return_when=asyncio.FIRST_COMPLETED)
        if not opened.done():  # serve() failed: the package's task ended with its error
            opened.cancel()
            exc = task.exception() if not task.cancelled() else None
            self._server = None
            reason = getattr(exc, "strerror", None) or exc or "the server stopped"
            raise PortInUseError(f"cannot listen on {self.host}:{self.port}: {reason}")
        opened = opened.result()
        self.port = opened.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    async def add_channel(self, channel: RosChannel) -> int:
        """Advertise a channel with its own schema and encodings; the id to send on."""
        assert self._server is not None
        data = channel.schema_data
        if channel.schema_encoding in BINARY_SCHEMAS:
            schema = base64.b64encode(data).decode()
        else:
            schema = data.decode("utf-8", "replace")
        desc: dict[str, Any] = {
            "topic": channel.topic,
            "encoding": channel.message_encoding,
            "schemaName": channel.schema_name,
            "schema": schema,
        }
        if channel.schema_encoding:
            desc["schemaEncoding"] = channel.schema_encoding
        cid = await self._server.add_channel(desc)  # type: ignore[arg-type]
        if channel.latched:
            self._latched[cid] = deque(maxlen=LATCHED_KEEP)
        return cid

    async def send(self, channel_id: int, log_time: int, payload: bytes) -> None:
        """Hand one message to every subscribed client (latched ones are also kept)."""
        assert self._server is not None
        kept = self._latched.get(channel_id)
        if kept is not None:
            kept.append((log_time, payload))
        await self._server.send_message(channel_id, log_time, payload)

    def ready(self, channel_id: int, log_time: int, payload: bytes) -> Ready:
        """A message as a ready frame (any thread): built for the subscription id the first
        subscribed client uses now, which `gather` checks when it is due."""
        assert self._server is not None
        sub = 0
        for client in self._server._clients:
            got = client.subscriptions_by_channel.get(channel_id)
            if got is not None:
                sub = got
                break
        frame = message_frame(sub, log_time, payload)
        at = len(frame) - len(payload) - MessageDataHeader.size + 1
        kept = payload if channel_id in self._latched else None
        return Ready(log_time, channel_id, frame, sub, at, len(payload), kept)

    def gather(self, group: list[Ready]) -> list[tuple[Any, list[bytes]]]:
        """Per open client, the writes of `group`'s frames for its subscriptions (the event
        loop's thread; nothing may await between this and `hand_over`)."""
        assert self._server is not None
        out = []
        for client in self._server._clients:
            conn = client.connection
            transport = conn.transport
            if conn.state is not State.OPEN or transport is None or transport.is_closing():
                continue
            by_channel = client.subscriptions_by_channel
            frames = []
            for r in group:
                sub = by_channel.get(r.channel)
                if sub is not None:
                    frames.append(r.frame if sub == r.sub else _with_sub(r, sub))
            if len(frames) > 1 and sum(map(len, frames)) <= JOIN_BYTES:
                frames = [b"".join(frames)]
            if frames:
                out.append((transport, frames))
        return out

    def hand_over(self, group: list[Ready], writes: list[tuple[Any, list[bytes]]]) -> None:
        """Write what `gather` prepared (one transport write per client for a small group)
        and keep the latched messages."""
        for transport, frames in writes:
            for data in frames:
                transport.write(data)
        for r in group:
            if r.latched is not None:
                self._latched[r.channel].append((r.log_time, r.latched))

    def backlogged(self) -> bool:
        """Whether a client's transport holds more than WRITE_LIMIT unsent bytes."""
        assert self._server is not None
        for client in self._server._clients:
            transport = client.connection.transport
            if transport is not None and transport.get_write_buffer_size() >= WRITE_LIMIT:
                return True
        return False

    async def drain(self) -> None:
        """Wait until every client's transport is below its write limit again (websockets'
        own flow control); a client gone meanwhile is left to close."""
        assert self._server is not None
        for client in self._server._clients:
            with contextlib.suppress(ConnectionClosed):
                await client.connection.drain()

    def pending_writes(self) -> bool:
        """Whether a client's transport holds bytes its socket did not take yet."""
        assert self._server is not None
        for client in self._server._clients:
            transport = getattr(client.connection, "transport", None)
            if transport is not None and transport.get_write_buffer_size():
                return True
        return False

    def all_subscribed(self, channel_ids: list[int]) -> bool:
        """Whether every connected client has subscribed to each of `channel_ids` (the live
        bridge lets a new topic's first messages wait for that)."""
        assert self._server is not None
        clients = self._server._clients
        return all(c in x.subscriptions_by_channel for x in clients for c in channel_ids)

    def latch(self, channel_id: int, log_time: int, payload: bytes) -> None:
        """Keep a message of a latched channel for subscribers without sending it now."""
        kept = self._latched.get(channel_id)
        if kept is not None:
            kept.append((log_time, payload))

    async def broadcast_time(self, time_ns: int) -> None:
        assert self._server is not None
        await self._server.broadcast_time(time_ns)

    async def broadcast_state(
        self, status: int, time_ns: int, speed: float, did_seek: bool, rid: str | None = None
    ) -> None:
        """A Playback State to the clients that sent a Playback Control Request (after a
        request, a seek, or at the end): the state answers a client's requests, so a client
        that never sent one (a plain viewer or recorder) gets none (issue 31, item 5)."""
        assert self._server is not None
        if not self.ranged:
            return
        data = playback_state(status, time_ns, speed, did_seek, rid)
        for client in self._server._clients:
            if client.connection not in self._controllers:
                continue
            try:
                await client.connection.send(data)
            except Exception:  # noqa: S112 - a client gone while we sent: the others go on
                continue

    async def resend_latched(self) -> None:
        """Every kept latched message to its subscribers again (after a seek clients drop
        what they had)."""
        assert self._server is not None
        for cid, kept in self._latched.items():
            for log_time, payload in list(kept):
                await self._server.send_message(cid, log_time, payload)

    async def _replay_latched(self, client: Any, sub_id: int, channel_id: int) -> None:
        for log_time, payload in list(self._latched.get(channel_id, ())):
            assert self._server is not None
            await self._server._send_message_data(
                client.connection, subscription=sub_id, timestamp=log_time, payload=payload
            )

    async def stop(self) -> None:
        if self._server is None:
            return
        for client in list(self._server._clients):
            try:
                await asyncio.wait_for(client.connection.close(), 1.0)
            except Exception:  # noqa: S112 - closing a client that is already gone
                continue
        self._server.close()
        await self._server.wait_closed()
        self._server = None


__all__ = [
    "PAUSED",
    "PLAYING",
    "PlayServer",
    "PlaybackRequest",
    "PortInUseError",
    "Ready",
    "message_frame",
    "parse_playback_request",
    "playback_state",
]

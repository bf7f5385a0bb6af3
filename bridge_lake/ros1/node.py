"""A ROS 1 node that publishes: its topics registered with the master, TCPROS connections
served on the caller's asyncio loop, messages written to every subscriber.

How a subscriber reaches a publication (ROS/Technical Overview): the node registers the
topic with the master (`registerPublisher`), which tells the topic's subscribers
(`publisherUpdate`); each asks the node's slave API for a connection (`requestTopic`,
`slave`), connects to the TCPROS port and sends its connection header. The node checks the
topic and md5sum (`*` takes any), answers with type, md5sum, full definition and `latching`,
then sends a latched topic's last message at once (a subscriber that joins mid-play gets
/tf_static) and every message from then on.

Writes go through asyncio transports (TCP_NODELAY is set on every socket asyncio accepts, so
a small message leaves at once). A subscriber that does not read while WRITE_LIMIT bytes wait
for it loses messages, counted per topic (`Publication.dropped`), as a ROS publisher's
queue drops the oldest: one stuck node never stalls the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge_lake.formats.ros.ros1_form import Ros1Form
from bridge_lake.formats.ros.tcpros import (
    ANY_MD5,
    TcprosError,
    decode_header,
    encode_header,
    frame,
    header_length,
)
from bridge_lake.ros1.master import (
    MasterClient,
    Ros1Error,
    advertised_host,
    is_loopback,
    master_uri,
)
from bridge_lake.ros1.slave import SlaveServer, SlaveState

WRITE_LIMIT = 64 << 20
"""Bytes that may wait for one subscriber before its messages are dropped (see module)."""
CONNECT_WAIT_S = 2.0
"""How long `wait_connected` waits for the subscribers the master knew at registration."""


@dataclass(eq=False)
class Subscriber:
    """One TCPROS connection to a subscriber of one topic."""

    transport: asyncio.Transport
    callerid: str
    id: int
    dropped: int = 0


@dataclass(eq=False)
class Publication:
    """A topic this node publishes, and its subscribers' connections."""

    topic: str
    form: Ros1Form
    latched: bool
    subscribers: list[Subscriber] = field(default_factory=list)
    last: bytes | None = None
    """a latched topic's last message, framed: sent to every subscriber that joins"""
    expected: int = 0
    """subscribers the master knew when the topic was registered"""
    dropped: int = 0
    """messages not written to a subscriber that held WRITE_LIMIT unsent bytes"""

    def write(self, data: bytes, messages: int = 1) -> None:
        """Framed messages (`tcpros.frame`, joined) to every subscriber (see module)."""
        for s in self.subscribers:
            if s.transport.get_write_buffer_size() >= WRITE_LIMIT:
                s.dropped += messages
                self.dropped += messages
            else:
                s.transport.write(data)

    def publish(self, payload: bytes | memoryview) -> None:
        """One ROS 1 serialized message to every subscriber (latched: kept for later ones)."""
        data = frame(payload)
        if self.latched:
            self.last = data
        self.write(data)


class _Connection(asyncio.Protocol):
    """The TCPROS server side of one connection: read the subscriber's header, hand it to
    the node; after that a subscriber sends nothing."""

    def __init__(self, node: Ros1Node) -> None:
        self.node = node
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.subscriber: Subscriber | None = None
        self.publication: Publication | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.subscriber is not None or self.transport is None:
            return
        self.buffer += data
        if len(self.buffer) < 4:
            return
        try:
            n = header_length(self.buffer)
            if len(self.buffer) < 4 + n:
                return
            fields = decode_header(bytes(self.buffer[4 : 4 + n]))
        except TcprosError as exc:
            self.refuse(str(exc))
            return
        self.buffer.clear()
        self.node._handshake(self, fields)

    def refuse(self, reason: str) -> None:
        assert self.transport is not None
        self.transport.write(encode_header({"error": reason}))
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.publication is not None and self.subscriber in self.publication.subscribers:
            self.publication.subscribers.remove(self.subscriber)


class Ros1Node:
    """A publishing node (see module): `await start()`, `await advertise(...)`, write to the
    publications, `await stop()`. Runs on the asyncio loop that calls `start`."""

    def __init__(
        self,
        name: str,
        *,
        master: str | None = None,
        on_shutdown: Callable[[str], None] | None = None,
        on_join: Callable[[Publication], None] | None = None,
    ) -> None:
        self.master_uri = master or master_uri()
        self.caller_id = f"/{name}_{os.getpid()}_{time.time_ns() // 1_000_000}"
        """anonymous, as rosbag's /play_<ms>: two players never take each other's name"""
        self.host = advertised_host(self.master_uri)
        self.bind = "127.0.0.1" if is_loopback(self.host) else ""
        self.publications: dict[str, Publication] = {}
        self.shutdown_reason: str | None = None
        self._on_shutdown, self._on_join = on_shutdown, on_join
        self._server: asyncio.base_events.Server | None = None
        self._slave: SlaveServer | None = None
        self._master = MasterClient(self.master_uri, self.caller_id)
        self._ids = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Listen for TCPROS and the slave API (any free ports); nothing is registered yet."""
        self._loop = asyncio.get_running_loop()
        try:
            self._server = await self._loop.create_server(
                lambda: _Connection(self), self.bind or None, 0
            )
        except OSError as exc:
            raise Ros1Error(f"cannot listen for TCPROS: {exc.strerror or exc}") from exc
        port = self._server.sockets[0].getsockname()[1]
        state = SlaveState(self.master_uri, self.host, port, {}, self._bus)
        self._state = state
        self._slave = SlaveServer(self.bind, self.host, state, self._shutdown_requested)

    @property
    def uri(self) -> str:
        assert self._slave is not None
        return self._slave.uri

    async def advertise(self, topic: str, form: Ros1Form, latched: bool = False) -> Publication:
        """Register `topic` with the master as a publication of `form`'s type."""
        assert self._slave is not None, "start() first"
        if topic in self.publications:
            raise Ros1Error(f"{topic} is advertised twice")
        pub = Publication(topic, form, latched)
        self.publications[topic] = pub
        self._state.publications[topic] = form.type
        uri = self._slave.uri
        subscribers = await asyncio.to_thread(
            self._master.register_publisher, topic, form.type, uri
        )
        pub.expected = len(subscribers)
        return pub

    async def wait_connected(self, timeout_s: float = CONNECT_WAIT_S) -> None:
        """Until the subscribers the master knew at registration have connected (they are
        told by the master and connect within ms), at most `timeout_s`: the first messages
        then reach the nodes already running, as `rosbag play`'s delay after advertising."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(
            len(p.subscribers) < p.expected for p in self.publications.values()
        ):
            await asyncio.sleep(0.005)

    def all_subscribed(self, topics: list[str]) -> bool:
        """Whether each of `topics` has at least one subscriber."""
        return all(self.publications[t].subscribers for t in topics)

    async def stop(self) -> None:
        """Unregister every publication (a master gone meanwhile is not an error here), close
        the connections and the servers."""
        if self._slave is not None:
            uri = self._slave.uri
            for topic in list(self.publications):
                with contextlib.suppress(Ros1Error):
                    await asyncio.to_thread(self._master.unregister_publisher, topic, uri)
        for pub in self.publications.values():
            for s in list(pub.subscribers):
                s.transport.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):  # a transport already gone
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None
        if self._slave is not None:
            await asyncio.to_thread(self._slave.stop)
            self._slave = None

    # --- connections ---------------------------------------------------------------------------

    def _handshake(self, conn: _Connection, fields: dict[str, str]) -> None:
        topic = fields.get("topic", "")
        pub = self.publications.get(topic)
        if pub is None:
            conn.refuse(f"{self.caller_id} does not publish {topic or 'a topic without a name'}")
            return
        md5 = fields.get("md5sum", "")
        if md5 not in (ANY_MD5, pub.form.md5sum):
            conn.refuse(
                f"{fields.get('callerid', 'a subscriber')} wants {topic} as "
                f"{fields.get('type', '?')} [{md5}], published as {pub.form.type} "
                f"[{pub.form.md5sum}]"
            )
            return
        assert conn.transport is not None
        reply = {
            "callerid": self.caller_id,
            "topic": topic,
            "type": pub.form.type,
            "md5sum": pub.form.md5sum,
            "message_definition": pub.form.definition,
            "latching": "1" if pub.latched else "0",
        }
        conn.transport.write(encode_header(reply))
        if pub.latched and pub.last is not None:
            conn.transport.write(pub.last)
        self._ids += 1
        conn.subscriber = Subscriber(conn.transport, fields.get("callerid", ""), self._ids)
        conn.publication = pub
        pub.subscribers.append(conn.subscriber)
        if self._on_join is not None:
            self._on_join(pub)

    def _bus(self) -> list[list[Any]]:
        return [
            [s.id, s.callerid, "o", "TCPROS", p.topic, True]
            for p in list(self.publications.values())
            for s in list(p.subscribers)
        ]

    def _shutdown_requested(self, reason: str) -> None:
        """From the slave API's thread: handed to the loop."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._shut_down, reason)

    def _shut_down(self, reason: str) -> None:
        self.shutdown_reason = reason
        if self._on_shutdown is not None:
            self._on_shutdown(reason)


__all__ = ["CONNECT_WAIT_S", "WRITE_LIMIT", "Publication", "Ros1Node", "Subscriber"]

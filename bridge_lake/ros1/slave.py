"""A node's slave XML-RPC API for a node that only publishes (the ROS wiki's ROS/Slave_API).

Subscribers ask it for a connection (`requestTopic`: TCPROS, host and port); `rosnode`
asks for the pid, the master, the bus; the master or `rosnode kill` call `shutdown`. It
runs on a thread of its own (stdlib `xmlrpc.server`): the calls are rare (a subscriber
joining), and the answers read only what the node keeps (`SlaveState`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer

from bridge_lake.errors import BridgeLakeError

SUCCESS, FAILURE = 1, 0


@dataclass
class SlaveState:
    """What the slave API answers from: the node's publications and where TCPROS listens."""

    master_uri: str
    tcp_host: str
    tcp_port: int = 0
    publications: dict[str, str] = field(default_factory=dict)
    """topic -> ROS 1 type"""
    bus: Callable[[], list[list[Any]]] = list
    """getBusInfo's rows: [id, destination, direction, transport, topic, connected]"""


class _Quiet(SimpleXMLRPCRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


class SlaveServer:
    """The slave API on `host` (any free port) until `stop()`; `uri` is what the master gets."""

    def __init__(
        self, bind: str, host: str, state: SlaveState, on_shutdown: Callable[[str], None]
    ) -> None:
        self.state, self.on_shutdown = state, on_shutdown
        try:
            self._server = SimpleXMLRPCServer(
                (bind, 0), _Quiet, logRequests=False, allow_none=False
            )
        except OSError as exc:
            raise BridgeLakeError(
                f"cannot listen for the ROS slave API on {bind or '*'}: {exc.strerror or exc}"
            ) from exc
        self.uri = f"http://{host}:{self._server.server_address[1]}/"
        for name in (
            "requestTopic", "getPid", "getMasterUri", "getPublications", "getSubscriptions",
            "getBusInfo", "getBusStats", "publisherUpdate", "paramUpdate", "shutdown",
        ):  # fmt: skip
            self._server.register_function(getattr(self, name), name)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="ros1-slave", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)

    # --- the API (caller_id first in every call) ----------------------------------------------

    def requestTopic(self, caller_id: str, topic: str, protocols: list) -> list:
        if topic not in self.state.publications:
            return [FAILURE, f"{topic} is not published by this node", []]
        if not any(p and p[0] == "TCPROS" for p in protocols):
            return [FAILURE, "this node speaks TCPROS only", []]
        return [SUCCESS, "ready", ["TCPROS", self.state.tcp_host, self.state.tcp_port]]

    def getPid(self, caller_id: str) -> list:
        return [SUCCESS, "", os.getpid()]

    def getMasterUri(self, caller_id: str) -> list:
        return [SUCCESS, "", self.state.master_uri]

    def getPublications(self, caller_id: str) -> list:
        return [SUCCESS, "", [[t, ty] for t, ty in sorted(self.state.publications.items())]]

    def getSubscriptions(self, caller_id: str) -> list:
        return [SUCCESS, "", []]

    def getBusInfo(self, caller_id: str) -> list:
        return [SUCCESS, "", self.state.bus()]

    def getBusStats(self, caller_id: str) -> list:
        return [SUCCESS, "", [[], [], []]]

    def publisherUpdate(self, caller_id: str, topic: str, publishers: list) -> list:
        return [SUCCESS, "this node subscribes to nothing", 0]

    def paramUpdate(self, caller_id: str, key: str, value: Any) -> list:
        return [SUCCESS, "", 0]

    def shutdown(self, caller_id: str, message: str = "") -> list:
        self.on_shutdown(
            f"{caller_id} asked this node to shut down{': ' + message if message else ''}"
        )
        return [SUCCESS, "shutting down", 0]


__all__ = ["SlaveServer", "SlaveState"]

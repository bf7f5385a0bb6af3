"""The ROS master's XML-RPC API as a publisher uses it (the ROS wiki's ROS/Master_API).

Every call answers `[code, statusMessage, value]`: code 1 is success, 0 a failure, -1 an
error in the call; anything but 1 becomes a `Ros1Error` quoting the master's message.
"""

from __future__ import annotations

import http.client
import os
import socket
import xmlrpc.client
from typing import Any
from urllib.parse import urlparse

from bridge_lake.errors import BridgeLakeError

DEFAULT_MASTER_URI = "http://localhost:11311"
"""What ROS uses when ROS_MASTER_URI is not set."""
CALL_TIMEOUT_S = 5.0
LOOPBACK_HOSTS = ("localhost", "ip6-localhost", "::1")


class Ros1Error(BridgeLakeError):
    """The ROS master is unreachable or refused a call; a subscriber broke the protocol."""


def master_uri() -> str:
    """$ROS_MASTER_URI, or ROS's default."""
    return os.environ.get("ROS_MASTER_URI") or DEFAULT_MASTER_URI


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def advertised_host(master: str) -> str:
    """The host name other nodes reach this one at, as ROS picks it: $ROS_HOSTNAME, then
    $ROS_IP; else 127.0.0.1 when the master is on this machine's loopback (a local graph
    stays off the network), else the machine's host name."""
    for key in ("ROS_HOSTNAME", "ROS_IP"):
        if os.environ.get(key):
            return os.environ[key]
    if is_loopback(urlparse(master).hostname or ""):
        return "127.0.0.1"
    return socket.gethostname()


class _Transport(xmlrpc.client.Transport):
    """xmlrpc.client's transport with a timeout, so a master that hangs cannot hang us."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout

    def make_connection(self, host: Any) -> http.client.HTTPConnection:
        conn = super().make_connection(host)
        conn.timeout = self.timeout
        return conn


def proxy(uri: str, timeout: float = CALL_TIMEOUT_S) -> xmlrpc.client.ServerProxy:
    return xmlrpc.client.ServerProxy(uri, transport=_Transport(timeout))


class MasterClient:
    """The master's API calls a publishing node makes, as `caller_id`."""

    def __init__(self, uri: str, caller_id: str) -> None:
        self.uri, self.caller_id = uri, caller_id

    def _call(self, method: str, *args: Any) -> Any:
        try:
            code, message, value = getattr(proxy(self.uri), method)(self.caller_id, *args)
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise Ros1Error(
                f"cannot reach the ROS master at {self.uri} ($ROS_MASTER_URI): {reason}; "
                "start roscore or set ROS_MASTER_URI"
            ) from exc
        except (xmlrpc.client.Fault, xmlrpc.client.ProtocolError, ValueError) as exc:
            raise Ros1Error(f"the ROS master at {self.uri} failed {method}: {exc}") from exc
        if code != 1:
            raise Ros1Error(f"the ROS master at {self.uri} refused {method}: {message}")
        return value

    def register_publisher(self, topic: str, typename: str, caller_api: str) -> list[str]:
        """Announce a publication; the slave URIs of the topic's current subscribers."""
        return list(self._call("registerPublisher", topic, typename, caller_api))

    def unregister_publisher(self, topic: str, caller_api: str) -> None:
        self._call("unregisterPublisher", topic, caller_api)


__all__ = [
    "DEFAULT_MASTER_URI",
    "MasterClient",
    "Ros1Error",
    "advertised_host",
    "is_loopback",
    "master_uri",
    "proxy",
]

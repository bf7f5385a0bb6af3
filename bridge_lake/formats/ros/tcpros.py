"""TCPROS, ROS 1's topic transport, both directions (the ROS wiki's ROS/TCPROS and
ROS/Connection Header).

A connection starts with each side's connection header: a uint32 length, then fields, each a
uint32 length and `key=value` (the value may hold `=`; the key is up to the first one). The
subscriber sends `callerid`, `topic`, `md5sum`, `type` (and `tcp_nodelay=1`); the publisher
answers `callerid`, `md5sum`, `type`, `message_definition` (and `latching=1`) or `error=...`.
Then every message goes as a uint32 length and its ROS 1 serialized bytes, the bytes of a
bag's message data record. All integers little endian.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from bridge_lake.errors import BridgeLakeError

LENGTH = struct.Struct("<I")
MAX_HEADER = 1 << 20
"""A connection header larger than this is refused (a definition is a few KB; a length past
it is a peer that does not speak TCPROS)."""
ANY_MD5 = "*"
"""The md5sum a subscriber of any type sends (rostopic, ShapeShifter subscribers)."""


class TcprosError(BridgeLakeError):
    """A connection header that does not follow ROS/Connection Header."""


def encode_header(fields: Mapping[str, str]) -> bytes:
    """A whole connection header: its uint32 length, then each field length-prefixed."""
    parts = []
    for key, value in fields.items():
        if not key or "=" in key:
            raise TcprosError(f"connection header key {key!r} is empty or holds '='")
        item = f"{key}={value}".encode()
        parts.append(LENGTH.pack(len(item)) + item)
    body = b"".join(parts)
    return LENGTH.pack(len(body)) + body


def header_length(prefix: bytes) -> int:
    """The body length a connection header's first 4 bytes announce (checked)."""
    (n,) = LENGTH.unpack_from(prefix)
    if n > MAX_HEADER:
        raise TcprosError(f"connection header of {n} bytes announced (more than {MAX_HEADER})")
    return n


def decode_header(body: bytes) -> dict[str, str]:
    """The fields of a connection header's body (the bytes after its length)."""
    fields: dict[str, str] = {}
    at = 0
    while at < len(body):
        if at + 4 > len(body):
            raise TcprosError(f"connection header: a field length cut at byte {at}")
        (n,) = LENGTH.unpack_from(body, at)
        at += 4
        if at + n > len(body):
            raise TcprosError(
                f"connection header: a field of {n} bytes at byte {at} runs past its end"
            )
        key, eq, value = body[at : at + n].decode("utf-8", "replace").partition("=")
        if not eq:
            raise TcprosError(f"connection header: field at byte {at} has no '='")
        fields[key] = value
        at += n
    return fields


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """One message on the wire: its length, then its ROS 1 serialized bytes."""
    return LENGTH.pack(len(payload)) + payload


__all__ = [
    "ANY_MD5",
    "LENGTH",
    "TcprosError",
    "decode_header",
    "encode_header",
    "frame",
    "header_length",
]

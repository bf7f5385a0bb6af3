"""Header stamps inside serialized ROS 1 / CDR messages: where they are, read and shifted.

Most sensor messages open with a std_msgs/Header (or, without one, a Time): its stamp then
sits at a fixed offset. Whether a type opens so is read from the message definition the file
carries for it (the MCAP schema's ros1msg / ros2msg text, a bag's connection header), so
types generated per export (DDL structs) are found like the standard ones, with no typestore.
A tf2_msgs/TFMessage holds one header per transform, found by walking the message.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from bridge_lake.clock import NS_PER_S
from bridge_lake.errors import BridgeLakeError

TF_MESSAGE = "tf2_msgs/msg/TFMessage"
HEADER_TYPES = frozenset(
    {"Header", "std_msgs/Header", "std_msgs/msg/Header", "std_msgs::msg::Header"}
)
TIME_TYPES = frozenset(
    {
        "time",
        "builtin_interfaces/Time",
        "builtin_interfaces/msg/Time",
        "builtin_interfaces::msg::Time",
    }
)
IDL_SKIPPED = ("@", "//", "#", "module ", "struct ", "}", "const ", "typedef ", "#include")
"""Lines of an IDL definition (ros2idl) before the first member of its struct."""
BLOCK_RULE = "\n" + "=" * 80 + "\n"
"""Separates a definition's dependencies (ROS 1 and ros2msg alike)."""


class StampError(BridgeLakeError):
    """A serialized message whose stamps cannot be where its type says."""


def definition_text(schema_encoding: str, schema_data: bytes) -> str:
    """The message definition a schema record holds (ros1msg / ros2msg text), "" when it
    holds none (protobuf, JSON Schema, IDL)."""
    if schema_encoding not in ("ros1msg", "ros2msg"):
        return ""
    return schema_data.decode("utf-8", "replace")


def opening_field(definition: str) -> str | None:
    """`header` when the definition's first field is a std_msgs/Header, `time` when it is a
    Time, else None (constants and comments skipped); ros1msg / ros2msg text, or ros2idl."""
    idl = "module " in definition and "struct " in definition
    for line in definition.split(BLOCK_RULE, 1)[0].splitlines():
        text = line.strip()
        if idl and (not text or text.startswith(IDL_SKIPPED)):
            continue
        words = (text.rstrip(";") if idl else text.split("#", 1)[0]).split()
        if len(words) < 2 or "=" in text.split("#", 1)[0]:
            continue
        if words[0] in HEADER_TYPES:
            return "header"
        if words[0] in TIME_TYPES:
            return "time"
        return None
    return None


def stamp_positions(typename: str, encoding: str, data: bytes, definition: str = "") -> list[int]:
    """Byte offsets of the header stamps (sec, nanosec: two 32-bit words) in one serialized
    message of `typename` whose definition text is `definition`: the Header (or Time) that
    opens it, every transform's header in a TFMessage; [] when the type has none or the
    encoding is not CDR / ROS 1."""
    if encoding not in ("cdr", "ros1"):
        return []
    if typename == TF_MESSAGE:
        try:
            stamps = tf_stamps(data, encoding == "cdr")
        except struct.error:
            stamps = None
        if stamps is None or any(p + 8 > len(data) for p in stamps):
            raise StampError(f"a {typename} message of {len(data)} bytes is malformed")
        return stamps
    first = opening_field(definition)
    if first == "header":
        return [4]
    if first == "time":
        return [4] if encoding == "cdr" else [0]
    return []


def tf_stamps(data: bytes, cdr: bool) -> list[int]:
    """Stamp offsets of every TransformStamped of a TFMessage (CDR alignment is relative to the
    byte after the 4-byte encapsulation header; ROS 1 has no alignment and a Header.seq)."""
    base = 4 if cdr else 0

    def align(pos: int, n: int) -> int:
        return base + -(-(pos - base) // n) * n if cdr else pos

    pos = base
    (count,) = struct.unpack_from("<I", data, pos)
    pos += 4
    out = []
    for _ in range(count):
        pos = align(pos, 4)
        if not cdr:
            pos += 4  # Header.seq
        out.append(pos)
        pos += 8
        for _ in range(2):  # frame_id, child_frame_id
            pos = align(pos, 4)
            (n,) = struct.unpack_from("<I", data, pos)
            pos += 4 + n
        pos = align(pos, 8) + 56  # translation (3 float64) + rotation (4 float64)
    if pos > len(data):
        raise struct.error(f"the transforms end at byte {pos}, after the message")
    return out


def read_stamp(data: bytes, pos: int, encoding: str) -> int:
    """The stamp at `pos` in ns (CDR: int32 sec; ROS 1: uint32 sec)."""
    sec, nsec = struct.unpack_from("<iI" if encoding == "cdr" else "<II", data, pos)
    return sec * NS_PER_S + nsec


def shift_stamps(data: bytes, positions: Sequence[int], shift_ns: int, encoding: str) -> bytes:
    """The message with every stamp at `positions` moved by `shift_ns`."""
    out = bytearray(data)
    fmt = "<iI" if encoding == "cdr" else "<II"
    for pos in positions:
        sec, nsec = divmod(read_stamp(data, pos, encoding) + shift_ns, NS_PER_S)
        struct.pack_into(fmt, out, pos, sec, nsec)
    return bytes(out)


__all__ = [
    "StampError",
    "definition_text",
    "opening_field",
    "read_stamp",
    "shift_stamps",
    "stamp_positions",
    "tf_stamps",
]

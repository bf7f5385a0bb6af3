"""The magic bytes of MCAP files and ROS 1 bags, defined once for the whole project."""

from __future__ import annotations

MCAP_MAGIC = b"\x89MCAP0\r\n"
"""An MCAP file starts and ends with these 8 bytes (MCAP spec, "Magic")."""
BAG1_MAGIC = b"#ROSBAG V2.0\n"
"""The version line that opens a ROS 1 bag of format 2.0 (the only one rosbag writes)."""
HEAD_BYTES = max(len(MCAP_MAGIC), len(BAG1_MAGIC))
"""Bytes to read from the start of a file to tell the two apart."""


def ros_kind(head: bytes) -> str | None:
    """ "mcap", "bag1" or None for the first bytes of a file (content decides, not the name)."""
    if head.startswith(MCAP_MAGIC):
        return "mcap"
    if head.startswith(BAG1_MAGIC):
        return "bag1"
    return None

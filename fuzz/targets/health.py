"""`bridge-lake health`: MCAP files and ROS 1 bags opened and every message decoded by the
independent readers (mcap, mcap_ros2, mcap_protobuf, rosbags), then judged and rendered.

Input: one selector byte (MCAP or ROS 1 bag), then the file's bytes."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.export.health import check_file, render_html, render_table
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 16 << 10


def seeds(work: Path) -> dict[str, bytes]:
    out = {p.name: b"\0" + p.read_bytes() for p in corpus.small_mcaps(work)}
    out["bag1"] = b"\1" + corpus.small_bag1(work).read_bytes()
    return {k: v for k, v in out.items() if len(v) <= MAX_LEN}


def one_input(data: bytes) -> None:
    if not data:
        return
    name = "input.bag" if data[0] & 1 else "input.mcap"
    health = check_file(scratch_file(name, data[1:]))
    render_table(health)
    render_html(health)
    health.to_json()

"""The export topic mapping YAML (`export/mappings/<source>.yaml` and `--mapping FILE`)."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.export.mapping import MAPPINGS, load_mapping
from fuzz.targets import scratch_file

MAX_LEN = 16 << 10


def seeds(work: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes()[:MAX_LEN] for p in sorted(MAPPINGS.glob("*.yaml"))}


def one_input(data: bytes) -> None:
    mapping = load_mapping(scratch_file("topics.yaml", data))
    for rule in mapping.topics:
        rule.topic_for("stream1@rec.dat")
        rule.selects("stream", "x")

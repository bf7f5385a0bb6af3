"""The export topic mapping YAML (`export/mappings/<source>.yaml` and `--mapping FILE`)."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.export.mapping import MAPPINGS, load_mapping
from fuzz.targets import scratch_file

MAX_LEN = 16 << 10


def seeds(work: Path) -> dict[str, bytes]:
    """The shipped mappings, and each of their topics alone (small inputs mutate faster)."""
    import yaml

    out = {}
    for path in sorted(MAPPINGS.glob("*.yaml")):
        out[path.name] = path.read_bytes()[:MAX_LEN]
        for i, topic in enumerate(yaml.safe_load(path.read_bytes())["topics"]):
            out[f"{path.stem}{i}"] = yaml.safe_dump({"version": 1, "topics": [topic]}).encode()
    return out


def one_input(data: bytes) -> None:
    mapping = load_mapping(scratch_file("topics.yaml", data))
    for rule in mapping.topics:
        rule.topic_for("stream1@rec.dat")
        rule.selects("stream", "x")

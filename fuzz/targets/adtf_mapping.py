"""The ADTF stream-to-table mapping YAML (`normalize/adtf_mapping.yaml` and users' own):
loaded, validated, and looked up for a stream."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.normalize.adtf_mapping import default_mapping_path, load_mapping
from fuzz.targets import scratch_file

MAX_LEN = 16 << 10


def seeds(work: Path) -> dict[str, bytes]:
    """The shipped default, and each of its rules alone (small inputs mutate faster)."""
    import yaml

    text = default_mapping_path().read_bytes()
    out = {"default": text[:MAX_LEN]}
    for i, rule in enumerate(yaml.safe_load(text)["rules"]):
        out[f"rule{i}"] = yaml.safe_dump({"version": 1, "rules": [rule]}).encode()
    return out


def one_input(data: bytes) -> None:
    mapping = load_mapping(scratch_file("mapping.yaml", data))
    mapping.lookup("imu", "adtf/default", "tIMU", {"md_struct": "tIMU"})

"""Rig calibration YAMLs (`calibrate/rigs/*.yaml`, $BRIDGE_LAKE_RIGS): validated, every
frame composed to the base, the ground-truth world mapping built."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.calibrate.rig import SHIPPED_RIGS, load_rig
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 16 << 10


def seeds(work: Path) -> dict[str, bytes]:
    """The shipped rigs, and each of their frames alone (small inputs mutate faster)."""
    import yaml

    out = {}
    for path in sorted(SHIPPED_RIGS.glob("*.yaml")):
        out[path.name] = path.read_bytes()[:MAX_LEN]
        doc = yaml.safe_load(path.read_bytes())
        for name, frame in doc["frames"].items():
            small = {k: doc[k] for k in ("vehicle", "valid_from")} | {"frames": {name: frame}}
            if isinstance(frame, dict) and frame.get("parent", "base_link") == "base_link":
                out[f"{path.stem}-{name}"] = yaml.safe_dump(small).encode()
    if corpus.NCLT_CALIBRATION.is_file():
        out["nclt-calibration"] = corpus.NCLT_CALIBRATION.read_bytes()[:MAX_LEN]
    return out


def one_input(data: bytes) -> None:
    rig = load_rig(scratch_file("rig.yaml", data))
    for name in rig.frames:
        rig.to_base(name)
    gt = rig.ground_truth
    if gt is not None and gt.linearization is not None and gt.axes == "ned":
        gt.linearized_ned()

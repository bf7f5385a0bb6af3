"""`bridge-lake replay-check`: a scene MCAP and its JSON manifest, either of them hostile
(the other the seed scene's), through the data, timing and content levels.

Input: one selector byte (even: the bytes are the scene file; odd: the manifest)."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.scenes.replay import replay_check
from bridge_lake.scenes.replay_report import render_html, render_json, render_table
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 16 << 10
_SEED: tuple[bytes, bytes] | None = None


def seeds(work: Path) -> dict[str, bytes]:
    global _SEED
    mcap, manifest = corpus.scene(work)
    _SEED = (mcap.read_bytes(), manifest.read_bytes())
    return {"scene": b"\0" + _SEED[0], "manifest": b"\1" + _SEED[1]}


def one_input(data: bytes) -> None:
    if not data or _SEED is None:
        return
    scene, manifest = (_SEED[0], data[1:]) if data[0] & 1 else (data[1:], _SEED[1])
    path = scratch_file("scene/seed-scene.mcap", scene)
    scratch_file("scene/seed-scene.json", manifest)
    report = replay_check(path)
    render_table(report)
    render_json(report)
    render_html(report)

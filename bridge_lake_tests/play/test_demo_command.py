"""`make demo` ends with the play command of a clean scene it made."""

from __future__ import annotations

import io

from bridge_lake.demo import _print_play_command


def test_demo_prints_the_play_command_of_a_clean_scene(tmp_path):
    scenes = tmp_path / "exports" / "drive=d1" / "scenes"
    scenes.mkdir(parents=True)
    for name in ("d1-b.json", "d1-a--faults.json", "d1-a.json", "d1-a.mcap"):
        (scenes / name).write_text("{}")
    out = io.StringIO()
    _print_play_command(tmp_path, out)
    text = out.getvalue()
    assert f"bridge-lake play {scenes / 'd1-a.json'}" in text
    assert "ws://127.0.0.1:8765" in text
    out = io.StringIO()
    _print_play_command(tmp_path / "empty", out)
    assert out.getvalue() == ""

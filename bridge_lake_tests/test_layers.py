"""The import graph runs one way (docs/ARCHITECTURE.md): read every module's imports with
`ast` and check the layer rules, so a wrong-way import fails here, not in a later review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bridge_lake"

FORMATS_MAY_USE = {"formats", "errors", "geometry", "clock"}
"""formats/ is usable as a library: besides itself, only these project modules."""
LOW_LAYERS = {"normalize", "formats", "lake", "geometry"}
HIGH_LAYERS = {"scenes", "export", "calibrate", "waypoints", "defs"}
DAGSTER_LAYER = {"defs", "definitions", "demo"}
PROTOBUF_HOMES = ("export/kinds/", "export/protobuf/")
"""Protobuf messages are written by the message kinds (`export.kinds`) with the wire and
schemas of `export.protobuf`: nothing else builds Foxglove messages."""


def _modules() -> list[tuple[str, list[str]]]:
    """(module's first package under bridge_lake, absolute names it imports) per file."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("").parts
        names = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
        found.append(("/".join(rel), rel[0], names))
    return found


MODULES = _modules()


def _project_package(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "bridge_lake" and len(parts) > 1 else None


def test_the_walk_sees_the_package():
    assert len(MODULES) > 100
    assert any(top == "formats" for _, top, _ in MODULES)


def _violations(rule: str, modules: list[tuple[str, str, list[str]]]) -> list[str]:
    wrong = []
    for module, top, names in modules:
        for name in names:
            package, root = _project_package(name), name.split(".")[0]
            bad = (
                (rule == "formats" and top == "formats" and package not in (None, *FORMATS_MAY_USE))
                or (rule == "low_layers" and top in LOW_LAYERS and package in HIGH_LAYERS)
                or (rule == "dagster" and root == "dagster" and top not in DAGSTER_LAYER)
                or (rule == "pyav" and root == "av" and module != "formats/video/codec")
                or (
                    rule == "protobuf_schemas"
                    and root == "foxglove_schemas_protobuf"
                    and not module.startswith(PROTOBUF_HOMES)
                )
            )
            if bad:
                wrong.append(f"{module} imports {name}")
    return wrong


RULES = ["formats", "low_layers", "dagster", "pyav", "protobuf_schemas"]


@pytest.mark.parametrize("rule", RULES)
def test_imports_point_one_way(rule):
    assert _violations(rule, MODULES) == []


def test_each_rule_catches_its_wrong_import():
    fake = [
        ("formats/x", "formats", ["bridge_lake.export.mapping", "bridge_lake.clock"]),
        ("normalize/y", "normalize", ["bridge_lake.scenes.camera_stats", "bridge_lake.lake"]),
        ("export/z", "export", ["dagster", "bridge_lake.formats.video"]),
        ("scenes/w", "scenes", ["av.video", "numpy"]),
        ("scenes/v", "scenes", ["foxglove_schemas_protobuf.Pose_pb2"]),
        ("export/kinds/imu", "export", ["foxglove_schemas_protobuf.Pose_pb2"]),
    ]
    assert {rule: _violations(rule, fake) for rule in RULES} == {
        "formats": ["formats/x imports bridge_lake.export.mapping"],
        "low_layers": [
            "formats/x imports bridge_lake.export.mapping",
            "normalize/y imports bridge_lake.scenes.camera_stats",
        ],
        "dagster": ["export/z imports dagster"],
        "pyav": ["scenes/w imports av.video"],
        "protobuf_schemas": ["scenes/v imports foxglove_schemas_protobuf.Pose_pb2"],
    }

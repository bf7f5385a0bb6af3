"""Code versions of the assets, from the source they run: Dagster's own staleness then says
which drives a code change touches.

An asset's code version is a digest of every module of the package its step imports,
directly or not (found by reading the import statements, not by importing), and of the data
files beside those modules (mappings, rig files, SQL, DDL) that shape its output. Changing a
normalizer changes the version of `normalized` (and of nothing that does not import it), so
that asset, and through new data versions its downstream, becomes stale; a comment in the
player changes no asset. The other asset modules of defs/ are not followed: a step takes only
names from them (asset keys, table lists), and their own code has versions of its own.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "bridge_lake"
ROOT = Path(__file__).resolve().parents[1]
DATA_SUFFIXES = frozenset({".yaml", ".yml", ".sql", ".proto", ".description"})
ASSET_MODULES = frozenset(
    f"{PACKAGE}.defs.{name}"
    for name in ("raw", "normalized", "calibrated", "exports", "scenes", "scene_sets", "waypoints")
)
"""The defs modules that define assets: not followed from another asset's module."""
REPO_SQL = ROOT.parent / "sql" / "scenes"
"""The scene rules of a source checkout (scene_catalog reads them; not in the package)."""


def _module_file(name: str) -> Path | None:
    rel = Path(*name.split("."))
    for candidate in (ROOT.parent / rel / "__init__.py", ROOT.parent / rel.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


_IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+(" + PACKAGE.encode() + rb"[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)"
    rb"|import[ \t]+(" + PACKAGE.encode() + rb"[\w.]*))",
    re.MULTILINE,
)
"""`from bridge_lake.x import a, b` (parentheses over lines too) and `import bridge_lake.x`,
at any indentation: the package never imports relatively (ruff's isort keeps it so)."""


@functools.cache
def _source(path: Path) -> bytes:
    return path.read_bytes()


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """The package modules `path` imports, at any depth of its code (names imported from a
    module are tried as submodules too: `from bridge_lake.formats import video`)."""
    found: set[str] = set()
    for m in _IMPORT.finditer(_source(path)):
        if m.group(3):
            found.add(m.group(3).decode())
            continue
        base = m.group(1).decode()
        found.add(base)
        names = re.sub(rb"#[^\n]*", b"", m.group(2)).strip(b"() \t\n")
        for item in names.split(b","):
            name = item.split()[0].decode() if item.split() else ""
            if name.isidentifier():
                found.add(f"{base}.{name}")
    return frozenset(found)


@functools.cache
def closure(root: str) -> tuple[Path, ...]:
    """The source files of `root` and of every package module it imports, transitively (the
    parents' `__init__` included, as Python runs them), except other asset modules."""
    seen: dict[str, Path] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen or (name in ASSET_MODULES and name != root):
            continue
        path = _module_file(name)
        if path is None:  # a name imported from a module, not a module
            continue
        seen[name] = path
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += parents + sorted(_imports(path))
    return tuple(sorted(set(seen.values())))


def _data_files(sources: Iterable[Path]) -> list[Path]:
    """Data files in the folders of `sources` and in their data-only subfolders (no Python
    module: the shipped mappings, rigs, protobuf schemas)."""
    folders = {p.parent for p in sources}
    folders |= {
        sub
        for d in list(folders)
        for sub in d.iterdir()
        if sub.is_dir() and not any(sub.rglob("*.py"))
    }
    return sorted(
        f for d in folders for f in d.glob("*") if f.is_file() and f.suffix in DATA_SUFFIXES
    )


@functools.cache
def code_version(root: str, *extra: str | Path) -> str:
    """The code version of the asset defined in module `root`: its import closure and the
    data files in those modules' folders, plus `extra` files or folders."""
    sources = list(closure(root))
    files = sources + _data_files(sources)
    for e in map(Path, extra):
        files += sorted(f for f in e.rglob("*") if f.is_file()) if e.is_dir() else [e]
    h = hashlib.sha256()
    for f in sorted(set(files)):
        if f.exists():
            h.update(
                str(f.relative_to(ROOT.parent) if f.is_relative_to(ROOT.parent) else f).encode()
            )
            h.update(b"\0")
            h.update(hashlib.sha256(_source(f)).digest())
    return h.hexdigest()[:16]

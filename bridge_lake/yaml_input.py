"""YAML from files people and tools hand us (drive.yaml, mappings, rigs, scene params and
fault specs): safe, fast and bounded whatever the text.

`yaml.safe_load` constructs no objects from tags, but its pure-Python scanner takes seconds
on deep flow nesting before the composer recurses out (5,000 `[` in a 10 KB file: 24 CPU s
under tracing, found by fuzzing). libyaml's scanner (CSafeLoader) refuses nesting beyond
1,000 levels in microseconds; without libyaml the flow depth is checked first. Invalid
dates (`2012-13-08`) raise ValueError inside PyYAML's constructor: they are YAML errors here.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_FLOW_DEPTH = 1000
"""What libyaml allows; the pure-Python fallback checks the same before parsing."""
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str | bytes, *, aliases: bool = True) -> Any:
    """`yaml.safe_load`, bounded; every failure is a `yaml.YAMLError`. With `aliases=False` a
    document using aliases (`*name`) is refused: consumers that serialize the tree (drive.yaml's
    extra fields go to JSON) would expand nested aliases exponentially."""
    if _LOADER is yaml.SafeLoader and _flow_depth(text) > MAX_FLOW_DEPTH:
        raise yaml.YAMLError(f"nested deeper than {MAX_FLOW_DEPTH} levels")
    try:
        doc = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader
    except (ValueError, RecursionError) as exc:
        raise yaml.YAMLError(f"{type(exc).__name__}: {exc}") from exc
    if not aliases and _shares_nodes(doc):
        raise yaml.YAMLError("aliases (*name) are not allowed")
    return doc


def _flow_depth(text: str | bytes) -> int:
    raw = text.encode("utf-8", "replace") if isinstance(text, str) else text
    depth = deepest = 0
    for byte in raw:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth = max(0, depth - 1)
    return deepest


def _shares_nodes(doc: Any) -> bool:
    """True if a list or mapping occurs twice in the tree (what an alias makes)."""
    seen: set[int] = set()
    todo = [doc]
    while todo:
        node = todo.pop()
        if isinstance(node, dict | list):
            if id(node) in seen:
                return True
            seen.add(id(node))
            todo.extend(node.values() if isinstance(node, dict) else node)
    return False

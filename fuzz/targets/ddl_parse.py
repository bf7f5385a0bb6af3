"""DDL descriptions (ADTF 2 `.description` sidecars, ADTF 3 `md_definitions`): parsed with
defusedxml, validated, sized in both layouts and rendered back."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.formats.adtf.ddl import parse_ddl, render_ddl, static_size
from fuzz import corpus

MAX_LEN = 16 << 10


def seeds(work: Path) -> dict[str, bytes]:
    return {k: v for k, v in corpus.ddl_texts(work).items() if len(v) <= MAX_LEN}


def one_input(data: bytes) -> None:
    ddl = parse_ddl(data)
    for name in ddl.structs:
        static_size(ddl, name, "serialized")
        static_size(ddl, name, "deserialized")
    parse_ddl(render_ddl(ddl))

"""The vectorized DDL decoder on hostile samples: many samples of one struct in one call,
in either layout, with dynamic arrays, bit fields and nested structs.

Input: u16 length of the DDL text, the text, one byte selecting the struct, one byte for
the layout, one byte n, n u16 sample lengths, then the sample bytes back to back (cut at
the end of the input). Every element is bounds-checked against its own sample's length."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from bridge_lake.formats.adtf.ddl import parse_ddl
from bridge_lake.formats.adtf.ddl_decode import decode
from fuzz import corpus

MAX_LEN = 32 << 10


def encode(ddl: bytes, struct_index: int, layout: str, samples: list[bytes]) -> bytes:
    head = struct.pack("<H", len(ddl)) + ddl
    head += bytes([struct_index, 1 if layout == "serialized" else 0, len(samples)])
    head += b"".join(struct.pack("<H", len(s)) for s in samples)
    return head + b"".join(samples)


def seeds(work: Path) -> dict[str, bytes]:
    out = {}
    for i, (text, name, layout, samples) in enumerate(corpus.ddl_sample_sets(work)):
        ddl = parse_ddl(text)
        index = sorted(ddl.structs).index(name)
        data = encode(text, index, layout, samples)
        if len(data) <= MAX_LEN:
            out[f"set{i}"] = data
    return out


def one_input(data: bytes) -> None:
    if len(data) < 5:
        return
    (n_text,) = struct.unpack_from("<H", data, 0)
    text = data[2 : 2 + n_text]
    rest = data[2 + n_text :]
    if len(rest) < 3:
        return
    ddl = parse_ddl(text)
    if not ddl.structs:
        return
    names = sorted(ddl.structs)
    name = names[rest[0] % len(names)]
    layout = "serialized" if rest[1] & 1 else "deserialized"
    n = rest[2]
    lengths = [
        int.from_bytes(rest[3 + 2 * i : 5 + 2 * i], "little")
        for i in range(n)
        if 5 + 2 * i <= len(rest)
    ]
    body = rest[3 + 2 * len(lengths) :]
    offsets, at = [], 0
    for length in lengths:
        offsets.append(min(at, len(body)))
        at += length
    lengths = [min(length, len(body) - o) for o, length in zip(offsets, lengths, strict=True)]
    decode(
        ddl,
        name,
        np.frombuffer(body, dtype=np.uint8),
        np.array(offsets, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
        layout=layout,
        path="<fuzz>",
    )

"""Shared helpers of the ADTF tests: where the real recordings are, how to summarise a read."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bridge_lake_tests.testdata import ADTF_TESTDATA, adtf_expected_files

TESTDATA = ADTF_TESTDATA

STRUCT_CODES = {
    "tBool": "?",
    "tUInt8": "B",
    "tInt8": "b",
    "tUInt16": "H",
    "tInt16": "h",
    "tUInt32": "I",
    "tInt32": "i",
    "tUInt64": "Q",
    "tInt64": "q",
    "tFloat32": "f",
    "tFloat64": "d",
}
"""DDL scalar type -> `struct` format code, for the DDL tests' own encoders (written here,
not taken from the library, so the decoder is checked against an independent table)."""


def expected_files() -> list[Path]:
    return adtf_expected_files()


def load_expected(path: Path) -> dict:
    return json.loads(path.read_text())


def summarise(items) -> dict[int, dict]:
    """Per-stream counts, times and hashes of an item iterator, in the oracle's terms."""
    out: dict[int, dict] = {}
    for item in items:
        d = out.setdefault(
            item.stream_id,
            {
                "samples": 0,
                "triggers": 0,
                "stream_types": 0,
                "data": hashlib.sha256(),
                "raw": hashlib.sha256(),
                "sample_chunk_times": [],
                "sample_times": [],
                "substream_ids": {},
                "flags": {},
                "first_data": None,
                "type_meta_types": [],
                "stream_index": [],
            },
        )
        d["stream_index"].append(item.stream_index)
        if item.kind == "sample":
            s = item.sample
            d["samples"] += 1
            d["data"].update(s.data)
            d["raw"].update(s.raw)
            d["sample_chunk_times"].append(s.time_ns)
            d["sample_times"].append(s.sample_time_ns)
            d["substream_ids"][str(s.substream_id)] = (
                d["substream_ids"].get(str(s.substream_id), 0) + 1
            )
            d["flags"][str(s.flags)] = d["flags"].get(str(s.flags), 0) + 1
            if d["first_data"] is None:
                d["first_data"] = bytes(s.data)
        elif item.kind == "trigger":
            d["triggers"] += 1
        else:
            d["stream_types"] += 1
            d["type_meta_types"].append(item.stream_type.meta_type)
    return out

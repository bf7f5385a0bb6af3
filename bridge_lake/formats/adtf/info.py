"""`bridge-lake info FILE.dat`: what a recording holds, like `mcap info` for ADTF.

`info_dict` walks chunk headers only (no sample bodies are decoded), so it costs one pass of
header reads even on a multi-GB file; `bridge_lake.adtf_info.render_info` formats the dict
for a terminal.
"""

from __future__ import annotations

import datetime as dt
import os

from bridge_lake.formats.adtf import ifhd
from bridge_lake.formats.adtf.reader import open_dat

GENERATIONS = {
    0x0200: "ADTF 2 beta",
    0x0201: "ADTF 2",
    0x0300: "ADTF 2 history",
    0x0301: "ADTF 2 history",
    0x0400: "ADTF 3 (us)",
    0x0500: "ADTF 3 (ns)",
}


def info_dict(path: str | os.PathLike[str]) -> dict:
    """Header, extensions and per-stream statistics of a recording, JSON-serialisable.

    Damage does not stop it: problems are listed under `issues`."""
    with open_dat(path, strict=False) as f:
        unit = f.time_unit_ns
        stats: dict[int, dict] = {}
        chunks = 0
        for _, t, _, size, sid, flags, _ in f.chunk_headers():
            chunks += 1
            s = stats.setdefault(
                sid, {"samples": 0, "triggers": 0, "stream_types": 0, "bytes": 0, "first": t}
            )
            s["last"] = t
            s["bytes"] += size - ifhd.CHUNK_HEADER_SIZE
            if flags & ifhd.FLAG_TRIGGER:
                s["triggers"] += 1
            elif flags & ifhd.FLAG_TYPE:
                s["stream_types"] += 1
            else:
                s["samples"] += 1
        starts = [s["first"] for s in stats.values()]
        ends = [s["last"] for s in stats.values()]
        start_ns = min(starts) * unit if starts else None
        end_ns = max(ends) * unit if ends else None
        streams = []
        for stream in f.streams:
            s = stats.get(stream.stream_id, {})
            first = s["first"] * unit if s else None
            last = s["last"] * unit if s else None
            span = (last - first) / 1e9 if s and last > first else 0.0
            samples = s.get("samples", 0)
            stype = stream.stream_type
            streams.append(
                {
                    "stream_id": stream.stream_id,
                    "name": stream.name,
                    "kind": stream.kind,
                    "meta_type": stype.meta_type if stype else None,
                    "serializer": stream.serializer,
                    "ddl_struct": stream.ddl_struct,
                    "substreams": {
                        n: {"id": i, "meta_type": t.meta_type, "ddl_struct": _md(t)}
                        for n, (i, t) in (stype.substreams().items() if stype else [])
                    },
                    "index_item_count": stream.item_count,
                    "samples": samples,
                    "triggers": s.get("triggers", 0),
                    "stream_types": s.get("stream_types", 0),
                    "bytes": s.get("bytes", 0),
                    "first_time_ns": first,
                    "last_time_ns": last,
                    "rate_hz": (samples - 1) / span if span and samples > 1 else None,
                }
            )
        h = f.header
        extension = f.extension("adtf_version")
        return {
            "file": str(path),
            "size": f.size,
            "version": h.version,
            "version_hex": f"0x{h.version:04x}",
            "generation": GENERATIONS.get(h.version, "unknown"),
            "time_unit": "ns" if unit == 1 else "us",
            "writer": bytes(extension).split(b"\0", 1)[0].decode("latin-1") if extension else None,
            "description": h.description,
            "file_time": _file_time(h.file_time),
            "chunk_count": h.chunk_count,
            "chunks_read": chunks,
            "start_ns": start_ns,
            "end_ns": end_ns,
            "duration_s": (end_ns - start_ns) / 1e9 if start_ns is not None else 0.0,
            "streams": streams,
            "extensions": [
                {"name": e.identifier, "stream_id": e.stream_id, "size": e.data_size}
                for e in f.extensions
            ],
            "referenced_files": [str(p) for p in f.referenced_files],
            "issues": [str(e) for e in f.issues.items],
        }


def _file_time(seconds: int) -> str | None:
    """The header's creation time as ISO text; None when unset or not a representable date."""
    try:
        return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat() if seconds else None
    except (OverflowError, OSError, ValueError):
        return None


def _md(stream_type) -> str | None:
    prop = stream_type.properties.get("md_struct")
    return prop.value if prop else None

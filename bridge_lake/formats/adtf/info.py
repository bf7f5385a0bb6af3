"""`bridge-lake info FILE.dat`: what a recording holds, like `mcap info` for ADTF.

`info_dict` walks chunk headers only (no sample bodies are decoded), so it costs one pass of
header reads even on a multi-GB file; `render_info` formats the dict for a terminal.
"""

from __future__ import annotations

import datetime as dt
import os

from bridge_lake.cli_common import table_lines
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


def _time(ns: int | None) -> str:
    if ns is None:
        return "-"
    if 10**17 < ns < 4 * 10**18:  # Unix-epoch clock (ADTF 3 ns files): show wall time
        stamp = dt.datetime.fromtimestamp(ns / 1e9, dt.UTC)
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f"{ns / 1e9:.6f} s"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"


def render_info(d: dict) -> str:
    """The `info_dict` result as aligned text."""
    lines = [
        f"file:        {d['file']} ({_size(d['size'])})",
        f"version:     {d['version_hex']} ({d['generation']}, chunk times in {d['time_unit']})",
    ]
    if d["writer"]:
        lines.append(f"writer:      {d['writer']}")
    if d["description"].strip():
        lines.append(f"description: {d['description'].strip().replace(chr(10), ' / ')}")
    lines += [
        f"chunks:      {d['chunks_read']} (header: {d['chunk_count']})",
        f"start:       {_time(d['start_ns'])}",
        f"end:         {_time(d['end_ns'])}",
        f"duration:    {d['duration_s']:.3f} s",
        f"streams:     {len(d['streams'])}",
    ]
    rows = [
        ("id", "name", "type", "ddl", "samples", "trig", "types", "rate", "size", "first", "last")
    ]
    for s in d["streams"]:
        rows.append(
            (
                str(s["stream_id"]),
                s["name"],
                s["meta_type"] or s["kind"],
                s["ddl_struct"] or "-",
                str(s["samples"]),
                str(s["triggers"]),
                str(s["stream_types"]),
                f"{s['rate_hz']:.2f} Hz" if s["rate_hz"] else "-",
                _size(s["bytes"]),
                _time(s["first_time_ns"]),
                _time(s["last_time_ns"]),
            )
        )
        for name, sub in s["substreams"].items():
            rows.append(
                ("", f"  /{name} ({sub['id']})", sub["meta_type"], sub["ddl_struct"] or "-")
            )
    lines += table_lines(rows, indent="  ")
    lines.append(f"extensions:  {len(d['extensions'])}")
    for e in d["extensions"]:
        owner = f" (stream {e['stream_id']})" if e["stream_id"] else ""
        lines.append(f"  {e['name']}{owner}: {_size(e['size'])}")
    if d["referenced_files"]:
        lines.append("referenced files:")
        lines += [f"  {p}" for p in d["referenced_files"]]
    if d["issues"]:
        lines.append(f"issues:      {len(d['issues'])}")
        lines += [f"  {msg}" for msg in d["issues"]]
    return "\n".join(lines) + "\n"

"""The text of `bridge-lake info`: `formats.adtf.info.info_dict` rendered for a terminal.

Kept out of formats/ so the format package stays free of the command line's helpers."""

from __future__ import annotations

import datetime as dt

from bridge_lake.cli_common import table_lines


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

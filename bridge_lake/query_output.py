"""How `bridge-lake query` writes a result: a table for people, CSV/TSV/JSON/Parquet for tools.

The table is rendered by `rich` to the terminal's width (or `width`): text cells are cut
with an ellipsis, numbers are never cut or wrapped (their column is as wide as their widest
value), and columns that do not fit are left out and counted in the footer. When stdout is
not a terminal the default is CSV, so a pipe gets something a program can read.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bridge_lake.errors import BridgeLakeError

if TYPE_CHECKING:  # polars and rich load when a query runs, not with the command line
    import polars as pl

FORMATS = ("auto", "table", "csv", "tsv", "json", "parquet")
"""--format choices; auto is resolved by choose_format."""
SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".parquet": "parquet"}
BINARY_PREVIEW = 16
"""Hex digits shown of a binary cell in a table."""
GAP = 3
"""Characters between two columns: a space of padding each side and the rule's space."""
MIN_TEXT_WIDTH = 8
"""A text column narrower than this shows little but an ellipsis: columns are left out
instead."""


def choose_format(requested: str, out: str | None, stdout_is_tty: bool) -> str:
    """`auto`: by the suffix of --out, else a table on a terminal and CSV for a pipe."""
    if requested != "auto":
        return requested
    if out:
        suffix = out[out.rfind(".") :].lower() if "." in out else ""
        return SUFFIX_FORMATS.get(suffix, "table")
    return "table" if stdout_is_tty else "csv"


def terminal_width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def printable(frame: pl.DataFrame) -> pl.DataFrame:
    """A frame CSV and JSON can hold: binary as hex (the column renamed `<name>_hex`), lists
    and structs as JSON text, and DuckDB's HUGEINT sums (decimal(38,0)) as int64 when they
    fit."""
    import polars as pl

    out = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if dtype == pl.Binary:
            out.append(col.bin.encode("hex").alias(f"{name}_hex"))
        elif isinstance(dtype, pl.List | pl.Array | pl.Struct):
            out.append(col.map_elements(_json, return_dtype=pl.String).alias(name))
        elif isinstance(dtype, pl.Decimal) and dtype.scale == 0:
            out.append(col.cast(pl.Int64, strict=False).alias(name))
        else:
            out.append(col)
    return frame.select(out)


def _json(value: object) -> str:
    if hasattr(value, "to_list"):
        value = value.to_list()
    return json.dumps(value, default=str)


def machine_text(frame: pl.DataFrame, fmt: str) -> str:
    """CSV, TSV or JSON of the whole frame."""
    frame = printable(frame)
    if fmt == "json":
        return frame.write_json()
    if fmt in ("csv", "tsv"):
        return frame.write_csv(separator="," if fmt == "csv" else "\t")
    raise BridgeLakeError(f"not a text format: {fmt}")


def fit_widths(natural: Sequence[int], fixed: Sequence[bool], width: int) -> list[int] | None:
    """Column widths that fit `width` with GAP between columns: fixed columns (numbers) keep
    their natural width, the widest text columns give up characters first, none below
    MIN_TEXT_WIDTH; None when that cannot fit."""
    room = (
        width - GAP * (len(natural) - 1) - sum(w for w, f in zip(natural, fixed, strict=True) if f)
    )
    text = [w for w, f in zip(natural, fixed, strict=True) if not f]
    if sum(text) <= room:
        return list(natural)
    if room < MIN_TEXT_WIDTH * len(text):
        return None
    cap = max(MIN_TEXT_WIDTH, max(text))
    while sum(min(w, cap) for w in text) > room:  # water-filling from the top
        cap -= 1
    return [w if f else min(w, cap) for w, f in zip(natural, fixed, strict=True)]


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        text = value.hex()
        return text[:BINARY_PREVIEW] + ("…" if len(text) > BINARY_PREVIEW else "")
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) and abs(value) < 1e15 else f"{value:g}"
    if isinstance(value, list | dict):
        return _json(value)
    return " ".join(str(value).split())  # a newline inside a cell would break the row


def render_table(
    frame: pl.DataFrame,
    *,
    width: int,
    max_rows: int,
    max_cols: int,
    max_width: int,
) -> str:
    """The frame as a box table at most `width` characters wide (see the module doc)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    shown = frame.head(max_rows)
    names = list(frame.columns)[:max_cols]
    cells = {n: [_cell(v) for v in shown.get_column(n).to_list()] for n in names}
    numeric = {n for n in names if frame.schema[n].is_numeric()}
    natural = {n: max([len(n), *map(len, cells[n])]) for n in names}
    natural |= {n: min(w, max_width) for n, w in natural.items() if n not in numeric}
    keep = names
    while True:
        widths = fit_widths([natural[n] for n in keep], [n in numeric for n in keep], width)
        if widths is not None or len(keep) == 1:
            break
        keep = keep[:-1]
    widths = widths or [width]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for n, w in zip(keep, widths, strict=True):
        table.add_column(
            n,
            width=w,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if n in numeric else "left",
        )
    for i in range(shown.height):
        table.add_row(*(cells[n][i] for n in keep))
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, highlight=False).print(table)
    return buf.getvalue() + _footer(frame, shown.height, keep)


def _footer(frame: pl.DataFrame, rows_shown: int, columns_shown: Sequence[str]) -> str:
    text = f"{frame.height} rows, {frame.width} columns"
    left = []
    if rows_shown < frame.height:
        left.append(f"first {rows_shown} rows shown (--max-rows)")
    if len(columns_shown) < frame.width:
        hidden = [c for c in frame.columns if c not in columns_shown]
        left.append(
            f"{len(hidden)} column{'s' if len(hidden) > 1 else ''} not shown: "
            f"{', '.join(hidden[:6])}"
            + (", …" if len(hidden) > 6 else "")
            + " (--max-cols, a wider terminal, or --format csv)"
        )
    return text + ("; " + "; ".join(left) if left else "") + "\n"

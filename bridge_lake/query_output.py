"""How `bridge-lake query` writes a result: a table for people, CSV/TSV/JSON/Parquet for tools.

The table is DuckDB's own box renderer (the relation's `show`, as the DuckDB shell draws
results), so its rules decide widths, not ours: a column is never squeezed below its values
(a drive id or a timestamp is whole, a number never cut), columns that do not fit the width
are left out from the middle (the first and last ones stay) and marked `…`, long rows are
shown from the top and the bottom, its footer counts rows and columns, and it draws no table
narrower than 80 characters (a narrower --width gets 80). Before it draws,
DOUBLE values are rounded for display (DISPLAY_DIGITS); below it a footer names the columns
left out, wrapped to the width. CSV, TSV, JSON and Parquet carry every digit. When stdout is
not a terminal the default is CSV, so a pipe gets something a program can read.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import textwrap
from typing import TYPE_CHECKING

from bridge_lake.errors import BridgeLakeError

if TYPE_CHECKING:  # duckdb and polars load when a query runs, not with the command line
    import duckdb
    import polars as pl

FORMATS = ("auto", "table", "csv", "tsv", "json", "parquet")
"""--format choices; auto is resolved by choose_format."""
SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".parquet": "parquet"}
DISPLAY_DIGITS = 7
"""Significant digits of a DOUBLE in a table. DuckDB shows a DOUBLE with the shortest digits
that read back as the same number (up to 17: `47.515046449904524`), which hides the columns
beside it; 7 is what a FLOAT holds and what DuckDB shows of one. Integer digits are never
rounded away (1715679420.0053964 shows as 1715679420.0)."""
LEFT_OUT = "(a wider terminal or --width, --max-width, or --format csv)"


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


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rounded(value: str) -> str:
    """SQL rounding `value` (a DOUBLE) to DISPLAY_DIGITS significant digits, keeping its
    integer digits; zero, NaN, ±inf and NULL as they are."""
    digits = f"least(greatest(0, {DISPLAY_DIGITS - 1} - floor(log10(abs({value})))), 330)"
    rounded = f"round({value}, {digits}::INTEGER)"
    return f"CASE WHEN isfinite({value}) AND {value} <> 0 THEN {rounded} ELSE {value} END"


def _display_column(name: str, type_: str) -> str:
    """A result column as the table shows it: DOUBLEs (and lists of them) rounded."""
    q = _quoted(name)
    if type_ == "DOUBLE":
        return f"{_rounded(q)} AS {q}"
    if type_.startswith("DOUBLE[") and type_.endswith("]"):
        return f"list_transform({q}, v -> {_rounded('v')}) AS {q}"
    return q


def render_table(
    rel: duckdb.DuckDBPyRelation,
    *,
    width: int,
    max_rows: int,
    max_cols: int | None,
    max_width: int,
) -> str:
    """The relation as DuckDB's box table at most `width` characters wide, `max_rows` rows
    (top and bottom), cells at most `max_width` characters (see the module doc)."""
    columns = list(rel.columns)
    kept = columns if max_cols is None else columns[: max(max_cols, 1)]
    shown = rel.project(
        ", ".join(
            _display_column(n, str(t)) for n, t in zip(columns, rel.types, strict=True) if n in kept
        )
    )
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        shown.show(max_width=width, max_rows=max_rows, max_col_width=max_width)
    text = buf.getvalue().rstrip("\n") + "\n"
    left_out = _left_out(text, columns)
    if left_out:
        note = f"not shown: {', '.join(left_out)} {LEFT_OUT}"
        wrapped = textwrap.wrap(note, width, break_long_words=False, break_on_hyphens=False)
        text += "\n".join("  " + line if i else line for i, line in enumerate(wrapped)) + "\n"
    return text


def _left_out(table: str, columns: list[str]) -> list[str]:
    """The columns DuckDB's table does not show, read from its header row (a name cut with
    `…` matches the column it starts)."""
    lines = table.splitlines()
    header = lines[1] if len(lines) > 1 else ""
    cells = [c.strip() for c in header.strip("│").split("│")]
    remaining = list(columns)
    for cell in cells:
        if not cell or cell == "…":
            continue
        match = next(
            (c for c in remaining if c == cell or (cell.endswith("…") and c.startswith(cell[:-1]))),
            None,
        )
        if match is not None:
            remaining.remove(match)
    return remaining

"""NCLT CSV logs (gps, ms25, odometry, ground truth, ...) as typed polars DataFrames.

Every file is headerless with a fixed column count per kind (spec §3); `COLUMNS` below is the
only place those orders are written. `utime` (int64 µs) comes first, angles stay in radians
as the files give them (gps `track` stays in degrees: that is what the file holds). `nan`,
`NaN` and empty fields become nulls, so a NaN ground-truth row is a visible null row.

Error policy (per file kind: the same for every CSV): a malformed line — wrong field count,
text in a numeric column, a non-integral value in an integer column, a missing utime — is
*quarantined*: `load_table` returns it with its 1-based line number, the reason and the raw
text, and keeps every good row. One damaged line in a 50 MB IMU log should not cost the
drive. `read_table` is the strict form: it raises `MalformedRowError` naming the file and the
first bad line. Rows are never reordered; duplicate and backward utimes are counted.
Parsing is vectorized and bounded: the file is read in blocks of whole lines (BLOCK_BYTES),
each one Arrow string array of lines split and cast by polars; only typed rows are kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from bridge_lake.errors import FormatError
from bridge_lake.formats.nclt.timing import TimeOrder

POSE = ("x", "y", "z", "roll", "pitch", "heading")
COV_INDEX = tuple((i, j) for i in range(6) for j in range(i, 6))
"""The 21 covariance values are the upper triangle of the 6x6 matrix over POSE, row by row."""
COV = tuple(f"cov_{POSE[i]}_{POSE[j]}" for i, j in COV_INDEX)
GPS = ("mode", "num_sats", "lat", "lon", "alt", "track", "speed")

COLUMNS: dict[str, tuple[str, ...]] = {
    "gps": GPS,
    "gps_rtk": GPS,
    "gps_rtk_err": ("err",),
    "ms25": (
        "mag_x",
        "mag_y",
        "mag_z",
        "accel_x",
        "accel_y",
        "accel_z",
        "gyro_x",
        "gyro_y",
        "gyro_z",
    ),
    "ms25_euler": ("roll", "pitch", "heading"),
    "kvh": ("heading",),
    "wheels": ("v_left", "v_right"),
    "odometry_mu": POSE,
    "odometry_mu_100hz": POSE,
    "odometry_cov": COV,
    "odometry_cov_100hz": COV,
    "groundtruth": POSE,
    "cov": COV,
}
"""Columns after `utime` of each CSV kind, in file order."""
INTEGER_COLUMNS = frozenset({"mode", "num_sats"})
"""Columns typed Int16: written as whole numbers, parsed as floats first (they may be `3.0`)."""
MISSING = ("nan", "NaN", "NAN", "")
BLOCK_BYTES = 8 << 20
"""Bytes of whole lines parsed at a time. Splitting and casting text in polars takes several
times its size, so a whole 330 MB log (a 2-hour odometry_cov_100hz.csv) would need over 1 GB;
an 8 MiB block needs about 90 MB and is still large enough for polars' threads (smaller
blocks were no faster). Only the typed rows (8 bytes a value) accumulate over the file."""


def schema(kind: str) -> dict[str, pl.DataType]:
    """The polars schema `read_table(kind, ...)` returns."""
    cols = _columns(kind)
    out: dict[str, pl.DataType] = {"utime": pl.Int64()}
    out.update({c: pl.Int16() if c in INTEGER_COLUMNS else pl.Float64() for c in cols})
    return out


class MalformedRowError(FormatError):
    """A CSV line that does not fit its kind's columns (strict reading)."""


@dataclass(frozen=True)
class CsvTable:
    kind: str
    path: Path
    frame: pl.DataFrame
    """Good rows, file order, typed by `schema(kind)`."""
    quarantine: pl.DataFrame
    """Malformed lines: `line` (1-based), `reason`, `text`."""
    order: TimeOrder


def load_table(kind: str, path: str | os.PathLike, *, block_bytes: int = BLOCK_BYTES) -> CsvTable:
    """Parse a CSV log; malformed lines go to `quarantine`, nothing is dropped silently.

    The file is parsed in blocks of whole lines of about `block_bytes` (see BLOCK_BYTES); the
    result is the same for any block size, only the peak memory depends on it."""
    path = Path(path)
    typed, reason = _typed(kind)
    rows, quarantine = [], []
    first_line = 1
    for block in _blocks(path, block_bytes):
        text = _lines(block, path, first_line)
        good, bad = _parse_block(text, first_line, typed, reason)
        rows.append(good)
        quarantine.append(bad)
        first_line += text.len()
    frame = pl.concat(rows, rechunk=False)  # the blocks' columns as chunks: no second copy
    utime = frame.get_column("utime").to_numpy()
    return CsvTable(kind, path, frame, pl.concat(quarantine), TimeOrder.of(utime))


def read_table(kind: str, path: str | os.PathLike) -> pl.DataFrame:
    """Strict read: the typed rows, or `MalformedRowError` at the first malformed line."""
    path = Path(path)
    table = load_table(kind, path)
    if table.quarantine.height:
        first = table.quarantine.row(0, named=True)
        more = table.quarantine.height - 1
        raise MalformedRowError(
            first["reason"] + (f" (and {more} more malformed lines)" if more else ""),
            path=str(path),
            line=first["line"],
        )
    return table.frame


def _columns(kind: str) -> tuple[str, ...]:
    try:
        return COLUMNS[kind]
    except KeyError:
        raise ValueError(
            f"unknown NCLT CSV kind {kind!r}; expected one of {', '.join(COLUMNS)}"
        ) from None


@cache
def _typed(kind: str) -> tuple[tuple[pl.Expr, ...], pl.Expr]:
    """Expressions over the split fields `_f0..`: each column typed by `schema(kind)`, and the
    row's first problem (null for a good row). Missing markers are nulls, not problems,
    except in `utime`. Cached: every block of every file of a kind uses the same ones."""
    typed, problems = [], []
    for i, (name, dtype) in enumerate(schema(kind).items()):
        raw = pl.col(f"_f{i}")
        missing = raw.is_in(MISSING) if name != "utime" else pl.lit(False)
        if dtype == pl.Int64():
            value = raw.cast(pl.Int64, strict=False)
        else:
            as_float = pl.when(missing).then(None).otherwise(raw.cast(pl.Float64, strict=False))
            value = as_float
            if dtype == pl.Int16():
                integral = as_float.is_null() | (as_float == as_float.round(0))
                value = (
                    pl.when(integral).then(as_float.cast(pl.Int16, strict=False)).otherwise(None)
                )
        typed.append(value.alias(name))
        problems.append(
            pl.when(value.is_null() & ~missing).then(
                pl.lit(f"column {name}: not a valid {dtype}: ") + raw
            )
        )
    return tuple(typed), pl.coalesce(problems).alias("reason")


def _parse_block(
    text: pl.Series, first_line: int, typed: tuple[pl.Expr, ...], reason: pl.Expr
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The typed good rows and the quarantine of one block's lines (`text`, the first of
    which is file line `first_line`), by the expressions of `_typed`.

    Lines are addressed by position, and text is gathered only for quarantined lines (and for
    the fitting ones when some do not fit): carrying line numbers and text through the
    filters would copy every good line again. Each line is split once into a fixed struct (a
    split per field would copy every line n_fields times: 30x the text in memory for the
    22-column covariance logs)."""
    n_fields = len(typed)
    found = text.str.count_matches(",", literal=True) + 1
    fits = found == n_fields
    miscounted = (~fits).arg_true()
    fit_index = None if miscounted.is_empty() else fits.arg_true()
    fit_text = text if fit_index is None else text.gather(fit_index)
    checked = (
        fit_text.str.split_exact(",", n_fields - 1)
        .struct.rename_fields([f"_f{i}" for i in range(n_fields)])
        .struct.unnest()
        .select(*typed, reason)
    )
    reasons = checked.get_column("reason")
    invalid = reasons.is_not_null().arg_true()
    good = checked.drop("reason")
    if not invalid.is_empty():
        good = good.filter(reasons.is_null())
    count_reason = f"expected {n_fields} fields, found " + found.gather(miscounted).cast(pl.String)
    value_index = invalid if fit_index is None else fit_index.gather(invalid)
    quarantine = pl.concat(
        [
            _quarantined(miscounted, count_reason, text, first_line),
            _quarantined(value_index, reasons.gather(invalid), text, first_line),
        ]
    ).sort("line")
    return good, quarantine


def _quarantined(
    index: pl.Series, reason: pl.Series, text: pl.Series, first_line: int
) -> pl.DataFrame:
    """Quarantine rows for the block lines at `index` (0-based): file line, reason, raw text."""
    return pl.DataFrame(
        {
            "line": index.cast(pl.Int64) + first_line,
            "reason": reason.cast(pl.String),
            "text": text.gather(index),
        }
    )


def _blocks(path: Path, block_bytes: int) -> Iterator[bytes]:
    """The file as blocks of whole lines: each read of `block_bytes` is cut after its last
    newline and the rest carried into the next block (a line longer than a read spans several
    reads). The last block may lack the trailing newline; an empty file is one empty block,
    so every file parses to frames with the full schema."""
    try:
        with path.open("rb") as f:
            rest = b""
            yielded = False
            while chunk := f.read(block_bytes):
                data = rest + chunk
                cut = data.rfind(b"\n") + 1
                if cut:
                    yielded = True
                    yield data[:cut]
                rest = data[cut:]
            if rest or not yielded:
                yield rest
    except OSError as exc:
        raise FormatError(f"cannot read: {exc}", path=str(path)) from exc


def _lines(block: bytes, path: Path, first_line: int) -> pl.Series:
    """The block's lines (without line ends) as one string Series, built from offsets, no
    copies per line. A missing trailing newline is tolerated; CR before LF is stripped.

    UTF-8 is checked with Python's decoder because it says where the first bad byte is; the
    error names the file line (a newline byte never occurs inside a UTF-8 sequence, so no
    character spans two blocks)."""
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + block.count(b"\n", 0, exc.start)
        raise FormatError(f"not UTF-8 text: {exc.reason}", path=str(path), line=line) from exc
    raw = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(raw == 0x0A) + 1
    if len(raw) and raw[-1] != 0x0A:
        ends = np.append(ends, len(raw))
    offsets = np.concatenate([[0], ends]).astype(np.int64)
    strings = pa.LargeStringArray.from_buffers(
        len(ends), pa.py_buffer(offsets.tobytes()), pa.py_buffer(block)
    )
    return pl.Series("text", strings).str.strip_chars_end("\r\n")

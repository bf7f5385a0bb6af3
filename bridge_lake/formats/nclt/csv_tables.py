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
Parsing is vectorized: the file is one Arrow string array of lines, split and cast by polars.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def load_table(kind: str, path: Path) -> CsvTable:
    """Parse a whole CSV log; malformed lines go to `quarantine`, nothing is dropped silently."""
    cols = _columns(kind)
    lines = _lines(path)
    n_fields = len(cols) + 1
    frame = pl.DataFrame({"line": pl.int_range(1, len(lines) + 1, eager=True), "text": lines})
    frame = frame.with_columns(n=pl.col("text").str.count_matches(",", literal=True) + 1)
    bad_count = frame.filter(pl.col("n") != n_fields).select(
        "line",
        pl.format("expected {} fields, found {}", pl.lit(n_fields), pl.col("n")).alias("reason"),
        "text",
    )
    good = frame.filter(pl.col("n") == n_fields)
    # one split per line into a fixed struct (a split per field would copy every line
    # n_fields times: 30x the file in memory for the 22-column covariance logs)
    fields = good.select(
        "line",
        "text",
        pl.col("text")
        .str.split_exact(",", n_fields - 1)
        .struct.rename_fields([f"_f{i}" for i in range(n_fields)])
        .alias("_fields"),
    ).unnest("_fields")
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
    checked = fields.select("line", "text", *typed, pl.coalesce(problems).alias("reason"))
    bad_value = checked.filter(pl.col("reason").is_not_null()).select("line", "reason", "text")
    rows = checked.filter(pl.col("reason").is_null()).select(list(schema(kind)))
    quarantine = pl.concat([bad_count, bad_value]).sort("line")
    utime = rows.get_column("utime").to_numpy()
    return CsvTable(kind, path, rows, quarantine, TimeOrder.of(utime))


def read_table(kind: str, path: Path) -> pl.DataFrame:
    """Strict read: the typed rows, or `MalformedRowError` at the first malformed line."""
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


def _lines(path: Path) -> pl.Series:
    """The file's lines (without line ends) as one string Series, built from offsets, no copies
    per line. A missing trailing newline is tolerated; CR before LF is stripped."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read: {exc}", path=str(path)) from exc
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == 0x0A) + 1
    if len(raw) and raw[-1] != 0x0A:
        ends = np.append(ends, len(raw))
    offsets = np.concatenate([[0], ends]).astype(np.int64)
    strings = pa.LargeStringArray.from_buffers(
        len(ends), pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)
    )
    try:
        strings.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise FormatError(f"not UTF-8 text: {exc}", path=str(path)) from exc
    return pl.Series("text", strings).str.strip_chars_end("\r\n")

"""Lake rows → serialized messages, lane by lane, in time order and in bounded batches.

A *lane* is one time-ordered run of rows that feeds one topic: the rows of one stream (and
one split value) of a mapping rule. The sink wrote every stream in master-time order, so a
lane is read in order with a Parquet filter (stream, split value, time window) that skips
row groups by their statistics, batch by batch, and each batch is serialized in one
vectorized call (the lane's kind, `export.kinds`). The exporter merges the lanes by time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.trim import Window
from bridge_lake.lake import Lake

if TYPE_CHECKING:
    from bridge_lake.export.kinds.kind import Encode
    from bridge_lake.export.mapping import TopicRule

SMALL_BATCH_ROWS = 8_192
"""Rows of small messages serialized per call (IMU, CAN, GNSS, poses): about a minute of a
100 Hz stream. A lane holds its batch (rows and messages) until the merge passes it, so at
65,536 rows (11 minutes at 100 Hz) the NCLT export's memory grew with the drive up to the
cap (+90 MB from 1.5 to 3 minutes over nine such lanes); serializing is as fast either way."""


class ExportError(BridgeLakeError):
    """An export that cannot be made as asked (bad arguments, data the mapping cannot carry)."""


@dataclass
class Batch:
    """Messages of one lane, in time order: log times and serialized messages."""

    time_ns: np.ndarray
    messages: Serialized


@dataclass
class Lane:
    """One time-ordered source of one topic."""

    topic: str
    rule: TopicRule
    frame_id: str
    selection: dict[str, object]
    """column → exact value selecting this lane's rows (stream, split value)."""
    rows: int = 0
    """rows in the export's windows (counted before writing: the health check's truth)."""
    first_ns: int | None = None
    extra: dict = field(default_factory=dict)


def dataset(lake: Lake, layer: str, table: str, drive: str) -> ds.Dataset:
    files = lake.partition_files(layer, table, drive)
    if not files:
        raise ExportError(f"drive {drive} has no {layer}/{table} partition in {lake.root}")
    fs = None if lake.is_local else pa.fs.PyFileSystem(pa.fs.FSSpecHandler(lake.fs))
    return ds.dataset(files, format="parquet", filesystem=fs)


def lane_filter(
    selection: dict[str, object], windows: list[Window] | None, time_col: str = "time_ns"
) -> pc.Expression | None:
    """The dataset filter of a lane's rows: its selection, within the windows."""
    expr = None
    for col, value in selection.items():
        e = pc.field(col) == value
        expr = e if expr is None else expr & e
    if windows:
        w = None
        for win in windows:
            e = (pc.field(time_col) >= win.start_ns) & (pc.field(time_col) < win.end_ns)
            w = e if w is None else w | e
        expr = w if expr is None else expr & w
    return expr


def read_rows(
    lake: Lake,
    lane: Lane,
    drive: str,
    columns: list[str],
    windows: list[Window] | None,
    batch_rows: int,
) -> Iterator[pa.Table]:
    """The lane's rows in file (= time) order, `batch_rows` at a time.

    Read synchronously, one row group at a time, `batch_rows` rows per decoded batch: no
    background reader runs ahead. A dataset scanner did (its Acero sink stops only at 1 GiB
    queued, whatever `batch_readahead` says), so while the merge waited on the slowest lane
    every other lane had its whole filtered drive decoded in memory, drained as the export
    went on: the 5-min NCLT export held 200 MB of camera frames and 85 MB of Hokuyo ranges
    from its first seconds. Row groups are skipped by their statistics (the dataset's own
    pruning), and the batches are those the scanner gave, so the rows and their grouping
    are unchanged."""
    layer, table = lane.rule.table.split("/")
    data = dataset(lake, layer, table, drive)
    missing = [c for c in columns if c not in data.schema.names]
    if missing:
        raise ExportError(
            f"{layer}/{table} of drive {drive} has no column(s) {missing} that topic "
            f"{lane.topic} ({lane.rule.type}) needs; it has {data.schema.names}"
        )
    flt = lane_filter(lane.selection, windows)
    wanted = [*columns, *(c for c in _filter_columns(lane.selection, windows) if c not in columns)]
    schema = pa.schema([data.schema.field(c) for c in wanted])
    pending: list[pa.Table] = []
    n = 0
    for fragment in data.get_fragments():
        groups = fragment.subset(flt).row_groups if flt is not None else fragment.row_groups
        if not groups:
            continue
        with fragment.filesystem.open_input_file(fragment.path) as handle:
            part = pq.ParquetFile(handle, metadata=fragment.metadata, pre_buffer=False)
            present = [c for c in wanted if c in part.schema_arrow.names]
            for group in groups:
                for batch in part.iter_batches(batch_rows, [group.id], present, use_threads=True):
                    rows = _conform(pa.Table.from_batches([batch]), schema)
                    if flt is not None:
                        rows = rows.filter(_mask(rows, lane.selection, windows))
                    if rows.num_rows == 0:
                        continue
                    pending.append(rows.select(columns))
                    n += rows.num_rows
                    if n >= batch_rows:
                        yield pa.concat_tables(pending)
                        pending, n = [], 0
    if pending:
        yield pa.concat_tables(pending)


def _filter_columns(selection: dict[str, object], windows: list[Window] | None) -> list[str]:
    return [*selection, *(["time_ns"] if windows else [])]


def _mask(rows: pa.Table, selection: dict[str, object], windows: list[Window] | None):
    """`lane_filter` evaluated on in-memory rows (null = dropped, as the filter drops it): the
    compute kernels directly, not an Acero plan per batch (3x slower on 32-row batches)."""
    mask = None
    for col, value in selection.items():
        e = pc.equal(rows.column(col), value)
        mask = e if mask is None else pc.and_kleene(mask, e)
    if windows:
        t, w = rows.column("time_ns"), None
        for win in windows:
            e = pc.and_kleene(pc.greater_equal(t, win.start_ns), pc.less(t, win.end_ns))
            w = e if w is None else pc.or_kleene(w, e)
        mask = w if mask is None else pc.and_kleene(mask, w)
    return mask


def _conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """A part's rows in the dataset's schema (column order and types of its first part; a
    column a part lacks is null), as the dataset scanner gave them."""
    if rows.schema.equals(schema):
        return rows
    arrays = [
        rows.column(f.name).cast(f.type)
        if f.name in rows.column_names
        else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


class Builder(ABC):
    """Turns a lane's rows into messages of one type (stateful where decoding needs it)."""

    columns: list[str] = ["time_ns"]
    batch_rows = SMALL_BATCH_ROWS

    def __init__(
        self, lake: Lake, drive: str, lane: Lane, encode: Encode, shift_ns: int = 0
    ) -> None:
        self.lake, self.drive, self.lane = lake, drive, lane
        self.encode = encode
        """the kind's encoder of this export (ROS 1, CDR or protobuf) of validated columns"""
        self.shift_ns = shift_ns
        """subtracted from every time (log time and header stamp): --time-base zero"""

    def t(self, rows: pa.Table) -> np.ndarray:
        """The rows' master times as the export writes them (shifted by the time base)."""
        return times(rows) - self.shift_ns

    def rows(self, windows: list[Window] | None) -> Iterator[pa.Table]:
        return read_rows(self.lake, self.lane, self.drive, self.columns, windows, self.batch_rows)

    def batches(self, windows: list[Window] | None) -> Iterator[Batch]:
        for rows in self.rows(windows):
            yield Batch(self.t(rows), self.build(rows))

    def build(self, rows: pa.Table) -> Serialized:
        """The rows as serialized messages, one per row (in row order)."""
        return self.encode(self.columns_of(rows))

    @abstractmethod
    def columns_of(self, rows: pa.Table) -> Any:
        """The rows as the kind's validated columns."""


def np_column(table: pa.Table, name: str, dtype=np.float64) -> np.ndarray:
    """A column as a numpy array of `dtype` (nulls as NaN for floats)."""
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)


def vectors(table: pa.Table, prefix: str) -> np.ndarray:
    """(n, 3) from the columns `<prefix>_x`, `_y`, `_z`."""
    return np.stack([np_column(table, f"{prefix}_{a}") for a in "xyz"], -1)


def times(table: pa.Table) -> np.ndarray:
    """The rows' master times (int64 ns)."""
    return table.column("time_ns").to_numpy().astype(np.int64)


__all__ = [
    "Batch",
    "Builder",
    "ExportError",
    "Lane",
    "dataset",
    "lane_filter",
    "np_column",
    "read_rows",
    "times",
    "vectors",
]

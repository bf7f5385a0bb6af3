"""A lane's reader holds a few batches, not the table: wide rows (Hokuyo ranges, 4 KB each)
read ahead at Arrow's defaults filled memory with the whole drive's scans, and a dataset
scanner kept reading ahead in the background (up to 1 GiB) while the merge waited on
another lane, so every lane held the rest of its drive from the export's first seconds."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from bridge_lake.export.mapping import TopicRule
from bridge_lake.export.source import Lane, read_rows
from bridge_lake.export.trim import Window
from bridge_lake.lake import Lake

ROWS, WIDTH, GROUP = 24_000, 1000, 500
PERIOD_NS = 25_000_000
BATCH_BYTES = GROUP * WIDTH * 4
"""a batch of the lane (GROUP rows of 4 KB); the lane is 24 of them, the table 48"""


def _lake(tmp_path) -> Lake:
    lake = Lake(str(tmp_path))
    rng = np.random.default_rng(0)
    ranges = pa.FixedSizeListArray.from_arrays(
        pa.array(rng.random(ROWS * WIDTH, dtype=np.float32)), WIDTH
    ).cast(pa.list_(pa.float32()))
    table = pa.table(
        {
            "time_ns": np.arange(ROWS, dtype=np.int64) * PERIOD_NS,
            "stream": ["hokuyo_30m", "hokuyo_4m"] * (ROWS // 2),
            "ranges_m": ranges,
        }
    )
    lake.write_partition("normalized", "laser_scans", "d", table, row_group_rows=GROUP)
    return lake


LANE = Lane("/scan", TopicRule("/scan", "sensor_msgs/msg/LaserScan", "normalized/laser_scans"),
            "laser", {"stream": "hokuyo_30m"})  # fmt: skip


def test_read_rows_holds_a_few_batches_of_a_wide_table(tmp_path):
    lake = _lake(tmp_path)
    base = pa.total_allocated_bytes()
    held, rows, first = [], 0, None
    for batch in read_rows(lake, LANE, "d", ["time_ns", "ranges_m"], None, GROUP):
        held.append(pa.total_allocated_bytes() - base)
        rows += batch.num_rows
        first = batch if first is None else first
        del batch
    assert rows == ROWS // 2
    assert first.column_names == ["time_ns", "ranges_m"]
    assert first.column("time_ns")[1].as_py() == 2 * PERIOD_NS  # only hokuyo_30m, in order
    # the table is 96 MB; Arrow's defaults (pre-buffered parts, 16 batches ahead) held
    # 110-155 MB of it
    assert max(held) < 8 * BATCH_BYTES, [h >> 20 for h in held]


def test_a_waiting_lane_reads_nothing_ahead(tmp_path):
    """The merge takes a lane's next batch only when the other lanes have caught up: in the
    meantime its reader must not fill memory with the rest of the drive (the dataset
    scanner held all 48 MB of this lane after a pause, now a row group or two)."""
    lake = _lake(tmp_path)
    base = pa.total_allocated_bytes()
    window = [Window(0, ROWS * PERIOD_NS)]  # a time filter too, as a trimmed export has
    lane = read_rows(lake, LANE, "d", ["time_ns", "ranges_m"], window, GROUP)
    held = []
    for _ in range(3):
        batch = next(lane)
        time.sleep(0.4)
        held.append(pa.total_allocated_bytes() - base)
    assert batch.column("time_ns")[0].as_py() == 2 * GROUP * 2 * PERIOD_NS
    del batch
    assert max(held) < 5 * BATCH_BYTES, [h >> 20 for h in held]
    assert sum(b.num_rows for b in lane) == ROWS // 2 - 3 * GROUP

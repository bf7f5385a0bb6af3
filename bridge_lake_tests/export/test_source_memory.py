"""A lane's reader holds a few batches, not the table: wide rows (Hokuyo ranges, 4 KB each)
read ahead at Arrow's defaults filled memory with the whole drive's scans."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from bridge_lake.export.mapping import TopicRule
from bridge_lake.export.source import READAHEAD_BATCHES, Lane, read_rows
from bridge_lake.lake import Lake

ROWS, WIDTH, GROUP = 24_000, 1000, 1000


def test_read_rows_holds_a_few_batches_of_a_wide_table(tmp_path):
    lake = Lake(str(tmp_path))
    rng = np.random.default_rng(0)
    ranges = pa.FixedSizeListArray.from_arrays(
        pa.array(rng.random(ROWS * WIDTH, dtype=np.float32)), WIDTH
    ).cast(pa.list_(pa.float32()))
    table = pa.table(
        {
            "time_ns": np.arange(ROWS, dtype=np.int64) * 25_000_000,
            "stream": ["hokuyo_30m", "hokuyo_4m"] * (ROWS // 2),
            "ranges_m": ranges,
        }
    )
    lake.write_partition("normalized", "laser_scans", "d", table, row_group_rows=GROUP)
    lane = Lane("/scan", TopicRule("/scan", "sensor_msgs/msg/LaserScan", "normalized/laser_scans"),
                "laser", {"stream": "hokuyo_30m"})  # fmt: skip
    batch_bytes = GROUP * WIDTH * 4
    held, rows, first = [], 0, None
    for batch in read_rows(lake, lane, "d", ["time_ns", "ranges_m"], None, GROUP):
        held.append(pa.total_allocated_bytes())
        rows += batch.num_rows
        first = batch if first is None else first
        del batch
    assert rows == ROWS // 2
    assert first.column("time_ns")[1].as_py() == 2 * 25_000_000  # only hokuyo_30m, in order
    # the table is 96 MB; Arrow's defaults (pre-buffered parts, 16 batches ahead) held
    # 110-155 MB of it
    assert max(held) < (READAHEAD_BATCHES + 8) * batch_bytes, [h >> 20 for h in held]

"""PointCloudBuilder matching scans to their points (export/kinds/point_cloud2.py): each
scan's points found by binary search on the sorted scan ids, points of other streams' scans
inside the id range left out, unsorted points sorted, a repeated scan id or a point count
its points do not match an ExportError naming the scan. Messages are decoded by rosbags
(an independent reader) and compared with the lake rows directly."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from bridge_lake.clock import NS_PER_S
from bridge_lake.export.kinds import KINDS
from bridge_lake.export.kinds.point_cloud2 import LAYOUTS, TYPENAME, PointCloudBuilder
from bridge_lake.export.mapping import TopicRule
from bridge_lake.export.messages import typestore
from bridge_lake.export.source import Builder, ExportError, Lane

T0 = 1_700_000_000 * NS_PER_S


class TablePoints:
    """Points of an in-memory table, read by scan-id range as the lake reader is (unsorted
    rows stay unsorted: the builder sorts)."""

    def __init__(self, points: pa.Table) -> None:
        self.points = points

    def read(self, lo: int, hi: int) -> pa.Table:
        ids = self.points.column("scan_id").to_numpy()
        return self.points.filter(pa.array((ids >= lo) & (ids <= hi)))


def builder(points: pa.Table) -> PointCloudBuilder:
    rule = TopicRule("/points", TYPENAME, "normalized/lidar_scans")
    lane = Lane("/points", rule, "lidar", {"stream": "lidar"})
    b = PointCloudBuilder.__new__(PointCloudBuilder)  # no lake: points from the table
    Builder.__init__(b, None, "d", lane, KINDS[TYPENAME].encoder("ros2"))
    b.points = TablePoints(points)
    b.layout = LAYOUTS["xyzirt"]
    return b


def point_rows(scan_ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = scan_ids.size
    intensity = rng.uniform(0, 255, n).astype(np.float32)
    intensity[::7] = np.nan
    return pa.table(
        {
            "scan_id": scan_ids.astype(np.int64),
            "x": rng.normal(0, 10, n).astype(np.float32),
            "y": rng.normal(0, 10, n).astype(np.float32),
            "z": rng.normal(0, 1, n).astype(np.float32),
            "intensity": pa.array(intensity, pa.float32(), mask=np.arange(n) % 11 == 3),
            "ring": pa.array(rng.integers(-3, 32, n).astype(np.int16), mask=np.arange(n) % 13 == 5),
            "time_offset_ns": rng.integers(0, 100_000_000, n).astype(np.int32),
        }
    )


def scans(ids: list[int], counts: list[int]) -> pa.Table:
    return pa.table(
        {
            "time_ns": T0 + np.arange(len(ids), dtype=np.int64) * 100_000_000,
            "scan_id": np.array(ids, np.int64),
            "point_count": np.array(counts, np.int64),
        }
    )


def decoded(b: PointCloudBuilder, rows: pa.Table) -> list:
    out = b.build(rows)
    store = typestore(2)
    return [
        store.deserialize_cdr(out.data[out.offsets[i] : out.offsets[i + 1]].tobytes(), TYPENAME)
        for i in range(rows.num_rows)
    ]


def expected_points(points: pa.Table, scan: int) -> np.ndarray:
    """The scan's points in file order as the velodyne XYZIRT layout, computed here."""
    rows = points.filter(pa.compute.equal(points.column("scan_id"), scan))
    dtype = np.dtype(
        {
            "names": ["x", "y", "z", "intensity", "ring", "time"],
            "formats": ["<f4", "<f4", "<f4", "<f4", "<u2", "<f4"],
            "offsets": [0, 4, 8, 12, 16, 18],
            "itemsize": 22,
        }
    )
    out = np.zeros(rows.num_rows, dtype)
    for c in "xyz":
        out[c] = rows.column(c).to_numpy()
    intensity = rows.column("intensity").to_numpy(zero_copy_only=False)
    out["intensity"] = np.where(np.isnan(intensity), 0, intensity)
    out["ring"] = rows.column("ring").fill_null(0).to_numpy().astype(np.int64) % 65536
    out["time"] = rows.column("time_offset_ns").to_numpy() / 1e9
    return out


def test_unsorted_points_with_other_streams_scans_in_the_range():
    """Scans 10, 12, 14 are this lane's; 11 and 13 another stream's, in the same id range;
    the points come shuffled by scan (within a scan in file order)."""
    ids = np.repeat([14, 11, 10, 13, 12, 10, 14], [5, 3, 4, 2, 6, 3, 1])
    points = point_rows(ids, 0)
    b = builder(points)
    msgs = decoded(b, scans([10, 12, 14], [7, 6, 6]))
    for msg, scan in zip(msgs, [10, 12, 14], strict=True):
        want = expected_points(points, scan)
        assert msg.width == want.size and msg.row_step == want.size * 22
        assert msg.data.tobytes() == want.tobytes()
        assert msg.is_dense


def test_a_scan_with_fewer_points_than_its_count_is_named():
    points = point_rows(np.repeat([10, 11, 12], [4, 3, 4]), 1)
    with pytest.raises(ExportError, match="scan 12 has a point count"):
        builder(points).build(scans([10, 12], [4, 5]))


def test_a_scan_without_points_is_named():
    points = point_rows(np.repeat([10, 12], [4, 4]), 2)
    with pytest.raises(ExportError, match="scan 11 has a point count"):
        builder(points).build(scans([10, 11, 12], [4, 2, 4]))


def test_a_repeated_scan_id_gets_no_points_of_its_own():
    points = point_rows(np.repeat([10, 12], [4, 4]), 3)
    with pytest.raises(ExportError, match="scan 12 has a point count"):
        builder(points).build(scans([10, 12, 12], [4, 4, 4]))
    msgs = decoded(builder(points), scans([10, 12, 12], [4, 4, 0]))
    assert [m.width for m in msgs] == [4, 4, 0]
    assert msgs[1].data.tobytes() == expected_points(points, 12).tobytes()

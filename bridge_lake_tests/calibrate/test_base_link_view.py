"""calibrated_lidar_points is a view, not a second copy: the SQL view, the polars frame and the
exporters' base_link points equal, bit for bit, the points the calibrated layer stored before
(each normalized point through its frame's extrinsic with `transform_points`, float32), and an
independent float64 computation to float32 rounding."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from bridge_lake.calibrate.drive import drive_date
from bridge_lake.calibrate.rig import find_rig
from bridge_lake.export.kinds.point_cloud2 import BaseLinkPoints
from bridge_lake.geometry import transform_points
from bridge_lake.lake.query import connect, scan

ORDER = ["scan_id", "x", "y", "z", "intensity", "ring", "time_offset_ns"]


def sorted_xyz(t: pa.Table) -> np.ndarray:
    t = t.select(ORDER).sort_by([(c, "ascending") for c in ORDER])
    return np.stack([np.asarray(t.column(c).to_numpy(), np.float32) for c in "xyz"])


def stored_before(lake, drive: str) -> tuple[pa.Table, np.ndarray, list]:
    """What calibrate_drive wrote to calibrated/lidar_points before it became a view: every
    normalized point through rig.to_base(its scan's frame), float32 (transforms.py)."""
    meta = lake.read_partition("raw", "drives", drive).to_pylist()[0]
    day, _ = drive_date(
        meta.get("recorded_at"), lake.read_partition("normalized", "streams", drive)
    )
    rig = find_rig(meta["vehicle"], day, None)
    pts = lake.read_partition("normalized", "lidar_points", drive)
    scans = lake.read_partition("normalized", "lidar_scans", drive, columns=["scan_id", "frame_id"])
    frame_of = dict(
        zip(*(scans.column(c).to_pylist() for c in ("scan_id", "frame_id")), strict=True)
    )
    frames = np.array([frame_of[s] for s in pts.column("scan_id").to_pylist()])
    x, y, z = (np.asarray(pts.column(c).to_numpy(), np.float32) for c in "xyz")
    out = np.empty((3, len(x)), np.float32)
    exts = []
    for name in np.unique(frames):
        sel = frames == name
        ext = rig.to_base(str(name))
        exts.append((sel, ext))
        out[:, sel] = transform_points(ext.matrix, ext.translation, x[sel], y[sel], z[sel])
    return pts, out, exts


@pytest.mark.parametrize("source", ["nclt", "adtf"])
def test_view_polars_and_exporter_equal_the_stored_points(synthetic_lake, source):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives[source].drive_id
    pts, want, exts = stored_before(lake, drive)
    assert pts.num_rows > 100_000
    reference = (
        pts.set_column(1, "x", pa.array(want[0]))
        .set_column(2, "y", pa.array(want[1]))
        .set_column(3, "z", pa.array(want[2]))
    )
    ref = sorted_xyz(reference)

    sql = (
        connect(lake)
        .sql("select * from calibrated_lidar_points where drive = ?", params=[drive])
        .fetch_arrow_table()
    )
    assert sql.num_rows == pts.num_rows
    assert sql.schema.field("x").type == pa.float32()
    np.testing.assert_array_equal(sorted_xyz(sql), ref)

    frame = scan("lidar_points", lake=lake, layer="calibrated", drives=[drive]).collect()
    got = frame.to_arrow()
    assert got.column("scan_id").equals(pts.column("scan_id"))  # normalized order kept
    np.testing.assert_array_equal(np.stack([got[c].to_numpy() for c in "xyz"]), want)
    for c in ("intensity", "ring", "time_offset_ns"):
        assert got.column(c).equals(pts.column(c)), c

    ids = pts.column("scan_id").to_numpy()
    exported = BaseLinkPoints(lake, drive).read(int(ids.min()), int(ids.max()))
    np.testing.assert_array_equal(sorted_xyz(exported), ref)

    # independent: float64 R p + t agrees to float32 rounding
    p = np.stack([pts.column(c).to_numpy().astype(np.float64) for c in "xyz"])
    for sel, ext in exts:
        exact = (
            np.asarray(ext.matrix, np.float64) @ p[:, sel]
            + np.asarray(ext.translation, np.float64)[:, None]
        )
        np.testing.assert_allclose(want[:, sel], exact, rtol=1e-6, atol=2e-5)


def test_no_second_copy_of_the_points(synthetic_lake):
    """The calibrated layer stores one transform per scan, not the points (deskew off)."""
    lake = synthetic_lake.lake
    for d in synthetic_lake.drives.values():
        tf = lake.read_partition("calibrated", "lidar_transforms", d.drive_id)
        scans = lake.read_partition("normalized", "lidar_scans", d.drive_id)
        assert tf.num_rows == scans.num_rows > 0
        assert not lake.read_partition("calibrated", "deskewed_points", d.drive_id).num_rows
        assert not lake.has_partition("calibrated", "lidar_points", d.drive_id)

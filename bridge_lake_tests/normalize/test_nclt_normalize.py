"""NCLT normalizer: every table against the raw files and the synthetic truth, conservation per
stream on clean and broken sessions, time repair, and polars/DuckDB agreeing on the result.

The expected values are computed here from the raw bytes with independent, plain readers
(`csv` splitting, `struct`, numpy decoding written out in this file) and from the generator's
`_synth_truth.json`, never from the readers or the normalizer under test.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
import yaml

from bridge_lake.errors import DriveMetadataError
from bridge_lake.lake import Lake
from bridge_lake.lake.query import connect
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.normalize import quality
from bridge_lake.normalize.nclt import NcltReport, normalize_nclt_session
from bridge_lake.normalize.sink import DriveSink, NormalizeResult
from bridge_lake.synth.nclt import FAULTS, TRUTH_FILE, write_nclt_drive

HITS_PER_REV = 2000
MINUTES = 0.1
HDL32_ELEVATION_DEG = [
    -30.67, -9.33, -29.33, -8.00, -28.00, -6.66, -26.66, -5.33,
    -25.33, -4.00, -24.00, -2.67, -22.67, -1.33, -21.33, 0.00,
    -20.00, 1.33, -18.67, 2.67, -17.33, 4.00, -16.00, 5.33,
    -14.67, 6.67, -13.33, 8.00, -12.00, 9.33, -10.67, 10.67,
]  # fmt: skip
"""HDL-32E laser elevations by laser_id, copied from calibration.yaml (independent of code)."""


@dataclass
class Run:
    raw: Path
    session: Path
    truth: dict
    lake: Lake
    report: NcltReport
    result: NormalizeResult

    def table(self, name: str, stream: str | None = None) -> pl.DataFrame:
        frame = pl.from_arrow(self.lake.read_partition("normalized", name, "d1"))
        assert isinstance(frame, pl.DataFrame)
        if stream is not None and name == "lidar_points":  # points name their stream by scan
            scans = self.table("lidar_scans", stream).get_column("scan_id")
            return frame.filter(pl.col("scan_id").is_in(scans.implode()))
        return frame if stream is None else frame.filter(pl.col("stream") == stream)

    def streams(self) -> pl.DataFrame:
        return self.table("streams")

    def stream_row(self, stream: str, table: str) -> dict:
        rows = self.streams().filter((pl.col("stream") == stream) & (pl.col("table") == table))
        assert rows.height == 1, (stream, table)
        return rows.row(0, named=True)


def _run(tmp: Path, faults: frozenset[str] = frozenset(), seed: int = 3, prepare=None) -> Run:
    raw = tmp / "raw"
    write_nclt_drive(raw, minutes=MINUTES, seed=seed, hits_per_rev=HITS_PER_REV, faults=faults)
    session = next(p.parent for p in raw.glob(f"*/{TRUTH_FILE}"))
    if prepare is not None:
        prepare(session)
    truth = json.loads((session / TRUTH_FILE).read_text())
    lake = Lake(str(tmp / "lake"))
    with DriveSink(lake, "d1") as sink:
        report = normalize_nclt_session(raw, sink)
        result = sink.finish()
    return Run(raw, session, truth, lake, report, result)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory.mktemp("clean"))


def _ask_velodyne(value: object) -> Callable[[Path], None]:
    """A `prepare` writing a drive.yaml (beside the session folder) with nclt_velodyne."""

    def prepare(session: Path) -> None:
        meta = {"vehicle": "segway", "source": "nclt", "nclt_velodyne": value}
        (session.parent / "drive.yaml").write_text(yaml.safe_dump(meta))

    return prepare


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The clean session with drive.yaml asking for velodyne_sync instead of velodyne_hits."""
    return _run(tmp_path_factory.mktemp("synced"), prepare=_ask_velodyne("velodyne_sync"))


# --- independent raw readers ----------------------------------------------------------------


def raw_csv(path: Path, fields: int) -> tuple[np.ndarray, np.ndarray]:
    """(utime int64, values float64 with NaN) of the well-formed lines of an NCLT CSV."""
    utimes, values = [], []
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) != fields + 1:
            continue
        try:
            row = [float(p) for p in parts[1:]]
        except ValueError:
            continue
        utimes.append(int(parts[0]))
        values.append(row)
    return np.array(utimes, dtype=np.int64), np.array(values, dtype=np.float64).reshape(-1, fields)


def col(frame: pl.DataFrame, name: str) -> np.ndarray:
    """A float column with nulls as NaN."""
    return frame.get_column(name).cast(pl.Float64).fill_null(np.nan).to_numpy()


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal values, NaN (null) exactly where expected is NaN."""
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    np.testing.assert_array_equal(actual[~np.isnan(actual)], expected[~np.isnan(expected)])


def rot_zyx(roll: float, pitch: float, yaw: float) -> np.ndarray:
    def rx(a: float) -> np.ndarray:
        return np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])

    def ry(a: float) -> np.ndarray:
        return np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])

    def rz(a: float) -> np.ndarray:
        return np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])

    return rz(yaw) @ ry(pitch) @ rx(roll)


def quat_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def covered(path: str, sources: set[str]) -> bool:
    """The completeness rule of the normalized asset: a stream names the file or its folder/."""
    return path in sources or any(s.endswith("/") and path.startswith(s) for s in sources)


def assert_conserved(run: Run) -> None:
    streams = run.streams()
    assert streams.height == len(run.result.streams) > 0
    for row in streams.iter_rows(named=True):
        accounted = row["rows_written"] + row["records_joined"] + row["rows_quarantined"]
        assert row["records_read"] == accounted, row
    written = run.streams().group_by("table").agg(pl.col("rows_written").sum())
    for table, n in written.iter_rows():
        assert run.table(table).height == n, table
    quarantined = int(streams.get_column("rows_quarantined").sum())
    assert run.table("quarantine").height == quarantined


# --- clean session ----------------------------------------------------------------------------


def test_every_stream_is_conserved_and_every_file_is_covered(clean: Run) -> None:
    assert_conserved(clean)
    assert clean.table("quarantine").height == 0
    streams = clean.streams()
    read = (pl.col("rows_written") + pl.col("records_joined") > 0) | pl.col("skipped").is_not_null()
    sources = set(streams.filter(read).get_column("source_file").to_list())
    date = clean.session.name
    files = [f"{date}/{rel}" for rel in clean.truth["files"]]
    assert len(files) > 20
    assert [f for f in files if not covered(f, sources)] == []
    assert set(streams.get_column("table")) <= set(NORMALIZED)
    assert streams.get_column("topic").null_count() == 0
    assert clean.report.missing == []


def test_imu_rows_are_the_ms25_file_in_si_units(clean: Run) -> None:
    utime, v = raw_csv(clean.session / "ms25.csv", 9)
    imu = clean.table("imu", "ms25")
    assert imu.height == clean.truth["files"]["ms25.csv"]["rows"] == len(utime)
    np.testing.assert_array_equal(imu.get_column("time_ns").to_numpy(), utime * 1000)
    assert imu.get_column("sensor_time_ns").null_count() == imu.height
    assert set(imu.get_column("frame_id")) == {"ms25"}
    for i, axis in enumerate("xyz"):
        assert_same(col(imu, f"magnetic_field_{axis}"), v[:, i] * 1e-4)
        assert_same(col(imu, f"linear_acceleration_{axis}"), v[:, 3 + i])
        assert_same(col(imu, f"angular_velocity_{axis}"), v[:, 6 + i])
    # Gauss → tesla: the earth field is tens of µT, and gravity sits on body z (z down)
    field = np.linalg.norm(np.stack([col(imu, f"magnetic_field_{a}") for a in "xyz"]), axis=0)
    assert np.all((field > 1e-5) & (field < 1e-4))
    assert abs(np.median(col(imu, "linear_acceleration_z")) + 9.81) < 0.5


def test_one_imu_row_per_ms25_instant_with_the_euler_rotation_rz_ry_rx(clean: Run) -> None:
    """ms25_euler is the same MS25 measurement as the ms25 row of its utime: its rotation is
    in that row, and the table has one row per instant, so a count over it is the sensor's
    rate (fails on the code before: ms25_euler wrote its own orientation-only rows)."""
    utime, v = raw_csv(clean.session / "ms25_euler.csv", 3)
    imu_utime, _ = raw_csv(clean.session / "ms25.csv", 9)
    np.testing.assert_array_equal(np.sort(utime), np.sort(imu_utime))
    imu = clean.table("imu")
    assert set(imu["stream"]) == {"ms25"} and imu.height == len(imu_utime)
    assert imu["time_ns"].n_unique() == imu.height
    row = dict(zip(imu.get_column("time_ns").to_list(), range(imu.height), strict=True))
    q = np.stack([col(imu, f"orientation_{a}") for a in "xyzw"], axis=1)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-12)
    for k in range(0, len(utime), 17):
        got = q[row[int(utime[k]) * 1000]]
        np.testing.assert_allclose(quat_matrix(*got), rot_zyx(*v[k]), atol=1e-12)
    euler = clean.stream_row("ms25_euler", "imu")
    assert (euler["records_read"], euler["records_joined"], euler["rows_written"]) == (
        len(utime),
        len(utime),
        0,
    )
    assert clean.report.joins["ms25_euler→ms25"].matched == imu.height


def test_gnss_rows_convert_units_and_keep_both_rows_of_each_pair(clean: Run) -> None:
    utime, v = raw_csv(clean.session / "gps.csv", 7)
    gps = clean.table("gnss", "gps")
    assert gps.height == clean.truth["files"]["gps.csv"]["rows"] == len(utime)
    np.testing.assert_array_equal(gps.get_column("time_ns").to_numpy(), utime * 1000)
    np.testing.assert_array_equal(gps.get_column("fix_mode").to_numpy(), v[:, 0].astype(int))
    assert int((v[:, 0] == 2).sum()) > 0 and int((v[:, 0] == 3).sum()) > 0
    assert gps.get_column("num_sats").null_count() == gps.height  # 0 = "not reported"
    np.testing.assert_allclose(col(gps, "lat_deg"), v[:, 2] * 180 / math.pi, rtol=1e-15)
    np.testing.assert_allclose(col(gps, "lon_deg"), v[:, 3] * 180 / math.pi, rtol=1e-15)
    assert 42.2 < col(gps, "lat_deg").mean() < 42.4
    alt = col(gps, "alt_m")
    assert_same(alt, v[:, 4])
    assert np.isnan(alt[v[:, 0] == 2]).all() and not np.isnan(alt[v[:, 0] == 3]).any()
    assert gps.get_column("alt_m").null_count() == int((v[:, 0] == 2).sum())  # null, not NaN
    track = col(gps, "track_rad")
    assert np.isnan(track).any()
    np.testing.assert_allclose(track, v[:, 5] * math.pi / 180, rtol=1e-15)
    assert np.nanmax(track) < 2 * math.pi
    assert_same(col(gps, "speed_mps"), v[:, 6])
    assert gps.get_column("error_m").null_count() == gps.height


def test_gps_rtk_rows_get_the_error_of_the_same_utime(clean: Run) -> None:
    utime, v = raw_csv(clean.session / "gps_rtk.csv", 7)
    err_utime, err = raw_csv(clean.session / "gps_rtk_err.csv", 1)
    rtk = clean.table("gnss", "gps_rtk")
    assert rtk.height == len(utime)
    np.testing.assert_array_equal(rtk.get_column("num_sats").to_numpy(), v[:, 1].astype(int))
    by_utime = dict(zip(err_utime.tolist(), err[:, 0].tolist(), strict=True))
    expected = np.array([by_utime.get(u, np.nan) for u in utime.tolist()])
    assert_same(col(rtk, "error_m"), expected)
    join = clean.report.joins["gps_rtk_err→gps_rtk"]
    assert join.matched == int(np.isin(utime, err_utime).sum()) == len(utime)
    assert clean.table("gnss", "gps_rtk_err").height == 0  # no error-only rows (failed before)
    side = clean.stream_row("gps_rtk_err", "gnss")
    assert side["records_joined"] == side["records_read"] == len(err_utime)


def test_heading_and_wheels(clean: Run) -> None:
    utime, v = raw_csv(clean.session / "kvh.csv", 1)
    kvh = clean.table("heading", "kvh")
    np.testing.assert_array_equal(kvh.get_column("time_ns").to_numpy(), utime * 1000)
    assert_same(col(kvh, "heading_rad"), v[:, 0])
    utime, v = raw_csv(clean.session / "wheels.csv", 2)
    wheels = clean.table("wheel_odometry", "wheels")
    np.testing.assert_array_equal(wheels.get_column("time_ns").to_numpy(), utime * 1000)
    assert_same(col(wheels, "v_left_mps"), v[:, 0])
    assert_same(col(wheels, "v_right_mps"), v[:, 1])


@pytest.mark.parametrize("suffix", ["", "_100hz"])
def test_odometry_poses_with_the_covariance_of_the_same_utime(clean: Run, suffix: str) -> None:
    utime, pose = raw_csv(clean.session / f"odometry_mu{suffix}.csv", 6)
    cov_utime, cov = raw_csv(clean.session / f"odometry_cov{suffix}.csv", 21)
    odom = clean.table("odometry", f"odometry_mu{suffix}")
    assert odom.height == len(utime)
    np.testing.assert_array_equal(odom.get_column("time_ns").to_numpy(), utime * 1000)
    for i, name in enumerate(["x_m", "y_m", "z_m", "roll_rad", "pitch_rad", "yaw_rad"]):
        assert_same(col(odom, name), pose[:, i])
    got = np.array(odom.get_column("covariance").to_list(), dtype=np.float64)
    index = {u: k for k, u in enumerate(cov_utime.tolist())}
    np.testing.assert_array_equal(got, cov[[index[u] for u in utime.tolist()]])
    # one row per pose: no covariance-only rows (failed before: 2 rows a pose)
    assert clean.table("odometry", f"odometry_cov{suffix}").height == 0
    assert odom["time_ns"].n_unique() == odom.height
    side = clean.stream_row(f"odometry_cov{suffix}", "odometry")
    assert side["records_joined"] == side["records_read"] == len(cov_utime)


def test_ground_truth_keeps_nan_rows_as_null_poses_and_marks_nodes(clean: Run) -> None:
    date = clean.session.name
    utime, pose = raw_csv(clean.session / f"groundtruth_{date}.csv", 6)
    node_utime, node_cov = raw_csv(clean.session / f"cov_{date}.csv", 21)
    gt = clean.table("ground_truth", "groundtruth")
    info = clean.truth["files"][f"groundtruth_{date}.csv"]
    assert gt.height == info["rows"] == len(utime)
    null_rows = np.flatnonzero(gt.get_column("x_m").is_null().to_numpy())
    assert null_rows.tolist() == info["nan_rows"]
    for i, name in enumerate(["x_m", "y_m", "z_m", "roll_rad", "pitch_rad", "yaw_rad"]):
        assert_same(col(gt, name), pose[:, i])
    is_node = gt.get_column("is_node").to_numpy()
    np.testing.assert_array_equal(is_node, np.isin(utime, node_utime))
    # every null-pose row is an invalid one: the nodes are their own table (failed before:
    # cov rows in ground_truth with a null pose, is_node and a covariance)
    assert set(clean.table("ground_truth")["stream"]) == {"groundtruth"}
    invalid = clean.table("ground_truth").filter(pl.col("x_m").is_null())
    assert invalid["covariance"].null_count() == invalid.height == len(info["nan_rows"])
    nodes = clean.table("ground_truth_nodes")
    assert set(nodes["stream"]) == {"cov"} and nodes.height == len(node_utime)
    np.testing.assert_array_equal(nodes.get_column("time_ns").to_numpy(), node_utime * 1000)
    np.testing.assert_array_equal(np.array(nodes.get_column("covariance").to_list()), node_cov)
    findings = quality.sensor_table_findings("ground_truth", clean.result.streams)
    assert next(f for f in findings if f.check == "null_pose").passed


def _first_packet(path: Path) -> tuple[int, np.ndarray]:
    data = path.read_bytes()
    assert data[:8] == b"\x9c\xad" * 4
    (n,) = struct.unpack_from("<I", data, 8)
    (utime,) = struct.unpack_from("<Q", data, 12)
    hits = np.frombuffer(data, dtype="<u2,<u2,<u2,u1,u1", count=n, offset=24)
    return utime, hits


def test_lidar_revolutions_points_ring_and_time_offsets(clean: Run) -> None:
    truth = clean.truth["files"]["velodyne_hits.bin"]
    scans = clean.table("lidar_scans", "velodyne_hits").sort("scan_id")
    points = clean.table("lidar_points", "velodyne_hits")
    assert points.height == truth["hits"]
    revs = truth["revolutions"]
    assert scans.height == len(revs)
    assert scans.get_column("point_count").to_list() == [r["hits"] for r in revs]
    np.testing.assert_array_equal(
        scans.get_column("time_ns").to_numpy(), np.array([r["start_utime"] for r in revs]) * 1000
    )
    # a point's master time is its scan's start plus its offset (the lidar_points_timed view)
    points = points.join(scans.select("scan_id", start="time_ns"), on="scan_id").with_columns(
        time_ns=pl.col("start") + pl.col("time_offset_ns")
    )
    per_scan = points.group_by("scan_id").agg(
        n=pl.len(),
        t0=pl.col("time_ns").min(),
        t1=pl.col("time_ns").max(),
        off_min=pl.col("time_offset_ns").min(),
        off_max=pl.col("time_offset_ns").max(),
    )
    joined = scans.join(per_scan, on="scan_id")
    assert joined.height == scans.height
    assert (joined["n"] == joined["point_count"]).all()
    assert (joined["t0"] == joined["time_ns"]).all() and (
        joined["t1"] == joined["end_time_ns"]
    ).all()
    assert (joined["off_min"] == 0).all()
    assert (joined["off_max"] == joined["end_time_ns"] - joined["time_ns"]).all()
    assert joined["off_max"].max() < 110_000_000  # one revolution is 100 ms
    ring = points.get_column("ring")
    assert ring.null_count() == 0 and ring.min() == 0 and ring.max() == 31
    assert set(ring.unique().to_list()) == set(range(32))
    # the first packet, decoded by hand: code x 0.005 - 100 read unsigned, ring by elevation
    utime, hits = _first_packet(clean.session / "velodyne_hits.bin")
    first = points.filter(pl.col("scan_id") == scans["scan_id"][0]).head(len(hits))
    assert (first["time_ns"] == utime * 1000).all()
    with connect(clean.lake) as con:
        timed = con.sql(
            "SELECT time_ns FROM lidar_points_timed WHERE stream = 'velodyne_hits' AND scan_id = "
            f"{scans['scan_id'][0]}"
        ).fetchnumpy()["time_ns"]
    assert (np.sort(timed)[: len(hits)] == utime * 1000).all()
    for axis, field in zip("xyz", ("f0", "f1", "f2"), strict=True):
        expected = (hits[field].astype(np.float64) * 0.005 - 100.0).astype(np.float32)
        np.testing.assert_array_equal(first.get_column(axis).to_numpy(), expected)
    np.testing.assert_array_equal(first.get_column("intensity").to_numpy(), hits["f3"])
    order = np.argsort(np.argsort(HDL32_ELEVATION_DEG, kind="stable"), kind="stable")
    np.testing.assert_array_equal(first.get_column("ring").to_numpy(), order[hits["f4"]])
    z = points.get_column("z")
    assert z.min() == np.float32(-100.0) and z.max() == np.float32(227.675)


def test_velodyne_scans_end_at_their_last_point(clean: Run) -> None:
    """end_time_ns - time_ns = the largest time_offset_ns of the scan's points."""
    scans = clean.table("lidar_scans", "velodyne_hits")
    last = (
        clean.table("lidar_points", "velodyne_hits")
        .group_by("scan_id")
        .agg(pl.col("time_offset_ns").max().cast(pl.Int64).alias("last"))
    )
    joined = scans.join(last, on="scan_id", how="left")
    span = joined["end_time_ns"] - joined["time_ns"]
    assert (span == joined["last"]).all() and span.max() > 0
    assert clean.stream_row("velodyne_hits", "lidar_scans")["rows_written"] == scans.height


def test_scan_ids_are_unique_in_the_drive(tmp_path: Path) -> None:
    """lidar_points has no stream column: its scan_id alone names the scan and the stream
    (both Velodyne streams, as drive.yaml asks for both)."""
    run = _run(tmp_path, prepare=_ask_velodyne(["velodyne_hits", "velodyne_sync"]))
    scans = run.table("lidar_scans")
    assert set(scans["stream"]) == {"velodyne_hits", "velodyne_sync"}
    assert scans["scan_id"].n_unique() == scans.height
    assert sorted(scans["scan_id"]) == list(range(scans.height))
    per_scan = run.table("lidar_points").group_by("scan_id").len()
    joined = scans.join(per_scan, on="scan_id", how="full")
    assert (joined["len"] == joined["point_count"]).all()
    assert run.streams().get_column("skipped").null_count() == run.streams().height


def test_one_velodyne_stream_by_default_the_other_named_as_skipped(clean: Run) -> None:
    """velodyne_sync holds a subset of velodyne_hits' revolutions: by default only the hits
    are read, and the catalog says why the sync folder was not (fails on the code before:
    both streams were read, the same sensor's points stored twice)."""
    assert set(clean.table("lidar_scans")["stream"]) == {"velodyne_hits"}
    points = clean.table("lidar_points").height
    assert points == clean.stream_row("velodyne_hits", "lidar_points")["rows_written"]
    sync = clean.stream_row("velodyne_sync", "lidar_scans")
    assert sync["records_read"] == sync["rows_written"] == 0
    assert "nclt_velodyne" in sync["skipped"] and sync["source_file"].endswith("velodyne_sync/")
    assert clean.report.skipped.keys() == {"velodyne_sync"}


def test_drive_yaml_choosing_velodyne_sync_reads_only_it(synced: Run) -> None:
    assert set(synced.table("lidar_scans")["stream"]) == {"velodyne_sync"}
    hits = synced.stream_row("velodyne_hits", "lidar_scans")
    assert hits["records_read"] == 0 and "velodyne_sync" in hits["skipped"]


def test_an_unknown_velodyne_choice_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(DriveMetadataError, match="nclt_velodyne must be one of"):
        _run(tmp_path, prepare=_ask_velodyne("velodyne_both"))


def test_velodyne_sync_files_become_their_own_scans(synced: Run) -> None:
    clean = synced
    files = {k: v for k, v in clean.truth["files"].items() if k.startswith("velodyne_sync/")}
    scans = clean.table("lidar_scans", "velodyne_sync").sort("scan_id")
    assert scans.height == len(files) > 0
    utimes = sorted(int(Path(k).stem) for k in files)
    np.testing.assert_array_equal(scans.get_column("time_ns").to_numpy(), np.array(utimes) * 1000)
    assert (scans["time_ns"] == scans["end_time_ns"]).all() and set(scans["cut"]) == {"frame"}
    hits = [files[f"velodyne_sync/{u}.bin"]["hits"] for u in utimes]
    assert scans.get_column("point_count").to_list() == hits
    points = clean.table("lidar_points", "velodyne_sync")
    assert points.height == sum(hits)
    assert points.get_column("time_offset_ns").null_count() == points.height
    assert points.get_column("ring").max() == 31
    raw = np.fromfile(clean.session / f"velodyne_sync/{utimes[0]}.bin", dtype="<u2,<u2,<u2,u1,u1")
    first = points.filter(pl.col("scan_id") == scans["scan_id"][0])
    expected = (raw["f0"].astype(np.float64) * 0.005 - 100.0).astype(np.float32)
    np.testing.assert_array_equal(first.get_column("x").to_numpy(), expected)


@pytest.mark.parametrize(("kind", "n", "angle_min"), [("hokuyo_30m", 1081, -0.75 * math.pi)])
def test_laser_scans_decode_ranges_with_no_returns_as_nan(
    clean: Run, kind: str, n: int, angle_min: float
) -> None:
    scans = clean.table("laser_scans", kind)
    assert scans.height == clean.truth["files"][f"{kind}.bin"]["records"]
    rec = np.fromfile(
        clean.session / f"{kind}.bin", dtype=np.dtype([("t", "<u8"), ("r", "<u2", n)])
    )
    np.testing.assert_array_equal(
        scans.get_column("time_ns").to_numpy(), rec["t"].astype(np.int64) * 1000
    )
    ranges = np.array(scans.get_column("ranges_m").to_list(), dtype=np.float32)
    assert ranges.shape == (len(rec), n)
    metres = (rec["r"].astype(np.float64) * 0.005 - 100.0).astype(np.float32)
    expected = np.where(metres <= 0, np.float32(np.nan), metres)
    assert np.isnan(expected).any()
    assert_same(ranges.astype(np.float64), expected.astype(np.float64))
    assert (scans["angle_min_rad"] == np.float32(angle_min)).all()
    assert (scans["angle_increment_rad"] == np.float32(0.25 * math.pi / 180)).all()
    four = clean.table("laser_scans", "hokuyo_4m")
    assert four.height == clean.truth["files"]["hokuyo_4m.bin"]["records"]
    assert four.get_column("ranges_m").list.len().unique().to_list() == [726]


def test_camera_frames_keep_the_tiff_bytes(clean: Run) -> None:
    frames = clean.table("camera_frames")
    images = {k: v for k, v in clean.truth["files"].items() if k.startswith("lb3/")}
    assert frames.height == len(images) > 0
    assert set(frames["camera"]) == {f"lb3_cam{k}" for k in range(6)}
    assert set(frames["encoding"]) == {"tiff"} and set(frames["rotate_cw_deg"]) == {90}
    assert set(frames["width"]) == {101} and set(frames["height"]) == {77}
    for row in frames.filter(pl.col("camera") == "lb3_cam3").head(5).iter_rows(named=True):
        utime = row["time_ns"] // 1000
        assert row["data"] == (clean.session / f"lb3/Cam3/{utime}.tiff").read_bytes()
    cam5 = frames.filter(pl.col("stream") == "lb3_cam5")
    assert cam5.get_column("time_ns").is_sorted()
    assert clean.stream_row("lb3_cam5", "camera_frames")["topic"] == "/sensor/camera/lb3_cam5/image"


def test_polars_and_duckdb_read_the_same_counts(clean: Run) -> None:
    root = clean.lake.root
    written = clean.streams().group_by("table").agg(pl.col("rows_written").sum())
    expected = dict(written.iter_rows())
    con = duckdb.connect()
    for table, n in expected.items():
        glob = f"{root}/normalized/{table}/*/*.parquet"
        key = "scan_id" if table == "lidar_points" else "stream"  # points name no stream
        by_polars = (
            pl.scan_parquet(glob, hive_partitioning=True)
            .group_by(key)
            .agg(pl.len().alias("n"))
            .collect()
        )
        rows = con.execute(
            f"SELECT {key}, count(*) FROM read_parquet('{glob}', hive_partitioning = true) "
            f"GROUP BY {key}"
        ).fetchall()
        assert dict(rows) == dict(by_polars.iter_rows()), table
        assert sum(dict(rows).values()) == n, table


# --- broken sessions ----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_conservation_with_each_fault(tmp_path: Path, fault: str) -> None:
    run = _run(tmp_path, frozenset({fault}))
    assert_conserved(run)
    facts = run.truth["faults"][fault]
    quarantine = run.table("quarantine")
    if fault in ("bad_magic", "truncated_packet", "hits_past_eof"):
        start, end = facts["skipped"]
        row = quarantine.filter(pl.col("stream") == "velodyne_hits").row(0, named=True)
        assert (row["byte_offset"], row["byte_length"]) == (start, end - start)
        assert row["source_file"].endswith("velodyne_hits.bin")
        assert row["raw"] == (run.session / "velodyne_hits.bin").read_bytes()[start:end][:4096]
        points = run.stream_row("velodyne_hits", "lidar_points")
        hits = run.truth["files"]["velodyne_hits.bin"]["hits"]
        assert points["rows_written"] == hits - facts["lost_hits"]
        assert points["rows_quarantined"] == 1
    elif fault in ("csv_short_row", "csv_text_field"):
        stream = facts["file"].removesuffix(".csv")
        row = quarantine.filter(pl.col("stream") == stream).row(0, named=True)
        text = (run.session / facts["file"]).read_text().splitlines()[facts["line"] - 1]
        assert row["line"] == facts["line"] and row["raw"] == text.encode()
        assert row["record_index"] == facts["line"] - 1
        stats = run.stream_row(stream, {"gps_rtk": "gnss", "wheels": "wheel_odometry"}[stream])
        assert stats["rows_quarantined"] == 1
        assert stats["rows_written"] == run.truth["files"][facts["file"]]["rows"]
    elif fault == "duplicate_utime":
        assert run.stream_row("gps", "gnss")["duplicates"] == 1
        assert quarantine.height == 0
    elif fault == "backward_utime":
        # the moved ms25_euler line has no ms25 row at its utime: quarantined, its line named
        stats = run.stream_row("ms25_euler", "imu")
        assert (stats["records_joined"], stats["rows_quarantined"]) == (
            stats["records_read"] - 1,
            1,
        )
        row = quarantine.filter(pl.col("stream") == "ms25_euler").row(0, named=True)
        assert row["reason"] == "no_ms25_row_at_utime" and row["line"] == facts["line"]
        text = (run.session / "ms25_euler.csv").read_text().splitlines()[facts["line"] - 1]
        assert [float(x) for x in row["raw"].decode().split(",")] == [
            float(x) for x in text.split(",")
        ]
        imu = run.table("imu")
        assert (
            imu["time_ns"].is_sorted()
            and imu.height == run.stream_row("ms25", "imu")["rows_written"]
        )
        assert imu.get_column("orientation_w").null_count() == 1
    elif fault == "missing_optional":
        assert "kvh" in run.report.missing
        assert run.streams().filter(pl.col("stream") == "kvh").height == 0
    else:
        raise AssertionError(f"fault {fault} has no expectation here")
    if fault != "missing_optional":
        assert run.streams().filter(pl.col("stream") == "kvh").height == 1


# --- damage the generator has no switch for ------------------------------------------------------


def _swap_hokuyo_utimes(session: Path) -> None:
    """Make record 10 of hokuyo_4m.bin earlier than record 9 (ranges stay with their record)."""
    path = session / "hokuyo_4m.bin"
    rec = np.fromfile(path, dtype=np.dtype([("t", "<u8"), ("r", "<u2", 726)]))
    rec["t"][10] = rec["t"][9] - 5
    rec.tofile(path)


def test_backward_hokuyo_record_is_sorted_with_its_ranges(tmp_path: Path) -> None:
    run = _run(tmp_path, prepare=_swap_hokuyo_utimes)
    assert_conserved(run)
    stats = run.stream_row("hokuyo_4m", "laser_scans")
    assert stats["reordered"] == 1 and stats["out_of_order"] == 0
    rec = np.fromfile(
        run.session / "hokuyo_4m.bin", dtype=np.dtype([("t", "<u8"), ("r", "<u2", 726)])
    )
    scans = run.table("laser_scans", "hokuyo_4m")
    order = np.argsort(rec["t"], kind="stable")
    np.testing.assert_array_equal(
        scans.get_column("time_ns").to_numpy(), rec["t"][order].astype(np.int64) * 1000
    )
    assert order[9] == 10 and order[10] == 9
    metres = (rec["r"][order].astype(np.float64) * 0.005 - 100.0).astype(np.float32)
    expected = np.where(metres <= 0, np.float32(np.nan), metres).astype(np.float64)
    assert_same(np.array(scans.get_column("ranges_m").to_list(), dtype=np.float64), expected)


def _break_binaries(session: Path) -> None:
    """Truncate the last Hokuyo record, add 3 stray bytes to a sync scan, corrupt one TIFF."""
    path = session / "hokuyo_30m.bin"
    path.write_bytes(path.read_bytes()[:-100])
    sync = sorted((session / "velodyne_sync").iterdir())[2]
    sync.write_bytes(sync.read_bytes() + b"abc")
    tiff = sorted((session / "lb3" / "Cam1").iterdir())[4]
    tiff.write_bytes(b"JUNK" + tiff.read_bytes()[4:])
    _ask_velodyne("velodyne_sync")(session)


def test_truncated_and_corrupt_binaries_are_quarantined_with_positions(tmp_path: Path) -> None:
    run = _run(tmp_path, prepare=_break_binaries)
    assert_conserved(run)
    q = run.table("quarantine")
    size_30m = (run.session / "hokuyo_30m.bin").stat().st_size
    row = q.filter(pl.col("stream") == "hokuyo_30m").row(0, named=True)
    assert row["byte_offset"] == size_30m // 2170 * 2170
    assert row["byte_length"] == size_30m % 2170 == 2070
    assert row["record_index"] == size_30m // 2170
    hokuyo = run.stream_row("hokuyo_30m", "laser_scans")
    records = run.truth["files"]["hokuyo_30m.bin"]["records"]
    assert (hokuyo["rows_written"], hokuyo["rows_quarantined"]) == (records - 1, 1)
    sync = sorted((run.session / "velodyne_sync").iterdir())[2]
    row = q.filter(pl.col("stream") == "velodyne_sync").row(0, named=True)
    assert row["source_file"].endswith(sync.name) and row["record_index"] == 2
    assert row["byte_offset"] == sync.stat().st_size - 3 and row["byte_length"] == 3
    scans = run.stream_row("velodyne_sync", "lidar_scans")
    assert scans["rows_quarantined"] == 1 and scans["rows_written"] == scans["records_read"] - 1
    row = q.filter(pl.col("stream") == "lb3_cam1").row(0, named=True)
    assert row["record_index"] == 4 and row["raw"][:4] == b"JUNK"
    cam1 = run.stream_row("lb3_cam1", "camera_frames")
    cam0 = run.stream_row("lb3_cam0", "camera_frames")
    assert cam1["rows_written"] == cam0["rows_written"] - 1 and cam1["rows_quarantined"] == 1

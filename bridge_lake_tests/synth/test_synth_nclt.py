import json
import time

import numpy as np
import polars as pl
import pytest

from bridge_lake.formats.nclt.csv_tables import COV_INDEX, read_table
from bridge_lake.formats.nclt.hokuyo import iter_hokuyo
from bridge_lake.formats.nclt.kinds import ALL_KINDS, nclt_kind
from bridge_lake.formats.nclt.layout import locate_session
from bridge_lake.formats.nclt.velodyne import iter_velodyne_packets
from bridge_lake.synth.nclt import TRUTH_FILE, write_nclt_drive

DATE = "2012-08-20"


@pytest.fixture(scope="module")
def drive(tmp_path_factory):
    root = tmp_path_factory.mktemp("nclt")
    files = write_nclt_drive(root, minutes=0.5, seed=21, date=DATE, hits_per_rev=2000)
    session = root / DATE
    return session, files, json.loads((session / TRUTH_FILE).read_text())


def rate(utime):
    """Rows per second from the typical spacing (gaps such as the indoor segment excluded)."""
    return 1e6 / np.median(np.diff(utime))


def test_every_kind_is_written_under_the_date_folder(drive):
    session, files, _ = drive
    kinds = {nclt_kind(p.relative_to(session.parent).as_posix()) for p in files}
    assert kinds - {None} == set(ALL_KINDS)
    assert all(p.is_relative_to(session) for p in files)
    assert locate_session(session.parent).missing == []
    assert [
        p.name for p in files if nclt_kind(p.relative_to(session.parent).as_posix()) is None
    ] == [TRUTH_FILE]


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    a = write_nclt_drive(tmp_path / "a", minutes=0.05, seed=3, hits_per_rev=300, image_size=(8, 6))
    b = write_nclt_drive(tmp_path / "b", minutes=0.05, seed=3, hits_per_rev=300, image_size=(8, 6))
    c = write_nclt_drive(tmp_path / "c", minutes=0.05, seed=4, hits_per_rev=300, image_size=(8, 6))
    assert [p.relative_to(tmp_path / "a") for p in a] == [p.relative_to(tmp_path / "b") for p in b]
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b, strict=True))
    hits = lambda files: next(p for p in files if p.name == "velodyne_hits.bin").read_bytes()  # noqa: E731
    assert hits(a) != hits(c)


def test_sensor_rates_are_the_real_ones(drive):
    session, _, _ = drive
    expected = {
        "ms25": (45, 50),
        "ms25_euler": (45, 50),
        "kvh": (90, 98),
        "wheels": (40, 50),
        "odometry_mu_100hz": (95, 110),
        "odometry_mu": (4.5, 5.5),
        "gps_rtk": (2.2, 2.8),
    }
    for kind, (lo, hi) in expected.items():
        utime = read_table(kind, session / f"{kind}.csv").get_column("utime").to_numpy()
        assert lo <= rate(utime) <= hi, kind
    gt = (
        read_table("groundtruth", session / f"groundtruth_{DATE}.csv")
        .get_column("utime")
        .to_numpy()
    )
    assert 100 <= rate(gt) <= 150


def test_gps_pairs_and_quirks(drive):
    session, _, truth = drive
    gps = read_table("gps", session / "gps.csv")
    facts = truth["files"]["gps.csv"]
    assert set(gps.get_column("mode").unique().to_list()) == {2, 3}
    assert gps.get_column("num_sats").unique().to_list() == [0]
    mode2 = gps.filter(pl.col("mode") == 2)
    mode3 = gps.filter(pl.col("mode") == 3)
    assert mode2.get_column("alt").null_count() == mode2.height
    assert mode3.get_column("alt").null_count() == 0
    assert mode2.get_column("track").null_count() == 0
    nan_track = gps.filter(pl.col("track").is_null())
    assert nan_track.height >= 1 and set(nan_track.get_column("mode").to_list()) == {3}
    assert nan_track.get_column("speed").null_count() == nan_track.height
    track = gps.get_column("track").drop_nulls()
    assert track.min() >= 0 and track.max() < 360 and track.max() > 6.3  # degrees, not radians
    # a mode-2 row is followed 1-300 ms later by a mode-3 row at the same position
    nxt = gps.with_columns(pl.all().shift(-1).name.suffix("_next")).filter(pl.col("mode") == 2)
    dt = (nxt.get_column("utime_next") - nxt.get_column("utime")).to_numpy()
    assert np.all((dt >= 1_000) & (dt <= 300_000))
    assert (nxt.get_column("lat") == nxt.get_column("lat_next")).all()
    assert (nxt.get_column("mode_next") == 3).all()
    lo, hi = facts["indoor"]
    utime = gps.get_column("utime").to_numpy()
    assert not np.any((utime > lo) & (utime < hi)) and hi - lo > 1e6
    assert np.diff(utime).max() > 2e6
    alt = gps.filter(pl.col("utime") == facts["alt_outlier_utime"]).get_column("alt")[0]
    assert alt < 0 and (mode3.get_column("alt") < 0).sum() == 1
    assert gps.filter(pl.col("utime") == facts["speed_spike_utime"]).get_column("speed")[0] > 5
    lat = np.degrees(mode3.get_column("lat").to_numpy())
    assert np.all(np.abs(lat - 42.293227) < 0.01)


def test_covariances_positive_definite_and_odometry_from_identity(drive):
    session, _, _ = drive
    for name, kind in [(f"cov_{DATE}.csv", "cov"), ("odometry_cov.csv", "odometry_cov")]:
        cov = read_table(kind, session / name).drop("utime").to_numpy()
        m = np.zeros((len(cov), 6, 6))
        for k, (i, j) in enumerate(COV_INDEX):
            m[:, i, j] = m[:, j, i] = cov[:, k]
        assert np.linalg.eigvalsh(m).min() > 0, name
    odo = read_table("odometry_mu_100hz", session / "odometry_mu_100hz.csv")
    assert odo.row(0)[1:] == (0, 0, 0, 0, 0, 0)
    gt = read_table("groundtruth", session / f"groundtruth_{DATE}.csv").drop_nulls()
    span = gt.select(pl.col("x").max() - pl.col("x").min()).item()
    assert 5 < span < 500


def test_imu_specific_force_at_rest_and_wheels_follow_speed(drive):
    session, _, _ = drive
    ms25 = read_table("ms25", session / "ms25.csv")
    first = ms25.head(20)
    assert first.get_column("accel_z").mean() == pytest.approx(-9.81, abs=0.2)
    mag = np.linalg.norm(ms25.select("mag_x", "mag_y", "mag_z").to_numpy(), axis=1)
    assert np.all((mag > 0.2) & (mag < 0.6))
    wheels = read_table("wheels", session / "wheels.csv")
    speed = (wheels.get_column("v_left") + wheels.get_column("v_right")) / 2
    assert 0.5 < speed.max() < 2.5 and speed.head(5).abs().max() < 0.3


def test_lidar_packets_hokuyo_and_images(drive):
    session, _, truth = drive
    counts, utimes = [], []
    for batch in iter_velodyne_packets(session / "velodyne_hits.bin"):
        counts.append(batch.counts)
        utimes.append(batch.utimes)
    counts, utimes = np.concatenate(counts), np.concatenate(utimes)
    assert counts.max() <= 384 and len(np.unique(counts)) > 3
    assert np.median(np.diff(utimes)) in (552, 553)
    revs = truth["files"]["velodyne_hits.bin"]["revolutions"]
    assert len(revs) == pytest.approx(0.5 * 60 * 10, abs=2)
    for kind, hz in (("hokuyo_30m", 40), ("hokuyo_4m", 10)):
        utime = np.concatenate(
            [b.column("utime").to_numpy() for b in iter_hokuyo(kind, session / f"{kind}.bin")]
        )
        assert rate(utime) == pytest.approx(hz, rel=0.05)
    cams = [sorted(p.name for p in (session / "lb3" / f"Cam{k}").iterdir()) for k in range(6)]
    assert all(c == cams[0] for c in cams)
    assert rate(np.array([int(n.split(".")[0]) for n in cams[0]])) == pytest.approx(5, rel=0.1)


def test_missing_optional_and_unknown_fault(tmp_path):
    write_nclt_drive(
        tmp_path,
        minutes=0.05,
        seed=1,
        date=DATE,
        faults=frozenset({"missing_optional"}),
        hits_per_rev=200,
    )
    assert not (tmp_path / DATE / "kvh.csv").exists()
    assert locate_session(tmp_path).missing == ["kvh"]
    with pytest.raises(ValueError, match="unknown faults"):
        write_nclt_drive(tmp_path, minutes=0.05, seed=1, faults=frozenset({"fire"}))


def test_demo_sized_drive_is_small_and_quick(tmp_path):
    t0 = time.perf_counter()
    files = write_nclt_drive(tmp_path, minutes=0.5, seed=0, hits_per_rev=4000)
    elapsed = time.perf_counter() - t0
    assert sum(p.stat().st_size for p in files) < 80e6
    assert elapsed < 20


def test_synthesize_refuses_a_drive_folder_with_files_unless_forced(tmp_path):
    """A 3-minute drive overwritten by a short one kept the long drive's files (issue 15)."""
    from bridge_lake.errors import BridgeLakeError
    from bridge_lake.synth import synthesize

    (first,) = synthesize(tmp_path, drives=1, minutes=0.05, source="nclt", light=True)
    stray = first.path / "2012-01-08" / "lb3" / "Cam0" / "1.tiff"
    stray.write_bytes(b"left over")
    with pytest.raises(BridgeLakeError, match=r"already holds a drive .* --force"):
        synthesize(tmp_path, drives=1, minutes=0.02, source="nclt", light=True)
    assert stray.exists()
    (again,) = synthesize(tmp_path, drives=1, minutes=0.02, source="nclt", light=True, force=True)
    assert again.path == first.path and not stray.exists()
    assert sorted(p for p in again.path.rglob("*") if p.is_file()) == sorted(again.files)

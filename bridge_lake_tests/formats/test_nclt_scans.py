import json

import numpy as np
import pytest

from bridge_lake.formats.nclt import constants as C
from bridge_lake.formats.nclt.scans import ScanReport, check_ring_order, iter_scans
from bridge_lake.synth.nclt import write_nclt_drive
from bridge_lake_tests.formats.nclt_packets import hit, packet

T0 = 1326030975726043


def test_ring_is_elevation_order_of_the_hdl32e_table():
    lasers = np.arange(32)
    formula = np.where(lasers % 2 == 0, lasers // 2, 16 + (lasers - 1) // 2)
    np.testing.assert_array_equal(C.RING_OF_LASER, formula)
    assert np.all(np.diff(C.LASER_VERTICAL_DEG[np.argsort(C.RING_OF_LASER)]) > 0)


def test_scans_reproduce_the_writer_revolutions(tmp_path):
    write_nclt_drive(tmp_path, minutes=0.1, seed=5, date="2012-02-02", hits_per_rev=2500)
    session = tmp_path / "2012-02-02"
    revs = json.loads((session / "_synth_truth.json").read_text())["files"]["velodyne_hits.bin"][
        "revolutions"
    ]
    report = ScanReport()
    scans = list(iter_scans(session / "velodyne_hits.bin", batch_hits=7000, report=report))
    assert [(s.start_utime, s.points.num_rows) for s in scans] == [
        (r["start_utime"], r["hits"]) for r in revs
    ]
    assert [s.cut for s in scans] == ["azimuth"] * (len(scans) - 1) + ["end"]
    assert report.ring_order == "table" and report.spin == 1 and report.invalid_laser_ids == 0
    for scan in scans:
        pts = scan.points
        laser = pts.column("laser_id").to_numpy()
        np.testing.assert_array_equal(pts.column("ring").to_numpy(), C.RING_OF_LASER[laser])
        utime = pts.column("utime").to_numpy()
        np.testing.assert_array_equal(
            pts.column("time_offset_ns").to_numpy(), (utime - scan.start_utime) * 1000
        )
        assert utime.max() == scan.end_utime
        assert 0 <= pts.column("time_offset_ns").to_numpy().max() < 101_000_000


def test_gap_ends_a_scan_and_stray_laser_ids_are_counted(tmp_path):
    # four packets sweeping 0 .. 0.3 rad, a 2 s dropout, two more packets
    def at(angle, laser=0):
        r = 10.0
        return hit(
            round((r * np.cos(angle) + 100) / 0.005),
            round((r * np.sin(angle) + 100) / 0.005),
            20000,
            1,
            laser,
        )

    data = b"".join(packet(T0 + 553 * i, [at(0.1 * i)]) for i in range(4))
    data += packet(T0 + 2_000_000, [at(0.5, laser=40)]) + packet(T0 + 2_000_553, [at(0.6)])
    path = tmp_path / "h.bin"
    path.write_bytes(data)
    report = ScanReport()
    scans = list(iter_scans(path, cut_azimuth=np.pi, report=report))
    assert [(s.points.num_rows, s.cut) for s in scans] == [(4, "gap"), (2, "end")]
    assert scans[1].start_utime == T0 + 2_000_000
    assert scans[1].points.column("time_offset_ns").to_pylist() == [0, 553_000]
    assert report.invalid_laser_ids == 1
    assert scans[1].points.column("ring").to_pylist()[0] == 255


def test_ring_check_derives_the_order_when_data_disagree():
    rng = np.random.default_rng(0)
    laser = rng.integers(0, 32, 5000).astype(np.uint8)
    swapped = C.LASER_VERTICAL_DEG.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    elev = np.radians(swapped[laser])
    x, y, z = 10 * np.cos(elev), np.zeros_like(elev), -10 * np.sin(elev)
    assert (
        check_ring_order(
            *(np.radians(C.LASER_VERTICAL_DEG[laser]) * 0 + v for v in (x, y)), z, laser
        )
        is not None
    )
    derived = check_ring_order(x, y, z, laser)
    assert derived[0] == C.RING_OF_LASER[1] and derived[1] == C.RING_OF_LASER[0]
    true_elev = np.radians(C.LASER_VERTICAL_DEG[laser])
    assert check_ring_order(10 * np.cos(true_elev), y, -10 * np.sin(true_elev), laser) is None


@pytest.mark.parametrize("batch_hits", [1, 333, 1 << 20])
def test_scans_do_not_depend_on_batching(tmp_path, batch_hits):
    write_nclt_drive(tmp_path, minutes=0.05, seed=2, date="2012-02-02", hits_per_rev=800)
    path = tmp_path / "2012-02-02" / "velodyne_hits.bin"
    ref = [s.points for s in iter_scans(path)]
    got = [s.points for s in iter_scans(path, batch_hits=batch_hits)]
    assert len(got) == len(ref) and all(a.equals(b) for a, b in zip(got, ref, strict=True))

import struct

import numpy as np
import pytest

from bridge_lake.formats.nclt.hokuyo import SCAN_GEOMETRY, HokuyoReport, iter_hokuyo

T0 = 1326030975726043


def record(utime, codes):
    return struct.pack(f"<Q{len(codes)}H", utime, *codes)


def test_geometry_matches_the_devkit():
    g30, g4 = SCAN_GEOMETRY["hokuyo_30m"], SCAN_GEOMETRY["hokuyo_4m"]
    assert g30.record_dtype.itemsize == 2170 and g4.record_dtype.itemsize == 1460
    assert np.degrees(g30.angle_min) == pytest.approx(-135.0)
    assert np.degrees(g30.angle_max) == pytest.approx(135.0)
    assert g4.angle_min == -2.0862138 and g4.angle_increment == 0.0061359233


def test_exact_ranges_no_returns_and_truncated_tail(tmp_path):
    codes = np.full(1081, 20600, dtype=np.uint16)  # 3.0 m
    codes[0], codes[1], codes[2], codes[1080] = 0, 20000, 65535, 19999
    path = tmp_path / "hokuyo_30m.bin"
    path.write_bytes(record(T0, codes.tolist()) + record(T0 - 5, [20001] * 1081) + b"\x00" * 100)
    report = HokuyoReport()
    batches = list(iter_hokuyo("hokuyo_30m", path, report=report))
    ranges = batches[0].column("ranges")
    first = ranges[0].values.to_numpy(zero_copy_only=False)
    assert np.isnan(first[[0, 1, 1080]]).all()
    assert first[2] == np.float32(227.675) and first[3] == np.float32(3.0)
    assert ranges[1].values.to_numpy(zero_copy_only=False)[0] == np.float32(0.005)
    assert batches[0].column("utime").to_pylist() == [T0, T0 - 5]
    assert report.records == 2 and report.no_returns == 3 and report.backward_utimes == 1
    assert (report.truncated.start, report.truncated.end) == (2 * 2170, 2 * 2170 + 100)


def test_batches_cover_every_record_in_order(tmp_path):
    path = tmp_path / "hokuyo_4m.bin"
    path.write_bytes(b"".join(record(T0 + i, [20000 + i] * 726) for i in range(10)))
    batches = list(iter_hokuyo("hokuyo_4m", path, batch_records=3))
    assert [b.num_rows for b in batches] == [3, 3, 3, 1]
    utimes = [u for b in batches for u in b.column("utime").to_pylist()]
    assert utimes == [T0 + i for i in range(10)]
    assert batches[3].column("ranges")[0].values[0].as_py() == pytest.approx(0.045, abs=1e-6)

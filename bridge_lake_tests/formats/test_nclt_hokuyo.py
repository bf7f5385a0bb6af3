import struct

import numpy as np
import pytest

from bridge_lake.errors import TruncatedFileError
from bridge_lake.formats.nclt.hokuyo import (
    SCAN_GEOMETRY,
    HokuyoReport,
    decode_records,
    iter_hokuyo,
    read_records_at,
    read_utimes,
)
from bridge_lake.formats.nclt.velodyne import SkippedRange

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


FOUR_M = SCAN_GEOMETRY["hokuyo_4m"]
TAIL = 700


def _write_records(path, *, swap=False):
    """12 hokuyo_4m records of random codes (a tenth no-returns: <= 20000), a duplicate utime, a
    backward one, and a truncated 700-byte tail; `swap` makes records 9 and 10 change places
    in time (a file that needs reordering). Returns the records."""
    rng = np.random.default_rng(6)
    rec = np.zeros(12, dtype=FOUR_M.record_dtype)
    rec["utime"] = T0 + np.arange(12) * 100_000
    rec["utime"][4] = rec["utime"][3]
    rec["utime"][7] = rec["utime"][6] - 5
    if swap:
        rec["utime"][10] = rec["utime"][9] - 1
    rec["range"] = rng.integers(15_000, 65_536, size=(12, FOUR_M.ranges))
    path.write_bytes(rec.tobytes() + b"\x01" * TAIL)
    return rec


def _metres(codes):
    metres = (codes.astype(np.float64) * 0.005 - 100.0).astype(np.float32)
    return np.where(metres <= 0, np.float32(np.nan), metres)


def _mapped(path):
    """Whether this process has a memory mapping of `path` (Linux /proc/self/maps)."""
    with open("/proc/self/maps") as fh:
        return any(line.rstrip().endswith(str(path)) for line in fh)


@pytest.mark.parametrize("batch_records", [1, 5, 12, 4096])
def test_block_reads_give_every_whole_record_and_the_truncated_tail(tmp_path, batch_records):
    path = tmp_path / "hokuyo_4m.bin"
    rec = _write_records(path)
    report = HokuyoReport()
    batches = []
    for batch in iter_hokuyo("hokuyo_4m", path, batch_records=batch_records, report=report):
        assert not _mapped(path)
        batches.append(batch)
    assert [b.num_rows for b in batches] == [
        min(batch_records, 12 - a) for a in range(0, 12, batch_records)
    ]
    utime = np.concatenate([b.column("utime").to_numpy() for b in batches])
    ranges = np.concatenate([b.column("ranges").values.to_numpy() for b in batches])
    np.testing.assert_array_equal(utime, rec["utime"].astype(np.int64))
    expected = _metres(rec["range"])
    np.testing.assert_array_equal(ranges.reshape(12, FOUR_M.ranges), expected)
    assert report.records == 12 and report.no_returns == np.isnan(expected).sum()
    assert report.no_returns > 0
    assert (report.duplicate_utimes, report.backward_utimes) == (1, 1)
    assert report.truncated == SkippedRange(
        12 * 1460, 12 * 1460 + TAIL, f"last record truncated: {TAIL} of 1460 bytes"
    )
    np.testing.assert_array_equal(
        read_utimes("hokuyo_4m", path, batch_records=batch_records), rec["utime"]
    )


def test_records_by_permuted_index_of_a_reordered_file(tmp_path):
    path = tmp_path / "hokuyo_4m.bin"
    rec = _write_records(path, swap=True)
    perm = np.argsort(rec["utime"], kind="stable")
    assert perm[9] == 10 and perm[10] == 9
    for index in (perm, perm[::-1], np.array([11, 0, 11, 3]), np.array([], dtype=np.int64)):
        got = read_records_at("hokuyo_4m", path, index)
        np.testing.assert_array_equal(got["utime"], rec["utime"][index])
        np.testing.assert_array_equal(got["range"], rec["range"][index])
    report = HokuyoReport()
    batch = decode_records("hokuyo_4m", read_records_at("hokuyo_4m", path, perm), report)
    np.testing.assert_array_equal(batch.column("utime").to_numpy(), np.sort(rec["utime"]))
    values = batch.column("ranges").values.to_numpy().reshape(12, FOUR_M.ranges)
    np.testing.assert_array_equal(values, _metres(rec["range"][perm]))
    assert report.records == 12 and not _mapped(path)


def test_a_file_shrinking_while_read_is_a_truncated_file_error(tmp_path):
    path = tmp_path / "hokuyo_4m.bin"
    _write_records(path)
    batches = iter_hokuyo("hokuyo_4m", path, batch_records=4)
    next(batches)
    path.write_bytes(path.read_bytes()[: 6 * 1460])
    with pytest.raises(TruncatedFileError) as err:
        list(batches)
    assert err.value.offset == 4 * 1460 and err.value.path == str(path)

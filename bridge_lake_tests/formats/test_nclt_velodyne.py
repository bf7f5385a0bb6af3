import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bridge_lake.errors import TruncatedFileError
from bridge_lake.formats.nclt import velodyne
from bridge_lake.formats.nclt.velodyne import HitsReport, iter_velodyne_hits, read_velodyne_sync
from bridge_lake.synth.nclt import write_nclt_drive
from bridge_lake_tests.formats.nclt_packets import hit, metres, packet

T0 = 1326030975726043


def read(path, **kw):
    report = HitsReport()
    batches = list(iter_velodyne_hits(path, report=report, **kw))
    table = pa.Table.from_batches(batches, schema=velodyne.HITS_SCHEMA)
    return table, report


def test_code_to_metre_ends_and_signed_pitfall(tmp_path):
    hits = [hit(0, 65535, 20000, 7, 0), hit(32768, 32767, 1, 255, 31), hit(65535, 0, 65534, 1, 17)]
    path = tmp_path / "velodyne_hits.bin"
    path.write_bytes(packet(T0, hits))
    table, report = read(path)
    assert table.column("x").to_pylist() == pytest.approx([-100.0, 63.84, 227.675], abs=8e-6)
    assert table.column("y").to_pylist() == pytest.approx([227.675, 63.835, -100.0], abs=8e-6)
    assert table.column("z").to_pylist() == pytest.approx([0.0, metres(1), metres(65534)], abs=8e-6)
    # exactly the float64 formula rounded once to float32
    expected = np.float32(np.array([0, 32768, 65535]) * 0.005 - 100.0)
    np.testing.assert_array_equal(table.column("x").to_numpy(), expected)
    assert table.column("intensity").to_pylist() == [7, 255, 1]
    assert table.column("laser_id").to_pylist() == [0, 31, 17]
    assert table.column("utime").to_pylist() == [T0] * 3
    assert report.packets == 1 and report.hits == 3 and report.skipped == []


def test_packets_zero_hits_and_backward_time_kept_in_file_order(tmp_path):
    data = (
        packet(T0, [hit(1, 2, 3)])
        + packet(T0 + 500, [])
        + packet(T0 - 100, [hit(4, 5, 6), hit(7, 8, 9)])
    )
    data += packet(T0 - 100, [hit(10, 11, 12)])
    path = tmp_path / "h.bin"
    path.write_bytes(data)
    table, report = read(path)
    assert table.column("utime").to_pylist() == [T0, T0 - 100, T0 - 100, T0 - 100]
    assert report.packets == 4 and report.backward_utimes == 1 and report.duplicate_utimes == 1


def synthetic(tmp_path, faults=frozenset(), minutes=0.1, hits_per_rev=3000):
    write_nclt_drive(
        tmp_path,
        minutes=minutes,
        seed=11,
        date="2012-01-15",
        faults=faults,
        hits_per_rev=hits_per_rev,
    )
    session = tmp_path / "2012-01-15"
    return session, json.loads((session / "_synth_truth.json").read_text())


def test_synthetic_file_matches_writer_truth_in_any_batching(tmp_path, monkeypatch):
    session, truth = synthetic(tmp_path)
    facts = truth["files"]["velodyne_hits.bin"]
    whole, report = read(session / "velodyne_hits.bin")
    assert whole.num_rows == facts["hits"] and report.packets == facts["packets"]
    assert whole.column("utime")[0].as_py() == facts["first_utime"]
    assert whole.column("utime")[-1].as_py() == facts["last_utime"]
    z = whole.column("z").to_numpy()
    assert z.min() == np.float32(-100.0) and z.max() == np.float32(227.675)
    # tiny batches and a window far smaller than the file give identical content
    monkeypatch.setattr(velodyne, "WINDOW_BYTES", 40_000)
    small, report2 = read(session / "velodyne_hits.bin", batch_hits=1000, threads=1)
    assert small.equals(whole) and report2.skipped == []
    assert (
        max(b.num_rows for b in iter_velodyne_hits(session / "velodyne_hits.bin", batch_hits=1000))
        <= 1000 + 384
    )


def test_bad_magic_midfile_is_skipped_and_reported_nothing_after_lost(tmp_path):
    clean, _ = synthetic(tmp_path / "a")
    broken, truth = synthetic(tmp_path / "b", faults=frozenset({"bad_magic"}))
    fault = truth["faults"]["bad_magic"]
    ref, _ = read(clean / "velodyne_hits.bin")
    got, report = read(broken / "velodyne_hits.bin")
    assert [(r.start, r.end) for r in report.skipped] == [tuple(fault["skipped"])]
    assert "bad magic" in report.skipped[0].reason
    assert got.num_rows == ref.num_rows - fault["lost_hits"]
    # every hit before and after the bad packet is intact: only that packet's utime is gone
    at = fault["skipped"][0]
    lost_utime = int(
        np.frombuffer((clean / "velodyne_hits.bin").read_bytes()[at + 12 : at + 20], "<u8")[0]
    )
    assert got.equals(ref.filter(pa.array(ref.column("utime").to_numpy() != lost_utime)))


@pytest.mark.parametrize("fault", ["truncated_packet", "hits_past_eof"])
def test_damaged_last_packet_is_reported_and_dropped(tmp_path, fault):
    session, truth = synthetic(tmp_path, faults=frozenset({fault}))
    facts = truth["faults"][fault]
    got, report = read(session / "velodyne_hits.bin")
    assert [(r.start, r.end) for r in report.skipped] == [tuple(facts["skipped"])]
    assert "truncated" in report.skipped[0].reason
    assert got.num_rows == truth["files"]["velodyne_hits.bin"]["hits"] - facts["lost_hits"]


def test_impossible_hit_count_and_garbage_with_fake_magic_resync(tmp_path):
    good1 = packet(T0, [hit(1, 1, 1)])
    bad = packet(T0 + 553, [hit(2, 2, 2)], num_hits=100_000)
    # garbage containing a magic whose header is not trustworthy (utime far away)
    garbage = b"\x01\x02\x03" + packet(T0 + 3_600_000_000, [hit(9, 9, 9)]) + b"\x00" * 5
    good2 = packet(T0 + 1106, [hit(3, 3, 3), hit(4, 4, 4)])
    path = tmp_path / "h.bin"
    path.write_bytes(good1 + bad + garbage + good2)
    got, report = read(path)
    assert got.column("x").to_pylist() == pytest.approx([metres(1), metres(3), metres(4)], abs=8e-6)
    start = len(good1)
    assert [(r.start, r.end) for r in report.skipped] == [(start, start + len(bad) + len(garbage))]
    assert "above the cap" in report.skipped[0].reason
    assert report.skipped_bytes == len(bad) + len(garbage)


def test_file_ending_inside_a_header(tmp_path):
    path = tmp_path / "h.bin"
    path.write_bytes(packet(T0, [hit(5, 5, 5)]) + b"\x9c\xad\x9c")
    got, report = read(path)
    assert got.num_rows == 1
    assert report.skipped[0].end == path.stat().st_size and "header" in report.skipped[0].reason


def test_empty_file_yields_nothing(tmp_path):
    path = tmp_path / "h.bin"
    path.write_bytes(b"")
    assert list(iter_velodyne_hits(path)) == []


def test_velodyne_sync_is_the_even_revolutions(tmp_path):
    session, truth = synthetic(tmp_path)
    revs = {r["rev"]: r for r in truth["files"]["velodyne_hits.bin"]["revolutions"]}
    files = sorted((session / "velodyne_sync").iterdir())
    assert len(files) == len([r for r in revs if r % 2 == 0])
    for f in files:
        scan = read_velodyne_sync(f)
        rev = truth["files"][f"velodyne_sync/{f.name}"]["rev"]
        assert scan.num_rows == revs[rev]["hits"]
        assert set(scan.column("utime").to_pylist()) == {revs[rev]["start_utime"]}


def test_velodyne_sync_exact_values_and_truncation_error(tmp_path):
    path = tmp_path / f"{T0}.bin"
    path.write_bytes(hit(0, 65535, 20000, 3, 9) + hit(1, 2, 3, 4, 5))
    scan = read_velodyne_sync(path)
    assert scan.column("x").to_pylist() == pytest.approx([-100.0, metres(1)], abs=8e-6)
    assert scan.column("y").to_pylist()[0] == pytest.approx(227.675, abs=8e-6)
    assert scan.column("laser_id").to_pylist() == [9, 5]
    path.write_bytes(hit(0, 0, 0) + b"\x01\x02\x03")
    with pytest.raises(TruncatedFileError, match=str(path)):
        read_velodyne_sync(path)


def uniform_hits_file(path, packets, hits_per_packet=384):
    """`packets` packets of `hits_per_packet` hits each, built as one structured array."""
    record = np.dtype(
        [
            ("magic", "<u8"),
            ("num_hits", "<u4"),
            ("utime", "<u8"),
            ("pad", "<u4"),
            ("hits", "<u8", (hits_per_packet,)),
        ]
    )
    data = np.zeros(packets, record)
    data["magic"] = np.frombuffer(packet(0, [])[:8], "<u8")[0]
    data["num_hits"] = hits_per_packet
    data["utime"] = T0 + 553 * np.arange(packets)
    data["hits"] = np.arange(packets * hits_per_packet, dtype="<u8").reshape(packets, -1)
    data.tofile(path)
    return packets * hits_per_packet


def test_decode_futures_never_run_ahead_of_the_consumer(tmp_path, monkeypatch):
    """However slow the consumer, at most workers + 1 decoded batches exist at a time."""
    path = tmp_path / "velodyne_hits.bin"
    hits = uniform_hits_file(path, 2000)
    monkeypatch.setattr(velodyne, "WINDOW_BYTES", 200_000)
    submitted = []
    real_pool = velodyne.ThreadPoolExecutor

    class CountingPool(real_pool):
        def submit(self, fn, *args, **kwargs):
            submitted.append(1)
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(velodyne, "ThreadPoolExecutor", CountingPool)
    consumed, rows, ahead = 0, 0, []
    for batch in iter_velodyne_hits(path, batch_hits=1000, threads=2):
        consumed += 1
        rows += batch.num_rows
        ahead.append(len(submitted) - consumed)
    assert rows == hits and consumed == len(submitted) > 100 and sum(ahead) > 0
    assert max(ahead) <= 2 + 1


def rss_file_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_mapped_pages_behind_the_decoder_leave_the_resident_set(tmp_path, monkeypatch):
    """A 50 MB file read through 1 MB windows keeps a few MB of it mapped, not all of it."""
    path = tmp_path / "velodyne_hits.bin"
    uniform_hits_file(path, 16_000)
    monkeypatch.setattr(velodyne, "WINDOW_BYTES", 1 << 20)
    batches = iter_velodyne_hits(path, batch_hits=20_000)
    next(batches)
    start, peak = rss_file_kib(), 0
    for _ in batches:
        peak = max(peak, rss_file_kib() - start)
    assert peak < 8 << 10, f"{peak} KiB of the file stayed resident"

"""The synthetic ADTF drive: valid for the vendor reader, realistic, deterministic, fast."""

from __future__ import annotations

import hashlib
import time

import av
import numpy as np
import pytest

from bridge_lake.formats.adtf import open_dat
from bridge_lake.synth.adtf import write_adtf_drive

adtf_file = pytest.importorskip("adtf_file")


@pytest.fixture(scope="module")
def drive(tmp_path_factory):
    out = tmp_path_factory.mktemp("drive")
    started = time.perf_counter()
    files = write_adtf_drive(out, minutes=0.5, seed=7)
    return files, time.perf_counter() - started


def test_one_small_fast_file(drive):
    files, seconds = drive
    assert len(files) == 1 and files[0].suffix == ".dat"
    assert files[0].stat().st_size < 50_000_000
    assert seconds < 20


def test_deterministic_for_a_seed(drive, tmp_path):
    files, _ = drive
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    again = write_adtf_drive(tmp_path / "a", minutes=0.5, seed=7)
    other = write_adtf_drive(tmp_path / "b", minutes=0.5, seed=8)
    digest = hashlib.sha256(files[0].read_bytes()).hexdigest()
    assert hashlib.sha256(again[0].read_bytes()).hexdigest() == digest
    assert hashlib.sha256(other[0].read_bytes()).hexdigest() != digest


def test_vendor_reads_every_sample(drive):
    files, _ = drive
    reader = adtf_file.create_reader(str(files[0]))
    vendor = hashlib.sha256()
    count = 0
    while (item := reader.get_next_item()) is not None:
        if item.type.name == "Sample":
            vendor.update(item.stream_id.to_bytes(2, "little") + bytes(item.sample.buffer))
            count += 1
    ours = hashlib.sha256()
    with open_dat(files[0]) as f:
        n = 0
        for s in f.samples():
            ours.update(s.stream_id.to_bytes(2, "little") + bytes(s.data))
            n += 1
        assert f.issues.items == []
    assert (count, vendor.hexdigest()) == (n, ours.hexdigest())


def test_streams_and_rates(drive):
    files, _ = drive
    with open_dat(files[0]) as f:
        streams = {s.name: s for s in f.streams}
        assert set(streams) == {
            "front_camera",
            "can_powertrain",
            "can_chassis",
            "lidar_top",
            "gnss",
            "imu",
        }
        rate = {n: s.item_count / 30.0 for n, s in streams.items()}
        assert 10 <= rate["front_camera"] <= 30
        assert 900 <= rate["can_powertrain"] + rate["can_chassis"] <= 1100
        assert rate["lidar_top"] == 10 and rate["gnss"] == 10 and rate["imu"] == 100
        assert streams["can_chassis"].stream_type.meta_type == "adtf/devicetb/can"
        times = [s.time_ns for s in f.samples()]
        assert times == sorted(times)


def test_camera_is_decodable_h264(drive):
    files, _ = drive
    codec = av.CodecContext.create("h264", "r")
    frames = []
    with open_dat(files[0]) as f:
        keys = []
        for s in f.samples():
            if s.stream_id == f.stream("front_camera").stream_id:
                keys.append(bytes(s.data[:64]).find(b"\x00\x00\x00\x01\x67") >= 0)
                frames += codec.decode(av.Packet(bytes(s.data)))
    frames += codec.decode(None)
    assert len(frames) == len(keys) == 450
    assert (frames[0].width, frames[0].height) == (320, 240)
    assert keys[0] and keys[30] and not keys[1]


def test_ddl_streams_decode_with_drifting_device_clocks(drive):
    files, _ = drive
    with open_dat(files[0]) as f:
        imu = f.decode("imu")
        assert imu.num_rows == 3000
        acc_z = imu.column("f32AccZ").to_numpy()
        assert abs(acc_z.mean() - 9.81) < 0.05
        for name in ("imu", "gnss", "lidar_top"):
            table = f.decode(name)
            device = table.column("tmDeviceTime").to_numpy().astype(np.float64)
            recorder = table.column("sample_time_ns").to_numpy().astype(np.float64)
            slope = np.polyfit(recorder - recorder[0], device - device[0], 1)[0]
            assert 0 < abs(slope - 1.0) < 100e-6, name
        can = f.decode("can_powertrain")
        assert set(can.column("ui8Length").to_pylist()) == {8}
        assert len(set(can.column("ui32Id").to_pylist())) == 5
        stamp_us = can.column("tmTimeStamp").to_numpy().astype(np.float64)
        rec = can.column("sample_time_ns").to_numpy().astype(np.float64) / 1000
        slope = np.polyfit(rec - rec[0], stamp_us - stamp_us[0], 1)[0]
        assert 0 < abs(slope - 1.0) < 100e-6
        lidar = f.decode("lidar_top")
        counts = lidar.column("ui32PointCount").to_numpy()
        assert (counts == 2000).all()
        assert (
            lidar.column("aPoints").combine_chunks().value_lengths().to_pylist() == counts.tolist()
        )


def test_reading_is_zero_copy_and_bounded(drive):
    import mmap
    import tracemalloc

    files, _ = drive
    tracemalloc.start()
    try:
        total = 0
        with open_dat(files[0]) as f:
            for s in f.samples():
                total += len(s.data)
                assert isinstance(s.data, memoryview) and isinstance(s.data.obj, mmap.mmap)
            del s
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 10_000_000
    assert peak < 3_000_000, peak


def _mapped_rss_kib(path) -> int:
    """Resident KiB of this process's mappings of `path` (Linux /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:
                inside = line.rstrip().endswith(str(path))
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


def test_sequential_read_releases_pages_behind_it(drive, monkeypatch):
    from bridge_lake.formats.adtf import ifhd

    files, _ = drive
    monkeypatch.setattr(ifhd, "RELEASE_WINDOW", 256 << 10)
    with open_dat(files[0]) as f:
        first = None
        copy = b""
        peak = 0
        for i, s in enumerate(f.samples()):
            if first is None:
                first, copy = s, bytes(s.data)
            if i % 2000 == 0:
                peak = max(peak, _mapped_rss_kib(files[0]))
        assert files[0].stat().st_size > 10_000_000
        assert peak < 4_000, peak  # KiB resident, of a 14 MB file
        assert bytes(first.data) == copy  # a released page re-faults the same bytes

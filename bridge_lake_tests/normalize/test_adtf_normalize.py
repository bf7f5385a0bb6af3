"""ADTF → normalized tables: counts against the vendor reader, exact values, clock fit,
conservation, quarantine of unmapped / corrupt samples, mapping validation, real files."""

from __future__ import annotations

import fractions
import shutil
import struct
from pathlib import Path

import adtf_file
import av
import numpy as np
import pyarrow as pa
import pytest

import bridge_lake.synth.adtf as synth
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf import DatWriter, open_dat
from bridge_lake.formats.video import sps_size
from bridge_lake.lake import Lake
from bridge_lake.normalize.adtf import find_recordings, normalize_adtf
from bridge_lake.normalize.adtf_mapping import AdtfMappingError, load_mapping, parse_mapping
from bridge_lake.normalize.sink import DriveSink
from bridge_lake_tests.testdata import ADTF_TESTDATA as TESTDATA
from bridge_lake_tests.testdata import adtf_path, adtf_recordings

SYNTH_STREAMS = ("front_camera", "can_powertrain", "can_chassis", "lidar_top", "gnss", "imu")


def _normalize(lake_dir: Path, drive: Path, mapping=None):
    lake = Lake(str(lake_dir))
    with DriveSink(lake, "d1") as sink:
        normalize_adtf(drive, sink, mapping)
        result = sink.finish()
    return lake, result


def _vendor_samples(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    """stream name -> [(chunk time µs, payload bytes)] from the vendor reader (independent)."""
    reader = adtf_file.create_reader(str(path))
    names = {s.stream_id: s.name for s in reader.streams}
    out: dict[str, list[tuple[int, bytes]]] = {n: [] for n in names.values()}
    while (item := reader.get_next_item()) is not None:
        if item.type.name == "Sample":
            t = item.time_stamp
            us = (t.days * 86400 + t.seconds) * 1_000_000 + t.microseconds
            out[names[item.stream_id]].append((us, bytes(item.sample.buffer)))
    return out


def _table(lake: Lake, name: str, stream: str | None = None) -> pa.Table:
    t = lake.read_partition("normalized", name, "d1")
    if stream is not None and name == "lidar_points":  # points name their stream by scan
        scans = _table(lake, "lidar_scans", stream).column("scan_id")
        return t.filter(pa.compute.is_in(t.column("scan_id"), scans))
    if stream is not None:
        t = t.filter(pa.compute.equal(t.column("stream"), stream))
    return t


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    base = tmp_path_factory.mktemp("adtf_small")
    (base / "drive").mkdir()
    files = synth.write_adtf_drive(base / "drive", minutes=0.05, seed=1)
    lake, result = _normalize(base / "lake", base / "drive")
    return files[0], lake, result, _vendor_samples(files[0])


def _stats(result, stream: str, table: str):
    (s,) = [s for s in result.streams if s.info.stream == stream and s.info.table == table]
    return s


# --- the synthetic drive ---------------------------------------------------------------------


def test_every_stream_mapped_and_counted_against_vendor(small):
    _, lake, result, vendor = small
    tables = {
        "front_camera": "camera_frames",
        "can_powertrain": "can_frames",
        "can_chassis": "can_frames",
        "lidar_top": "lidar_scans",
        "gnss": "gnss",
        "imu": "imu",
    }
    assert set(vendor) == set(SYNTH_STREAMS)
    for stream, table in tables.items():
        s = _stats(result, stream, table)
        assert s.records_read == len(vendor[stream]) > 0, stream
        assert (s.rows_written, s.rows_quarantined) == (len(vendor[stream]), 0), stream
        assert _table(lake, table, stream).num_rows == len(vendor[stream])
        assert s.conserved
        assert s.info.mapping.startswith("rule ") and "(default: " in s.info.mapping, stream
        assert s.info.target == "mapped"
    assert all(s.conserved for s in result.streams)
    assert result.quarantined == 0


def test_master_time_is_the_chunk_time(small):
    _, lake, _, vendor = small
    imu = _table(lake, "imu", "imu")
    # the vendor reports µs (ns truncated): our ns floored to µs must equal it exactly
    assert (imu.column("time_ns").to_numpy() // 1000).tolist() == [t for t, _ in vendor["imu"]]


def test_can_frames_exact(small):
    _, lake, _, vendor = small
    can = _table(lake, "can_frames", "can_chassis")
    for i in (0, 1, 777, len(vendor["can_chassis"]) - 1):
        raw = vendor["can_chassis"][i][1]
        channel, stamp_us, can_id, length = struct.unpack_from("<BqIB", raw, 1)
        row = {k: can.column(k)[i].as_py() for k in can.column_names}
        assert row["channel"] == channel == 1
        assert row["can_id"] == can_id & 0x7FFFFFFF
        assert row["is_extended"] is bool(can_id >> 31)
        assert row["dlc"] == length
        assert row["data"] == raw[24 : 24 + length]
        assert row["sensor_time_ns"] == stamp_us * 1000
        assert row["is_remote"] is False
    ids = set(can.column("can_id").to_pylist())
    assert ids == {0x086, 0x0A3, 0x130, 0x17C, 0x3E9}


def test_imu_and_gnss_values_exact(small):
    _, lake, _, vendor = small
    imu = _table(lake, "imu", "imu")
    for i in (0, 150, len(vendor["imu"]) - 1):
        stamp, ax, ay, az, gx, gy, gz, _ = struct.unpack("<q7f", vendor["imu"][i][1])
        got = [
            imu.column(c)[i].as_py()
            for c in (
                "linear_acceleration_x",
                "linear_acceleration_y",
                "linear_acceleration_z",
                "angular_velocity_x",
                "angular_velocity_y",
                "angular_velocity_z",
            )
        ]
        assert got == [ax, ay, az, gx, gy, gz]
        assert imu.column("sensor_time_ns")[i].as_py() == stamp
        assert imu.column("frame_id")[i].as_py() == "imu"
    gnss = _table(lake, "gnss", "gnss")
    for i in (0, len(vendor["gnss"]) - 1):
        raw = vendor["gnss"][i][1]
        stamp, lat, lon, alt, speed, heading, fix, sats = struct.unpack_from("<q3d2fBB", raw)
        assert gnss.column("lat_deg")[i].as_py() == lat
        assert gnss.column("lon_deg")[i].as_py() == lon
        assert gnss.column("alt_m")[i].as_py() == alt
        assert gnss.column("speed_mps")[i].as_py() == pytest.approx(speed, rel=1e-7)
        assert gnss.column("track_rad")[i].as_py() == pytest.approx(np.radians(heading))
        assert (gnss.column("fix_mode")[i].as_py(), gnss.column("num_sats")[i].as_py()) == (
            fix,
            sats,
        )
        assert 48 < lat < 49 and 11 < lon < 12


def test_lidar_scans_and_points(small):
    _, lake, result, vendor = small
    scans = _table(lake, "lidar_scans", "lidar_top")
    points = _table(lake, "lidar_points", "lidar_top")
    n_scans = len(vendor["lidar_top"])
    counts = [struct.unpack_from("<I", raw, 12)[0] for _, raw in vendor["lidar_top"]]
    assert scans.column("point_count").to_pylist() == counts
    assert (
        points.num_rows == sum(counts) == _stats(result, "lidar_top", "lidar_points").rows_written
    )
    assert _stats(result, "lidar_top", "lidar_points").conserved
    k = n_scans // 2
    raw = vendor["lidar_top"][k][1]
    frame = struct.unpack_from("<I", raw, 8)[0]
    pts = np.frombuffer(raw, dtype=synth.LIDAR_POINT, offset=16)
    assert scans.column("sensor_scan_id")[k].as_py() == frame
    mine = points.filter(pa.compute.equal(points.column("scan_id"), scans.column("scan_id")[k]))
    for c in ("x", "y", "z", "intensity", "ring", "time_offset_ns"):
        assert np.array_equal(mine.column(c).to_numpy(), pts[c]), c
    assert 0 < mine.column("time_offset_ns").to_numpy().max() < 100_000_000


def test_every_lidar_scan_ends_at_its_last_point(small):
    """end_time_ns = time_ns + the largest time_offset_ns of the scan's points, from the raw
    samples (fails on the code before: the end was set to time_ns)."""
    _, lake, result, vendor = small
    scans = _table(lake, "lidar_scans", "lidar_top")
    spans = [
        int(np.frombuffer(raw, dtype=synth.LIDAR_POINT, offset=16)["time_offset_ns"].max())
        for _, raw in vendor["lidar_top"]
    ]
    start = scans.column("time_ns").to_numpy()
    np.testing.assert_array_equal(scans.column("end_time_ns").to_numpy() - start, spans)
    assert min(spans) > 0
    assert _stats(result, "lidar_top", "lidar_scans").violations == {}


def test_camera_frames(small):
    _, lake, result, vendor = small
    cam = _table(lake, "camera_frames", "front_camera")
    assert cam.column("data").to_pylist() == [raw for _, raw in vendor["front_camera"]]
    assert set(cam.column("encoding").to_pylist()) == {"h264"}
    sizes = zip(cam.column("width").to_pylist(), cam.column("height").to_pylist(), strict=True)
    assert set(sizes) == {(320, 240)}
    # the generator puts an IDR frame every 2 s (keyint = 2 * fps = 30)
    keys = cam.column("is_keyframe").to_pylist()
    assert keys == [i % 30 == 0 for i in range(len(keys))]
    # and every AU decodes with an independent decoder; key frames are the IDR ones
    codec = av.CodecContext.create("h264", "r")
    decoded = 0
    for data in cam.column("data").to_pylist():
        for packet in codec.parse(data):
            decoded += len(codec.decode(packet))
    assert decoded >= len(keys) - 2
    s = _stats(result, "front_camera", "camera_frames")
    assert s.info.topic == "/sensor/camera_front/image_raw/compressed"
    assert s.info.expected_rate_hz == 15.0


def test_topics_rates_and_source_file(small):
    path, _, result, _ = small
    topics = {(s.info.stream, s.info.table): s.info.topic for s in result.streams}
    assert topics[("can_powertrain", "can_frames")] == "/vehicle/can/0"
    assert topics[("can_chassis", "can_frames")] == "/vehicle/can/1"
    assert topics[("imu", "imu")] == "/sensor/imu/data"
    assert topics[("gnss", "gnss")] == "/sensor/gps/fix"
    assert topics[("lidar_top", "lidar_scans")] == "/sensor/lidar/points"
    rates = {s.info.stream: s.info.expected_rate_hz for s in result.streams}
    assert rates["imu"] == 100 and rates["gnss"] == 10
    # no rate in the CAN rule: measured from the first batch (5 ids x 100 Hz per bus)
    assert 450 <= rates["can_chassis"] <= 550
    assert {s.info.source_file for s in result.streams} == {path.name}


@pytest.fixture(scope="module")
def drifting(tmp_path_factory):
    """A 30 s drive whose device clocks are recorded as the generator creates them."""
    created: list[synth.DeviceClock] = []

    class Recording(synth.DeviceClock):
        def __init__(self, rng, unit_ns):
            super().__init__(rng, unit_ns)
            created.append(self)

    base = tmp_path_factory.mktemp("adtf_drift")
    mp = pytest.MonkeyPatch()
    mp.setattr(synth, "DeviceClock", Recording)
    (base / "drive").mkdir()
    try:
        synth.write_adtf_drive(base / "drive", minutes=0.5, seed=5, lidar_points=64)
    finally:
        mp.undo()
    _, result = _normalize(base / "lake", base / "drive")
    # creation order in write_adtf_drive: can_powertrain, can_chassis, lidar, gnss, imu
    names = ["can_powertrain", "can_chassis", "lidar_top", "gnss", "imu"]
    return dict(zip(names, created, strict=True)), result


@pytest.mark.parametrize("stream", ["can_powertrain", "can_chassis", "imu"])
def test_clock_fit_recovers_generator_drift(drifting, stream):
    clocks, result = drifting
    truth = clocks[stream]
    table = {"imu": "imu"}.get(stream, "can_frames")
    fit = _stats(result, stream, table).fit
    assert fit is not None
    # master - sensor = -offset - ppm * elapsed + latency  =>  drift ≈ -ppm
    assert fit.drift_ppm == pytest.approx(-truth.ppm, abs=2.0)
    assert abs(fit.offset_ns + truth.offset_ns) < 2_000_000  # latency ≤ 0.9 ms, µs ticks


# --- quarantine ------------------------------------------------------------------------------

CAN_ONLY = """
version: 1
rules:
  - name: can
    match: {struct: tCANData}
    table: can_frames
    decoder: can
    topic: /vehicle/can/{channel}
    sensor_time: {element: tmTimeStamp, unit: us}
    fields: {channel: ui8Channel, can_id: ui32Id, dlc: ui8Length, data: aui8Data,
             flags: ui16Flags, tag: ui8Tag}
"""


def test_unmapped_streams_land_in_generic_tables(small, tmp_path):
    """Issue 13: no rule is no quarantine. DDL streams land decoded in ddl_<struct> (values
    checked against the vendor's payload bytes read with numpy), the video stream (no DDL)
    byte for byte in adtf_payloads."""
    path, _, _, vendor = small
    lake, result = _normalize(tmp_path, path.parent, parse_mapping(CAN_ONLY))
    assert result.quarantined == 0 and all(s.conserved for s in result.streams)
    imu = _table(lake, "ddl_timudata", "imu")
    raw = np.frombuffer(b"".join(p for _, p in vendor["imu"]), dtype=synth.IMU_DTYPE)
    assert imu.num_rows == len(vendor["imu"]) == _stats(result, "imu", "ddl_timudata").rows_written
    assert [t // 1000 for t in imu.column("time_ns").to_pylist()] == [t for t, _ in vendor["imu"]]
    assert imu.column("f32AccX").to_numpy().tolist() == raw["acc"][:, 0].tolist()
    assert imu.column("tmDeviceTime").to_numpy().tolist() == raw["stamp"].tolist()
    gnss = _table(lake, "ddl_tgnssfix", "gnss")
    graw = np.frombuffer(b"".join(p for _, p in vendor["gnss"]), dtype=synth.GNSS_DTYPE)
    assert gnss.column("f64Latitude").to_numpy().tolist() == graw["lat"].tolist()
    scans = _table(lake, "ddl_tlidarscan", "lidar_top")
    assert scans.num_rows == len(vendor["lidar_top"])
    first = vendor["lidar_top"][0][1]
    head = np.frombuffer(first[: synth.LIDAR_HEAD.itemsize], dtype=synth.LIDAR_HEAD)[0]
    points = np.frombuffer(first[synth.LIDAR_HEAD.itemsize :], dtype=synth.LIDAR_POINT)
    assert scans.column("ui32PointCount")[0].as_py() == head["count"] == len(points)
    assert [p["f32X"] for p in scans.column("aPoints")[0].as_py()] == points["x"].tolist()
    video = _table(lake, "adtf_payloads", "front_camera")
    assert video.column("data").to_pylist() == [p for _, p in vendor["front_camera"]]
    info = _stats(result, "imu", "ddl_timudata").info
    assert (info.target, info.mapping, info.ddl_struct) == (
        "generic",
        "generic: no mapping rule",
        "tImuData",
    )
    assert "tImuData" in info.ddl
    assert _stats(result, "front_camera", "adtf_payloads").info.target == "payload"
    assert _stats(result, "can_chassis", "can_frames").rows_written == len(vendor["can_chassis"])
    assert not lake.has_partition("normalized", "quarantine", "d1") or (
        _table(lake, "quarantine").num_rows == 0
    )


def test_generic_table_of_a_drive_goes_when_its_stream_is_mapped(small, tmp_path):
    """A re-normalized drive whose struct is now mapped loses its ddl_<struct> partition."""
    path, *_ = small
    lake, _ = _normalize(tmp_path, path.parent, parse_mapping(CAN_ONLY))
    assert lake.has_partition("normalized", "ddl_timudata", "d1")
    lake, _ = _normalize(tmp_path, path.parent)
    assert not lake.has_partition("normalized", "ddl_timudata", "d1")
    assert "ddl_timudata" not in [
        t for t in lake.tables("normalized") if lake.has_partition("normalized", t, "d1")
    ]


def _write_damaged(path: Path) -> dict[str, list[int]]:
    """A recording with good and bad IMU / lidar / CAN samples; returns the bad indices."""
    imu = np.zeros(5, dtype=synth.IMU_DTYPE)
    imu["stamp"] = np.arange(5) * 10_000_000
    imu["acc"] = [1.0, 2.0, 9.81]
    lidar_head = np.zeros(1, dtype=synth.LIDAR_HEAD)
    can = np.zeros(4, dtype=synth.CAN_DTYPE)
    can["id"] = [0x100, 0x80000000 | 0x1ABCDEF, 0x100, 0x900]
    can["length"] = [8, 4, 8, 8]
    can["data"] = np.arange(32, dtype=np.uint8).reshape(4, 8)
    can["flags"] = [0, 0, 1, 0]  # frame 2 is an error frame; frame 3's id exceeds 11 bits
    t0 = 1_700_000_000_000_000_000
    with DatWriter(path, version=0x0500) as w:
        si = w.add_stream("imu", stream_type=synth._ddl_type("tImuData"))
        sl = w.add_stream("lidar", stream_type=synth._ddl_type("tLidarScan", "tLidarPoint"))
        sc = w.add_stream("can", stream_type=synth._ddl_type("tCANData"))
        writes = []
        for k in range(5):
            payload = imu[k].tobytes() if k != 3 else imu[k].tobytes()[:20]  # truncated
            writes.append((t0 + k * 10_000_000, si, payload))
        for k in range(3):
            lidar_head["count"] = 4 if k != 1 else 1000  # scan 1 claims more points than it has
            lidar_head["frame"] = k
            pts = np.zeros(4, dtype=synth.LIDAR_POINT)
            pts["x"] = pts["y"] = pts["z"] = pts["intensity"] = k
            writes.append((t0 + k * 100_000_000 + 1, sl, lidar_head.tobytes() + pts.tobytes()))
        for k in range(4):
            writes.append((t0 + k * 1_000_000 + 2, sc, can[k].tobytes()))
        for t, sid, payload in sorted(writes, key=lambda w: w[0]):
            w.write_sample(sid, t, payload)
    return {"imu": [3], "lidar": [1], "can": [2, 3]}


def test_corrupt_samples_quarantined_with_offsets(tmp_path):
    drive = tmp_path / "drive"
    drive.mkdir()
    bad = _write_damaged(drive / "damaged.dat")
    with open_dat(drive / "damaged.dat") as f:
        offsets = {}
        for s in f.samples():
            offsets.setdefault(f.stream(s.stream_id).name, []).append(s.offset)
    lake, result = _normalize(tmp_path / "lake", drive)
    q = _table(lake, "quarantine")
    for stream, table, total in (
        ("imu", "imu", 5),
        ("lidar", "lidar_scans", 3),
        ("can", "can_frames", 4),
    ):
        s = _stats(result, stream, table)
        assert (s.records_read, s.rows_written, s.rows_quarantined) == (
            total,
            total - len(bad[stream]),
            len(bad[stream]),
        )
        mine = q.filter(pa.compute.equal(q.column("stream"), stream))
        assert mine.column("record_index").to_pylist() == bad[stream]
        assert mine.column("byte_offset").to_pylist() == [offsets[stream][i] for i in bad[stream]]
        assert set(mine.column("source_file").to_pylist()) == {"damaged.dat"}
    reasons = dict(zip(q.column("stream").to_pylist(), q.column("reason").to_pylist(), strict=True))
    assert reasons["imu"] == "payload of 20 bytes, struct tImuData is 36 bytes"
    assert "does not decode as tLidarScan" in reasons["lidar"]
    can_reasons = q.filter(pa.compute.equal(q.column("stream"), "can")).column("reason")
    assert can_reasons.to_pylist() == ["CAN error frame", "CAN id 0x900 exceeds 11 bits"]
    can = _table(lake, "can_frames", "can")
    assert can.column("can_id").to_pylist() == [0x100, 0x1ABCDEF]
    assert can.column("is_extended").to_pylist() == [False, True]
    assert can.column("data").to_pylist() == [bytes(range(8)), bytes(range(8, 12))]
    points = _table(lake, "lidar_points", "lidar")
    scan_ids = _table(lake, "lidar_scans", "lidar").column("scan_id").to_pylist()
    assert len(scan_ids) == 2  # the middle sample is quarantined: no scan, no points
    assert points.column("scan_id").to_pylist() == [scan_ids[0]] * 4 + [scan_ids[1]] * 4
    assert all(s.conserved for s in result.streams)


def test_unreadable_recording_is_counted(tmp_path):
    drive = tmp_path / "drive"
    drive.mkdir()
    good = drive / "ok.dat"
    _write_damaged(good)
    (drive / "sub").mkdir()
    (drive / "sub" / "cut.dat").write_bytes(good.read_bytes()[:100])  # magic, header cut
    (drive / "notes.dat").write_bytes(b"not an ifhd file")
    assert [p.relative_to(drive).as_posix() for p in find_recordings(drive)] == [
        "ok.dat",
        "sub/cut.dat",
    ]
    lake, result = _normalize(tmp_path / "lake", drive)
    (cut,) = [s for s in result.streams if s.info.source_file == "sub/cut.dat"]
    assert (cut.records_read, cut.rows_quarantined) == (1, 1)
    q = _table(lake, "quarantine")
    row = q.filter(pa.compute.equal(q.column("source_file"), "sub/cut.dat"))
    assert row.column("reason")[0].as_py().startswith("unreadable recording: ")
    assert row.column("byte_length")[0].as_py() == 100


# --- mapping validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: [\n  - name: x\n    match: {struct: a\n", "not valid YAML at line"),
        ("rules: {}", "'rules' must be a list"),
        ("- just a list", "top level must be a mapping"),
        (
            "rules:\n  - {name: r1, match: {struct: a}, table: nope, fields: {x: y}}",
            "rule 'r1': table 'nope' is not a sensor table",
        ),
        (
            "rules:\n  - {name: r2, match: {struct: a}, table: imu, fields: {bogus: y}}",
            "rule 'r2': fields ['bogus'] are not columns of imu",
        ),
        (
            "rules:\n  - {name: r3, match: {struct: a}, table: imu, fields: {frame_id: y},"
            " sensor_time: {element: t, unit: fortnights}}",
            "rule 'r3': sensor_time.unit 'fortnights' unknown",
        ),
        (
            "rules:\n  - {name: r4, match: {struct: a}, table: imu, decoder: can,"
            " fields: {channel: c}}",
            "rule 'r4': decoder 'can' cannot fill table 'imu'",
        ),
        (
            "rules:\n  - {name: r5, match: {colour: red}, table: imu, fields: {frame_id: y}}",
            "rule 'r5': unknown match keys ['colour']",
        ),
        (
            "rules:\n  - {name: r6, match: {struct: a}, table: gnss, extra: 1, fields: {}}",
            "rule 'r6': unknown keys ['extra']",
        ),
        (
            "rules:\n  - {name: r7, match: {struct: a}, table: gnss,"
            " fields: {lat_deg: {element: x, scale: big}}}",
            "rule 'r7': fields.lat_deg.scale must be a number",
        ),
        ("rules:\n  - !!python/object:os.system {}", "not valid YAML"),
    ],
)
def test_malformed_mapping_gives_typed_error(tmp_path, text, message):
    path = tmp_path / "mapping.yaml"
    path.write_text(text)
    with pytest.raises(AdtfMappingError) as err:
        load_mapping(path)
    assert isinstance(err.value, BridgeLakeError)
    assert str(err.value).startswith(str(path))
    assert message in str(err.value)


def test_missing_mapping_file_and_default_loads(tmp_path):
    with pytest.raises(AdtfMappingError, match="cannot read"):
        load_mapping(tmp_path / "absent.yaml")
    default = load_mapping()
    assert {r.name for r in default.rules} >= {"can_tcandata", "imu_timudata", "video_h264"}


def test_rule_naming_missing_element_sends_the_stream_to_its_generic_table(small, tmp_path):
    path, _, _, vendor = small
    text = CAN_ONLY.replace("ui8Length", "ui8Len")
    _, result = _normalize(tmp_path, path.parent, parse_mapping(text))
    s = _stats(result, "can_chassis", "ddl_tcandata")
    assert (s.rows_written, s.rows_quarantined) == (len(vendor["can_chassis"]), 0)
    assert s.info.mapping == (
        "generic: rule can cannot apply: struct tCANData has no element 'ui8Len' (for 'ui8Len')"
    )


# --- real recordings ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """Every available real recording (and its DDL sidecar) as one drive."""
    drive = tmp_path_factory.mktemp("real_drive")
    for rec in adtf_recordings():
        shutil.copy(rec, drive / rec.name)
        sidecar = rec.with_name(rec.name + ".description")
        if sidecar.is_file():
            shutil.copy(sidecar, drive / sidecar.name)
    lake, result = _normalize(tmp_path_factory.mktemp("real_lake"), drive)
    return lake, result


def test_real_files_nothing_lost(real):
    lake, result = real
    available = {p.name: p for p in adtf_recordings()}
    recordings = {p.name for p in find_recordings(TESTDATA)}
    assert recordings == {
        "test_file_rec_newfile.dat",
        "test_sample_info.dat",
        "one_empty_stream.dat",
        "test_type_seek.dat",
        "test_modify_extension.adtfdat",
        "test_history.dat",
    }
    recordings = set(available)
    assert {s.info.source_file for s in result.streams} == recordings
    for name in recordings:
        with open_dat(available[name], strict=False) as f:
            n = sum(1 for _ in f.samples())
            issues = len(f.issues.items)
        mine = [s for s in result.streams if s.info.source_file == name]
        assert sum(s.records_read for s in mine) == n + issues, name
        assert all(s.conserved for s in mine), name
    q = _table(lake, "quarantine")
    assert q.num_rows == sum(s.rows_quarantined for s in result.streams)


def test_real_adtf2_ddl_stream_lands_decoded_by_default(real):
    """mytype is stored serialized; values checked against the vendor's deserialized bytes."""
    lake, result = real
    s = _stats(result, "test_serialize", "ddl_mytype")
    assert (s.records_read, s.rows_quarantined, s.rows_written) == (1000, 0, 1000)
    rows = _table(lake, "ddl_mytype", "test_serialize")
    vendor = _vendor_samples(TESTDATA / "test_file_rec_newfile.dat")["test_serialize"]
    expect = [struct.unpack_from("<IH", raw) for _, raw in vendor]
    assert rows.column("testval1").to_pylist() == [a for a, _ in expect]
    assert rows.column("testval2").to_pylist() == [b for _, b in expect]
    # the recording counts µs from its start; its header says it started 2014-10-13T07:56:10Z
    assert s.info.recording_offset_ns == 1_413_186_970 * 10**9
    assert s.info.recording_clock.startswith("header")
    offset = s.info.recording_offset_ns
    assert [t - offset for t in rows.column("time_ns").to_pylist()] == [t * 1000 for t, _ in vendor]


def test_real_files_nothing_quarantined_for_lack_of_a_mapping(real):
    """Issue 13 acceptance: every sample of the public recordings is a row; per stream (and
    substream) the counts equal the reader's; payload rows equal the vendor's bytes."""
    lake, result = real
    assert result.quarantined == 0
    rows = {s.info.stream: s.rows_written for s in result.streams}
    available = {p.name: p for p in adtf_recordings()}
    names = ("test_type_seek.dat", "adtfdat.hexpat.adtfdat", "test_sample_info.dat")
    for name in [n for n in names if n in available]:
        with open_dat(available[name]) as f:
            counts: dict[str, int] = {}
            for sample in f.samples():
                stream = f.stream(sample.stream_id)
                subs = stream.stream_type.substreams() if stream.stream_type else {}
                sub = [n for n, (i, _) in subs.items() if i == sample.substream_id]
                key = f"{stream.name}/{sub[0]}" if sub else stream.name
                counts[key] = counts.get(key, 0) + 1
        for key, n in counts.items():
            mine = [v for k, v in rows.items() if k == key or k.startswith(f"{key}@")]
            assert mine and n in mine, (name, key)
    payloads = _table(lake, "adtf_payloads")
    vendor = _vendor_samples(TESTDATA / "test_type_seek.dat")
    got = payloads.filter(pa.compute.equal(payloads.column("stream"), "in2"))
    assert got.column("data").to_pylist() == [p for _, p in vendor["in2"]]
    u8 = _table(lake, "ddl_uint8", "input")
    vendor = _vendor_samples(TESTDATA / "test_sample_info.dat")["input"]
    assert u8.column("value").to_pylist() == [p[0] for _, p in vendor]


def test_real_ns_file_substreams_land_as_ddl_rows(real):
    """The ADTF 3 ns file (outside the repository: GPL-2.0) lands its substreams decoded."""
    adtf_path("adtfdat.hexpat.adtfdat")
    lake, _ = real
    u32 = _table(lake, "ddl_uint32", "substreams1/stream1")
    assert u32.num_rows == 45 and u32.column("value").to_pylist()[:3] == [102, 103, 104]


def test_real_adtf2_serialized_struct_through_a_custom_rule(tmp_path):
    """mytype is stored serialized (u32 LE at byte 4, u16 BE at byte 8); the vendor returns it
    deserialized (u32 at 0, u16 at 4, host order), so the values are checked independently."""
    drive = tmp_path / "drive"
    drive.mkdir()
    for name in ("test_file_rec_newfile.dat", "test_file_rec_newfile.dat.description"):
        shutil.copy(TESTDATA / name, drive / name)
    mapping = parse_mapping(
        "rules:\n"
        "  - name: mytype_as_wheels\n"
        "    match: {stream: test_serialize, struct: mytype}\n"
        "    table: wheel_odometry\n"
        "    fields:\n"
        "      v_left_mps: testval1\n"
        "      v_right_mps: {element: testval2, scale: 0.5, offset: 1}\n"
    )
    lake, result = _normalize(tmp_path / "lake", drive, mapping)
    vendor = _vendor_samples(drive / "test_file_rec_newfile.dat")["test_serialize"]
    wheels = _table(lake, "wheel_odometry", "test_serialize")
    assert wheels.num_rows == len(vendor) == 1000
    expect = [struct.unpack_from("<IH", raw) for _, raw in vendor]
    assert wheels.column("v_left_mps").to_pylist() == [float(a) for a, _ in expect]
    assert wheels.column("v_right_mps").to_pylist() == [b * 0.5 + 1 for _, b in expect]
    assert wheels.column("sensor_time_ns").null_count == wheels.num_rows
    assert _stats(result, "test_serialize", "wheel_odometry").conserved


# --- H.264 SPS --------------------------------------------------------------------------------


@pytest.mark.parametrize(("width", "height"), [(320, 240), (322, 178), (64, 48)])
def test_sps_size_with_cropping(width, height):
    codec = av.CodecContext.create("libx264", "w")
    codec.width, codec.height, codec.pix_fmt = width, height, "yuv420p"
    codec.time_base = fractions.Fraction(1, 25)
    codec.options = {"preset": "ultrafast", "x264-params": "repeat-headers=1"}
    frame = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
    frame.pts = 0
    data = b"".join(bytes(p) for p in codec.encode(frame) + codec.encode(None))
    at = data.index(b"\x00\x00\x01\x67") + 4
    end = data.index(b"\x00\x00\x01", at)
    assert sps_size(data[at:end]) == (width, height)
    assert sps_size(b"\x42") is None


# --- split recordings ---------------------------------------------------------------------------


def _write_split(folder: Path, names: list[str], per_part: list[int]) -> list[bytes]:
    """A recording split as ADTF recorders do it: every part a complete file naming its
    neighbours in `referencedfiles`; the IMU stream runs across the part boundaries (its
    stream id differs between parts), a payload stream only in some parts. Returns the IMU
    payloads in time order."""
    payloads, t, n = [], 1_700_000_000_000_000_000, 0
    for k, (name, count) in enumerate(zip(names, per_part, strict=True)):
        refs = tuple(f"./{p}" for p in names[max(k - 1, 0) : k + 2])
        with DatWriter(folder / name, version=0x0500, referenced_files=refs) as w:
            if k % 2:
                w.add_stream("marker")  # shifts the IMU's stream id in odd parts
            sid = w.add_stream("imu", stream_type=synth._ddl_type("tImuData"))
            for _ in range(count):
                rec = np.zeros(1, dtype=synth.IMU_DTYPE)
                rec["stamp"] = t
                rec["acc"] = [n, 0.5, 9.81]
                payloads.append(rec.tobytes())
                w.write_sample(sid, t, payloads[-1])
                t += 10_000_000
                n += 1
    return payloads


def test_split_recording_is_one_recording(tmp_path):
    """Issue 13: parts continue one stream on one time base; counts conserved across parts;
    the catalog names every part and the drive's completeness check sees them covered."""
    drive = tmp_path / "drive"
    drive.mkdir()
    names = ["rec.dat", "rec_001.dat", "rec_002.dat"]
    payloads = _write_split(drive, names, [7, 5, 9])
    with DatWriter(drive / "other.dat", version=0x0500) as w:  # an independent recorder
        sid = w.add_stream("imu", stream_type=synth._ddl_type("tImuData"))
        w.write_sample(sid, 1_700_000_000_000_000_000, payloads[0])
    lake, result = _normalize(tmp_path / "lake", drive)
    imu = _stats(result, "imu@rec.dat", "imu")  # other.dat comes first and is `imu`
    assert (imu.records_read, imu.rows_written, imu.rows_quarantined) == (21, 21, 0)
    assert imu.info.source_file == "rec.dat, rec_001.dat, rec_002.dat"
    rows = _table(lake, "imu", "imu@rec.dat")
    expect = np.frombuffer(b"".join(payloads), dtype=synth.IMU_DTYPE)
    assert rows.column("linear_acceleration_x").to_pylist() == expect["acc"][:, 0].tolist()
    assert rows.column("time_ns").to_pylist() == expect["stamp"].tolist()
    assert imu.order.backward == 0 and imu.order.gaps == 0
    other = _stats(result, "imu", "imu")
    assert (other.rows_written, other.info.source_file) == (1, "other.dat")
    from bridge_lake.normalize.drive import covered

    files = {s.info.source_file for s in result.streams}
    assert all(covered(n, files) for n in [*names, "other.dat"])


def test_split_recording_with_a_missing_part_still_reads(tmp_path):
    drive = tmp_path / "drive"
    drive.mkdir()
    names = ["rec.dat", "rec_001.dat", "rec_002.dat"]
    _write_split(drive, names, [4, 10, 4])
    (drive / "rec_001.dat").unlink()
    _, result = _normalize(tmp_path / "lake", drive)
    imu = _stats(result, "imu", "imu")
    assert imu.rows_written == 8 and imu.info.source_file == "rec.dat, rec_002.dat"
    assert imu.order.gaps == 1  # the missing part is a gap, not a silent join
    assert [s.info.stream for s in result.streams] == ["imu"]


# --- several recorders in one drive ---------------------------------------------------------


def test_two_recorders_fitted_onto_one_master_clock(tmp_path):
    """Issue 13: two independent recorders (relative µs clocks, header times 1 s apart)
    record the same CAN bus; they stay separate streams, and the second recording's offset is
    fitted on the frames both saw: the shared frames land on the same master times."""
    drive = tmp_path / "drive"
    drive.mkdir()
    start = 1_700_000_000  # recorder A's clock starts here (Unix s)
    late_ns = 2_345_678_000  # recorder B starts 2.345678 s later
    frames = np.zeros(60, dtype=synth.CAN_DTYPE)
    frames["id"] = 0x100 + np.arange(60)
    frames["length"] = 8
    frames["data"] = np.arange(480, dtype=np.uint8).reshape(60, 8)
    with DatWriter(drive / "a.dat", version=0x0400, file_time=start) as w:
        sid = w.add_stream("can", stream_type=synth._ddl_type("tCANData"))
        for k in range(60):
            w.write_sample(sid, 1_000_000 + k * 100_000_000, frames[k].tobytes())
    with DatWriter(drive / "b.dat", version=0x0400, file_time=start + 2) as w:
        sid = w.add_stream("can", stream_type=synth._ddl_type("tCANData"))
        for k in range(30, 60):  # B saw the second half of the bus traffic
            t = 1_000_000 + k * 100_000_000 - late_ns
            w.write_sample(sid, t + 5_000_000, frames[k].tobytes())  # its clock starts at 5 ms
    lake, result = _normalize(tmp_path / "lake", drive)
    a, b = _stats(result, "can", "can_frames"), _stats(result, "can@b.dat", "can_frames")
    assert a.info.recording_offset_ns == start * 10**9 - 1_000_000
    assert a.info.recording_clock.startswith("header")
    assert b.info.recording_clock.startswith("fitted to a.dat on stream can (30 shared")
    times = _table(lake, "can_frames")
    ta = dict(
        zip(
            _table(lake, "can_frames", "can").column("can_id").to_pylist(),
            _table(lake, "can_frames", "can").column("time_ns").to_pylist(),
            strict=True,
        )
    )
    tb = _table(lake, "can_frames", "can@b.dat")
    assert times.num_rows == 90
    for can_id, t in zip(
        tb.column("can_id").to_pylist(), tb.column("time_ns").to_pylist(), strict=True
    ):
        assert t == ta[can_id]


# --- memory: mapped pages and pending batches bounded by file span ---------------------------


def _mapped_rss_kb(path: Path) -> int:
    """Resident kB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(head[1])
    return total


def test_release_pages_drops_the_mapping_and_samples_still_read(small):
    path = small[0]
    with open_dat(path) as f:
        samples = list(f.samples())
        payloads = [bytes(s.raw) for s in samples]  # touches every sample's pages
        assert _mapped_rss_kb(path) > 0.5 * path.stat().st_size / 1024
        f.release_pages()
        assert _mapped_rss_kb(path) == 0
        assert [bytes(s.raw) for s in samples] == payloads  # re-faulted from the page cache


def test_a_sparse_stream_is_flushed_by_file_span_with_the_same_result(small, tmp_path, monkeypatch):
    """Batches whose samples spread over more than RELEASE_BYTES of the file are flushed (a
    sparse camera stream otherwise maps in the whole file at its one flush), pages are
    released as the file is read, and the lake holds exactly the same rows."""
    import bridge_lake.normalize.adtf as adtf_mod
    import bridge_lake.normalize.adtf_jobs as jobs_mod
    from bridge_lake.formats.adtf.reader import DatFile

    path, lake, _, _ = small
    monkeypatch.setattr(adtf_mod, "RELEASE_BYTES", 64 << 10)  # the reader's page releases
    monkeypatch.setattr(jobs_mod, "RELEASE_BYTES", 64 << 10)  # the jobs' span flushes
    monkeypatch.setattr(adtf_mod, "CHECK_EVERY", 256)  # the small drive has ~3,400 samples
    released, writes = [], []
    real_release, real_write = DatFile.release_pages, DriveSink.write
    monkeypatch.setattr(DatFile, "release_pages", lambda f: released.append(real_release(f)))

    def counting_write(sink, stream, table, data):
        writes.append(stream)
        return real_write(sink, stream, table, data)

    monkeypatch.setattr(DriveSink, "write", counting_write)
    spans, _ = _normalize(tmp_path / "lake", path.parent)
    assert path.stat().st_size > 8 * (64 << 10) and len(released) >= 8
    assert writes.count("front_camera") >= 4
    for table in ("camera_frames", "can_frames", "imu", "gnss", "lidar_scans", "lidar_points"):
        # streams sharing a table interleave by batch: compare each stream's rows in order
        key = "scan_id" if table == "lidar_points" else "stream"
        ours, before = (
            x.read_partition("normalized", table, "d1").sort_by(key) for x in (spans, lake)
        )
        assert ours.equals(before), table

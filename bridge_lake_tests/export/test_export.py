"""Exports of synthetic drives read back by readers we did not write, field by field."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader

from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.mapping import MappingError
from bridge_lake.export.messages import typestore
from bridge_lake.export.source import ExportError
from bridge_lake.export.trim import TrimError
from bridge_lake.geometry import rpy_to_quaternion
from bridge_lake.lake import Lake

NS = 1_000_000_000
CASES = [("mcap", "ros2"), ("mcap", "ros1"), ("bag2", "ros2"), ("bag1", "ros1")]


def read_back(path: Path, encoding: str) -> dict[str, list[tuple[int, object]]]:
    """topic → [(log time, decoded message)] with a reader we did not write: rosbags'
    AnyReader for bags and ROS 2 MCAP; the mcap reader + rosbags' ROS 1 deserializer for
    ROS 1 MCAP (AnyReader reads only the ros2 profile)."""
    out: dict[str, list] = {}
    ros = 2 if encoding == "ros2" else 1
    store = typestore(ros)
    if path.suffix == ".mcap" and ros == 1:
        with path.open("rb") as f:
            reader = make_reader(f, validate_crcs=True)
            for schema, channel, message in reader.iter_messages(log_time_order=True):
                typename = schema.name.replace("/", "/msg/", 1)
                out.setdefault(channel.topic, []).append(
                    (message.log_time, store.deserialize_ros1(message.data, typename))
                )
        return out
    with AnyReader([path], default_typestore=store) as reader:
        for conn, t, raw in reader.messages():
            out.setdefault(conn.topic, []).append((t, reader.deserialize(raw, conn.msgtype)))
    return out


def stamp(header_or_time, ros: int) -> int:
    t = header_or_time.stamp if hasattr(header_or_time, "stamp") else header_or_time
    return t.sec * NS + t.nanosec


def lake_rows(lake: Lake, layer: str, table: str, drive: str, **eq) -> pa.Table:
    t = lake.read_partition(layer, table, drive)
    for k, v in eq.items():
        t = t.filter(pc.equal(t.column(k), v))
    return t


@pytest.fixture(scope="module")
def exports(synthetic_lake, tmp_path_factory):
    out = tmp_path_factory.mktemp("exports")
    made = {}
    for source, drive in synthetic_lake.drives.items():
        for fmt, enc in CASES:
            suffix = {"bag2": "", "bag1": ".bag", "mcap": ".mcap"}[fmt]
            path = out / f"{source}-{fmt}-{enc}{suffix}"
            result = export_drive(
                synthetic_lake.lake, drive.drive_id, path, ExportRequest(format=fmt, encoding=enc)
            )
            made[(source, fmt, enc)] = (result, read_back(path, enc))
    return made


@pytest.mark.parametrize(("fmt", "enc"), CASES)
def test_adtf_export_every_topic_and_count(synthetic_lake, exports, fmt, enc):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    result, got = exports[("adtf", fmt, enc)]
    ros = 2 if enc == "ros2" else 1
    assert set(got) == {
        "/tf_static", "/tf", "/sensor/camera_front/image_raw", "/vehicle/can",
        "/vehicle/can_0", "/vehicle/can_1", "/sensor/lidar/points", "/sensor/gps/fix",
        "/sensor/imu/data",
    }  # fmt: skip
    assert {t: len(v) for t, v in got.items()} == {t: s.messages for t, s in result.topics.items()}
    can = lake_rows(lake, "normalized", "can_frames", drive)
    assert len(got["/vehicle/can"]) == can.num_rows
    assert len(got["/vehicle/can_0"]) == pc.sum(pc.equal(can.column("channel"), 0)).as_py()
    # CAN, field by field, against the lake row at the same time
    t, m = got["/vehicle/can_1"][7]
    row = can.filter(pc.equal(can.column("channel"), 1)).slice(7, 1).to_pylist()[0]
    assert t == row["time_ns"] == stamp(m.header, ros)
    assert (
        m.id == row["can_id"] and m.dlc == row["dlc"] and bool(m.is_extended) == row["is_extended"]
    )
    assert bytes(m.data[: m.dlc]) == row["data"] and m.header.frame_id == row["frame_id"]
    # IMU: no orientation → covariance[0] = -1 (REP-145)
    imu = lake_rows(lake, "normalized", "imu", drive).slice(11, 1).to_pylist()[0]
    t, m = got["/sensor/imu/data"][11]
    assert t == imu["time_ns"] == stamp(m.header, ros)
    assert m.orientation_covariance[0] == -1
    assert m.angular_velocity.z == imu["angular_velocity_z"]
    assert m.linear_acceleration.x == imu["linear_acceleration_x"]
    # GNSS: degrees, NaN-free altitude, status from fix mode 4 → 0 (fix)
    fix = lake_rows(lake, "normalized", "gnss", drive).slice(3, 1).to_pylist()[0]
    t, m = got["/sensor/gps/fix"][3]
    assert (m.latitude, m.longitude, m.altitude) == (fix["lat_deg"], fix["lon_deg"], fix["alt_m"])
    assert m.status.status == 0 and m.position_covariance_type == 0 and t == fix["time_ns"]
    # /tf_static: every rig frame in one message, latched at the drive's start
    ((_, tf_static),) = got["/tf_static"]
    pairs = {(x.header.frame_id, x.child_frame_id) for x in tf_static.transforms}
    assert ("base_link", "lidar_top") in pairs and ("front_camera", "front_camera_optical") in pairs
    # /tf: map → base_link at each pose
    pose = lake_rows(lake, "calibrated", "poses", drive).slice(100, 1).to_pylist()[0]
    t, m = got["/tf"][100]
    (tr,) = m.transforms
    assert t == pose["time_ns"] and (tr.header.frame_id, tr.child_frame_id) == ("map", "base_link")
    assert tr.transform.translation.x == pose["x_m"] and tr.transform.rotation.w == pose["qw"]
    # camera: decoded H.264 → rgb8 with step = 3 x width, in the optical frame
    t, m = got["/sensor/camera_front/image_raw"][0]
    assert (m.width, m.height, m.encoding, m.step) == (320, 240, "rgb8", 960)
    assert m.header.frame_id == "front_camera_optical" and len(m.data) == 960 * 240
    sky = np.asarray(m.data).reshape(240, 320, 3)[5, 5]
    assert np.abs(sky.astype(int) - [150, 180, 220]).max() < 40  # the synthetic sky colour


def cloud_points(m) -> dict[str, np.ndarray]:
    """Decode a PointCloud2 with numpy from its own field list (what PCL does)."""
    kinds = {7: "<f4", 4: "<u2", 2: "u1", 8: "<f8"}
    dtype = np.dtype(
        {
            "names": [f.name for f in m.fields],
            "formats": [kinds[f.datatype] for f in m.fields],
            "offsets": [f.offset for f in m.fields],
            "itemsize": m.point_step,
        }
    )
    return np.frombuffer(bytes(m.data), dtype)


@pytest.mark.parametrize(("fmt", "enc"), CASES)
def test_point_clouds_equal_the_lake_points_bit_for_bit(synthetic_lake, exports, fmt, enc):
    for source, topic in (("adtf", "/sensor/lidar/points"), ("nclt", "/velodyne_points")):
        lake, drive = synthetic_lake.lake, synthetic_lake.drives[source].drive_id
        _, got = exports[(source, fmt, enc)]
        scans = lake_rows(lake, "normalized", "lidar_scans", drive)
        if source == "nclt":
            scans = scans.filter(pc.equal(scans.column("stream"), "velodyne_hits"))
        assert len(got[topic]) == scans.num_rows
        k = scans.num_rows // 2
        scan = scans.slice(k, 1).to_pylist()[0]
        t, m = got[topic][k]
        assert t == scan["time_ns"] and m.height == 1 and m.width == scan["point_count"]
        assert [f.name for f in m.fields] == ["x", "y", "z", "intensity", "ring", "time"]
        assert [f.offset for f in m.fields] == [0, 4, 8, 12, 16, 18] and m.point_step == 22
        assert m.row_step == m.width * 22 and m.is_dense and m.header.frame_id == scan["frame_id"]
        pts = lake_rows(lake, "normalized", "lidar_points", drive, scan_id=scan["scan_id"])
        cloud = cloud_points(m)
        for c in "xyz":
            assert cloud[c].tobytes() == pts.column(c).to_numpy().astype("<f4").tobytes()
        assert np.array_equal(cloud["ring"], pts.column("ring").to_numpy())
        offsets = pts.column("time_offset_ns").to_numpy()
        assert np.array_equal(cloud["time"], (offsets / 1e9).astype(np.float32))
        assert cloud["time"].max() > 0.05  # a 100 ms revolution


def test_nclt_topics_content(synthetic_lake, exports):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["nclt"].drive_id
    _, got = exports[("nclt", "mcap", "ros2")]
    assert {
        "/imu/data", "/gps/fix", "/gps_rtk/fix", "/velodyne_points", "/odom", "/ground_truth",
        "/hokuyo_30m", "/hokuyo_4m", "/tf", "/tf_static", "/lb3_cam5/image_raw",
    } <= set(got)  # fmt: skip
    # IMU: one message per MS25 row, with the ms25_euler orientation of its row
    ms25 = lake_rows(lake, "normalized", "imu", drive, stream="ms25")
    assert len(got["/imu/data"]) == ms25.num_rows
    t, m = got["/imu/data"][20]
    assert t == ms25.column("time_ns")[20].as_py()
    q = [ms25.column(f"orientation_{a}")[20].as_py() for a in "xyzw"]
    assert None not in q
    assert [m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w] == q
    assert m.orientation_covariance[0] == 0.0
    # ground truth as Odometry, quaternion of R = Rz Ry Rx
    gt = lake_rows(lake, "normalized", "ground_truth", drive, stream="groundtruth").slice(5, 1)
    row = gt.to_pylist()[0]
    t, m = got["/ground_truth"][5]
    assert t == row["time_ns"] and m.header.frame_id == "world_ned" and m.child_frame_id == "body"
    q = rpy_to_quaternion(row["roll_rad"], row["pitch_rad"], row["yaw_rad"])
    o = m.pose.pose.orientation
    np.testing.assert_allclose([o.x, o.y, o.z, o.w], q, atol=1e-15)
    assert m.pose.pose.position.x == row["x_m"]
    # LaserScan: no return (NaN in the lake) is +inf (REP-117)
    scan = lake_rows(lake, "normalized", "laser_scans", drive, stream="hokuyo_30m").slice(9, 1)
    row = scan.to_pylist()[0]
    t, m = got["/hokuyo_30m"][9]
    r = np.asarray(row["ranges_m"], np.float32)
    assert len(m.ranges) == len(r) == 1081
    assert np.array_equal(np.where(np.isnan(r), np.inf, r), np.asarray(m.ranges))
    assert math.isclose(
        m.angle_max, row["angle_min_rad"] + 1080 * row["angle_increment_rad"], rel_tol=1e-6
    )
    # RTK fix with its error as an approximated covariance
    rtk = lake_rows(lake, "normalized", "gnss", drive, stream="gps_rtk").slice(2, 1).to_pylist()[0]
    _, m = got["/gps_rtk/fix"][2]
    assert m.position_covariance_type == 1
    assert m.position_covariance[0] == pytest.approx(rtk["error_m"] ** 2)
    # images: TIFF decoded to rgb8, in the camera's optical frame
    _, m = got["/lb3_cam5/image_raw"][0]
    assert m.encoding == "rgb8" and m.header.frame_id == "lb3_cam5_optical"
    assert m.step == 3 * m.width and len(m.data) == m.step * m.height


def test_mcap_summary_metadata_and_attachment(synthetic_lake, exports, tmp_path):
    result, _ = exports[("nclt", "mcap", "ros2")]
    with result.path.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()], validate_crcs=True)
        summary = reader.get_summary()
        assert summary.statistics.message_count == result.messages
        assert summary.chunk_indexes and all(c.message_index_length for c in summary.chunk_indexes)
        meta = {m.name: m.metadata for m in reader.iter_metadata()}
        assert meta["drive"]["vehicle"] == "nclt-segway" and meta["drive"]["source"] == "nclt"
        (att,) = list(reader.iter_attachments())
        assert att.name == "nclt-segway.yaml" and b"x_body_vel" in att.data
        tf_static = next(c for c in summary.channels.values() if c.topic == "/tf_static")
        assert "durability: 1" in tf_static.metadata["offered_qos_profiles"]  # transient local
        # decoded by mcap_ros2, seeking by time through the indexes
        t0 = summary.statistics.message_start_time
        some = list(
            reader.iter_decoded_messages(
                topics=["/gps/fix"], starting_at=t0 + 5 * NS, ending_before=t0 + 6 * NS
            )
        )
        assert some and all(t0 + 5 * NS <= m.log_time < t0 + 6 * NS for _, _, m, _ in some)


def test_trim_by_topic_and_window_gives_exactly_those_rows(synthetic_lake, tmp_path):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    first = pc.min(lake_rows(lake, "normalized", "streams", drive).column("first_time_ns")).as_py()
    out = tmp_path / "trim.mcap"
    result = export_drive(
        lake, drive, out,
        ExportRequest(topics=["/sensor/imu/*", "/vehicle/can_?", "/tf"], start=2.5, end=4.0),
    )  # fmt: skip
    got = read_back(out, "ros2")
    assert set(got) == {"/sensor/imu/data", "/vehicle/can_0", "/vehicle/can_1", "/tf", "/tf_static"}
    a, b = first + int(2.5 * NS), first + 4 * NS
    imu = lake_rows(lake, "normalized", "imu", drive).column("time_ns").to_numpy()
    assert [t for t, _ in got["/sensor/imu/data"]] == imu[(imu >= a) & (imu < b)].tolist()
    can = lake_rows(lake, "normalized", "can_frames", drive, channel=0).column("time_ns").to_numpy()
    assert [t for t, _ in got["/vehicle/can_0"]] == can[(can >= a) & (can < b)].tolist()
    poses = lake_rows(lake, "calibrated", "poses", drive).column("time_ns").to_numpy()
    tf_times = [t for t, _ in got["/tf"]]
    assert tf_times[0] == poses[poses < a].max()  # the latest /tf before the window comes along
    assert tf_times[1:] == poses[(poses >= a) & (poses < b)].tolist()
    assert got["/tf_static"][0][0] == a and result.windows[0].start_ns == a


def test_time_base_zero_shifts_every_topic_equally(synthetic_lake, tmp_path):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    plain = read_back(
        export_drive(lake, drive, tmp_path / "a.mcap", ExportRequest(start=1, end=2)).path, "ros2"
    )
    zero = read_back(
        export_drive(
            lake, drive, tmp_path / "b.mcap", ExportRequest(start=1, end=2, time_base="zero")
        ).path,
        "ros2",
    )
    shifts = set()
    for topic, msgs in plain.items():
        for (t1, m1), (t2, m2) in zip(msgs, zero[topic], strict=True):
            shifts.add(t1 - t2)
            h1 = getattr(m1, "header", None) or m1.transforms[0].header
            h2 = getattr(m2, "header", None) or m2.transforms[0].header
            shifts.add(stamp(h1, 2) - stamp(h2, 2))
    assert len(shifts) == 1 and min(t for t, _ in zero["/tf"]) == 0


def test_bad_input_is_a_typed_error_without_partial_output(synthetic_lake, tmp_path):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    with pytest.raises(ExportError, match=r"drive 'nope' is not in the lake .*adtf-test"):
        export_drive(lake, "nope", tmp_path / "x.mcap")
    with pytest.raises(TrimError, match="selects nothing"):
        export_drive(lake, drive, tmp_path / "x.mcap", ExportRequest(start=999, end=1000))
    with pytest.raises(TrimError, match=r"no topic matches '/nope'; topics: /tf_static"):
        export_drive(lake, drive, tmp_path / "x.mcap", ExportRequest(topics=["/nope"]))
    bad = tmp_path / "bad.yaml"
    bad.write_text("topics:\n  - {topic: /imu, type: sensor_msgs/msg/Imux, table: imu}\n")
    with pytest.raises(MappingError, match=r"bad\.yaml: topics\[0\]\.type: unknown message type"):
        export_drive(lake, drive, tmp_path / "x.mcap", ExportRequest(mapping=bad))
    bad.write_text("topics:\n  - {topic: /imu, type: sensor_msgs/msg/Imu, tabel: imu}\n")
    with pytest.raises(MappingError, match=r"topics\[0\]\.tabel: unknown key"):
        export_drive(lake, drive, tmp_path / "x.mcap", ExportRequest(mapping=bad))
    existing = tmp_path / "there.mcap"
    existing.write_bytes(b"keep")
    with pytest.raises(ExportError, match="exists; pass --force"):
        export_drive(lake, drive, existing)
    assert existing.read_bytes() == b"keep"
    with pytest.raises(ExportError, match="does not exist"):
        export_drive(lake, drive, tmp_path / "no" / "x.mcap")
    assert not list(tmp_path.glob(".*partial")) and not (tmp_path / "x.mcap").exists()


def test_missing_column_and_a_full_disk_leave_nothing_behind(synthetic_lake, tmp_path, monkeypatch):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    # a lake whose imu table lacks a column the Imu mapping needs
    copy = Lake(str(tmp_path / "lake"))
    for layer, table in [("raw", "drives"), ("normalized", "streams"), ("normalized", "imu")]:
        t = lake.read_partition(layer, table, drive)
        if table == "imu":
            t = t.drop_columns(["angular_velocity_z"])
        copy.write_partition(layer, table, drive, t)
    only_imu = tmp_path / "imu.yaml"
    only_imu.write_text("topics:\n  - {topic: /imu, type: sensor_msgs/msg/Imu, table: imu}\n")
    with pytest.raises(ExportError, match=r"no column\(s\) \['angular_velocity_z'\]"):
        export_drive(copy, drive, tmp_path / "x.mcap", ExportRequest(mapping=only_imu))
    # a write that fails half way (ENOSPC from the file system)
    import bridge_lake.export.mcap_writer as mw

    real = mw.McapWriter._write
    calls = {"n": 0}

    def full(self, data):
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(mw.McapWriter, "_write", full)
    with pytest.raises(ExportError, match="No space left on device"):
        export_drive(lake, drive, tmp_path / "full.mcap")
    assert list(tmp_path.glob("*full*")) == [] and list(tmp_path.glob(".*")) == []


def test_protobuf_mcap_for_foxglove(synthetic_lake, tmp_path):
    """MCAP with Foxglove protobuf schemas, decoded by mcap_protobuf."""
    from mcap_protobuf.decoder import DecoderFactory as ProtobufDecoders

    from bridge_lake.export.health import check_file

    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "fox.mcap"
    result = export_drive(lake, drive, out, ExportRequest(encoding="protobuf"))
    got: dict[str, list] = {}
    with out.open("rb") as f:
        reader = make_reader(f, decoder_factories=[ProtobufDecoders()], validate_crcs=True)
        assert reader.get_header().profile == ""
        names = {s.name for s in reader.get_summary().schemas.values()}
        assert {
            "foxglove.PointCloud", "foxglove.RawImage", "foxglove.LocationFix",
            "foxglove.FrameTransforms", "bridge_lake.Imu", "bridge_lake.CanFrame",
        } <= names  # fmt: skip
        for _, channel, message, decoded in reader.iter_decoded_messages():
            got.setdefault(channel.topic, []).append((message.log_time, decoded))
    assert {t: len(v) for t, v in got.items()} == {t: s.expected for t, s in result.topics.items()}
    scans = lake_rows(lake, "normalized", "lidar_scans", drive)
    t, cloud = got["/sensor/lidar/points"][3]
    scan = scans.slice(3, 1).to_pylist()[0]
    assert t == scan["time_ns"] == cloud.timestamp.seconds * NS + cloud.timestamp.nanos
    assert cloud.point_stride == 22 and len(cloud.data) == 22 * scan["point_count"]
    pts = lake_rows(lake, "normalized", "lidar_points", drive, scan_id=scan["scan_id"])
    x = np.frombuffer(cloud.data, np.dtype({"names": ["x"], "formats": ["<f4"], "offsets": [0],
                                            "itemsize": 22}))["x"]  # fmt: skip
    assert x.tobytes() == pts.column("x").to_numpy().tobytes()
    _, fix = got["/sensor/gps/fix"][0]
    row = lake_rows(lake, "normalized", "gnss", drive).slice(0, 1).to_pylist()[0]
    assert (fix.latitude, fix.longitude) == (row["lat_deg"], row["lon_deg"])
    _, imu = got["/sensor/imu/data"][0]
    assert not imu.HasField("orientation") and imu.orientation_covariance[0] == -1
    _, tf = got["/tf_static"][0]
    assert ("base_link", "lidar_top") in {
        (x.parent_frame_id, x.child_frame_id) for x in tf.transforms
    }
    health = check_file(out, expected_counts={t: s.expected for t, s in result.topics.items()})
    assert health.ok, [t.problems for t in health.topics.values() if t.problems]


def test_export_from_a_lake_on_s3(synthetic_lake, tmp_path, s3_options, s3_bucket):
    """The same export from a copy of the lake on a local S3 API (moto)."""
    from bridge_lake.export.health import check_file

    src, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    s3 = Lake(f"s3://{s3_bucket}/lake", s3_options)
    tables = [("raw", "drives"), ("normalized", "streams"), ("normalized", "imu"),
              ("normalized", "lidar_scans"), ("normalized", "lidar_points"),
              ("calibrated", "tf_static"), ("calibrated", "poses")]  # fmt: skip
    for layer, table in tables:
        s3.write_partition(layer, table, drive, src.read_partition(layer, table, drive))
    request = ExportRequest(topics=["/sensor/imu/data", "/sensor/lidar/points", "/tf"])
    local = export_drive(src, drive, tmp_path / "local.mcap", request)
    remote = export_drive(s3, drive, tmp_path / "remote.mcap", request)
    assert (tmp_path / "local.mcap").read_bytes() == (tmp_path / "remote.mcap").read_bytes()
    assert (
        remote.topics["/sensor/lidar/points"].messages
        == local.topics["/sensor/lidar/points"].messages
        > 0
    )
    assert check_file(tmp_path / "remote.mcap").ok


def test_a_ros2_bag_export_holds_its_own_name_and_the_same_bytes_twice(synthetic_lake, tmp_path):
    """rosbags names a bag's storage file and metadata after its folder: the export is
    written under its final name, so no temp name lands in the bag and exports repeat."""
    drive = synthetic_lake.drives["adtf"].drive_id
    digests = []
    for folder in (tmp_path / "a", tmp_path / "b"):
        folder.mkdir()
        out = folder / "drive_bag"
        export_drive(synthetic_lake.lake, drive, out, ExportRequest(format="bag2"))
        names = sorted(p.name for p in out.iterdir())
        assert names == ["drive_bag.mcap", "metadata.yaml"]
        assert "partial" not in (out / "metadata.yaml").read_text()
        assert [p.name for p in folder.iterdir()] == ["drive_bag"]  # no staging left behind
        digests.append([hashlib.sha256((out / n).read_bytes()).hexdigest() for n in names])
    assert digests[0] == digests[1]

"""H.264 kept as foxglove CompressedVideo in exports, read back as Foxglove reads it: the
`mcap` reader with mcap_ros2 / mcap_protobuf, the frames byte for byte the lake's, and the
stream decoded by FFmpeg (PyAV) from its first message, trimmed exports included."""

from __future__ import annotations

from pathlib import Path

import av
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory as ProtobufDecoders
from mcap_ros2.decoder import DecoderFactory as Ros2Decoders

from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.health import check_file
from bridge_lake.export.mapping import MappingError, load_mapping, parse_mapping
from bridge_lake.lake import Lake

VIDEO = "/sensor/camera_front/h264"
IMAGE = "/sensor/camera_front/image_raw"


def frames(lake: Lake, drive: str) -> pa.Table:
    return lake.read_partition("normalized", "camera_frames", drive)


def read_video(path: Path, protobuf: bool = False) -> tuple[str, list[tuple[int, object]]]:
    """(schema name, [(log time, decoded message)]) of the video topic, as Foxglove's
    readers decode it."""
    factory = ProtobufDecoders() if protobuf else Ros2Decoders()
    with path.open("rb") as f:
        reader = make_reader(f, decoder_factories=[factory], validate_crcs=True)
        out = [
            (schema.name, message.log_time, decoded)
            for schema, _, message, decoded in reader.iter_decoded_messages(topics=[VIDEO])
        ]
    assert out, f"no {VIDEO} in {path}"
    return out[0][0], [(t, m) for _, t, m in out]


def pictures(data: list[bytes]) -> int:
    """How many of the access units FFmpeg decodes to a picture, fed in order from the first
    (no threading: one packet in, its picture out); FFmpeg's errors fail the test."""
    ctx = av.CodecContext.create("h264", "r")
    got = 0
    for i, au in enumerate(data):
        out = ctx.decode(av.Packet(au))
        assert out, f"access unit {i} gave no picture"
        got += len(out)
    return got


def test_mcap_keeps_the_h264_byte_for_byte_and_it_decodes_from_the_first_message(
    synthetic_lake, tmp_path
):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "drive.mcap"
    result = export_drive(lake, drive, out)  # the default: MCAP, ROS 2 messages
    lake_frames = frames(lake, drive)
    name, got = read_video(out)
    assert name == "foxglove_msgs/msg/CompressedVideo"
    assert IMAGE not in result.topics  # not decoded a second time
    assert len(got) == lake_frames.num_rows == result.topics[VIDEO].messages
    assert [t for t, _ in got] == lake_frames.column("time_ns").to_pylist()
    assert [bytes(m.data) for _, m in got] == lake_frames.column("data").to_pylist()
    t, m = got[0]
    assert (m.format, m.frame_id) == ("h264", "front_camera_optical")
    assert m.timestamp.sec * 1_000_000_000 + m.timestamp.nanosec == t
    assert pictures([bytes(m.data) for _, m in got]) == len(got)
    assert not result.warnings


def test_protobuf_mcap_keeps_the_h264_as_foxglove_compressed_video(synthetic_lake, tmp_path):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "fox.mcap"
    export_drive(lake, drive, out, ExportRequest(encoding="protobuf", topics=[VIDEO]))
    name, got = read_video(out, protobuf=True)
    lake_frames = frames(lake, drive)
    assert name == "foxglove.CompressedVideo"
    assert [bytes(m.data) for _, m in got] == lake_frames.column("data").to_pylist()
    assert [t for t, _ in got] == lake_frames.column("time_ns").to_pylist()
    assert {(m.format, m.frame_id) for _, m in got} == {("h264", "front_camera_optical")}
    assert pictures([bytes(m.data) for _, m in got]) == len(got)


def test_a_window_that_starts_mid_gop_starts_the_video_at_the_key_frame_before(
    synthetic_lake, tmp_path
):
    """The window starts inside a group of pictures: the video topic starts at the key frame
    before it (counted in the expected messages), every other topic at the window."""
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    lake_frames = frames(lake, drive)
    times = lake_frames.column("time_ns").to_pylist()
    keys = [i for i, k in enumerate(lake_frames.column("is_keyframe").to_pylist()) if k]
    assert len(keys) >= 3 and keys[1] > keys[0] + 2  # the synthetic GOP: 30 frames
    first, last = keys[1] + 7, keys[2] + 5  # mid-GOP, and past the next key frame
    start, end = times[first], times[last]
    out = tmp_path / "window.mcap"
    result = export_drive(lake, drive, out, ExportRequest(start=start, end=end))
    _, got = read_video(out)
    assert [t for t, _ in got] == times[keys[1] : last]
    assert [bytes(m.data) for _, m in got] == lake_frames.column("data").to_pylist()[keys[1] : last]
    assert pictures([bytes(m.data) for _, m in got]) == len(got)
    stat = result.topics[VIDEO]
    assert stat.messages == stat.expected == last - keys[1] and stat.first_ns == times[keys[1]]
    imu = lake.read_partition("normalized", "imu", drive).column("time_ns").to_numpy()
    inside = imu[(imu >= start) & (imu < end)]
    assert result.topics["/sensor/imu/data"].first_ns == inside[0]
    assert result.topics["/sensor/imu/data"].messages == len(inside)
    health = check_file(out, expected_counts={t: s.expected for t, s in result.topics.items()})
    assert health.ok, [p.message for t in health.topics.values() for p in t.problems]


def test_overlapping_windows_widened_to_their_key_frames_are_merged(synthetic_lake, tmp_path):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    lake_frames = frames(lake, drive)
    times = lake_frames.column("time_ns").to_pylist()
    keys = [i for i, k in enumerate(lake_frames.column("is_keyframe").to_pylist()) if k]
    # two scenes in one GOP: both widen back to the same key frame
    spans = [(times[keys[1] + 3], times[keys[1] + 6]), (times[keys[1] + 10], times[keys[1] + 12])]
    out = tmp_path / "two.mcap"
    result = export_drive(lake, drive, out, ExportRequest(spans=spans, topics=[VIDEO]))
    _, got = read_video(out)
    assert [t for t, _ in got] == times[keys[1] : keys[1] + 12]  # once each, none twice
    assert result.topics[VIDEO].expected == 12


def test_ros1_outputs_get_decoded_images_as_the_mapping_says(synthetic_lake, tmp_path):
    """ROS 1 readers have sensor_msgs but no foxglove_msgs: the shipped mapping decodes the
    camera for ROS 1 encodings (the MCAP here; bag1 in test_export)."""
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "ros1.mcap"
    result = export_drive(lake, drive, out, ExportRequest(encoding="ros1", topics=["/sensor/*"]))
    assert result.topics[IMAGE].type == "sensor_msgs/msg/Image" and VIDEO not in result.topics
    assert result.topics[IMAGE].messages == frames(lake, drive).num_rows


def test_a_mapping_that_asks_for_images_gets_them_in_ros2_too(synthetic_lake, tmp_path):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    mapping = tmp_path / "decoded.yaml"
    mapping.write_text(
        "topics:\n"
        "  - {topic: /cam, type: sensor_msgs/msg/Image, table: camera_frames}\n"
    )  # fmt: skip
    out = tmp_path / "decoded.mcap"
    result = export_drive(lake, drive, out, ExportRequest(mapping=mapping))
    assert result.topics["/cam"].type == "sensor_msgs/msg/Image"
    with out.open("rb") as f:
        reader = make_reader(f, decoder_factories=[Ros2Decoders()], validate_crcs=True)
        decoded = [m for _, _, _, m in reader.iter_decoded_messages(topics=["/cam"])]
    assert len(decoded) == frames(lake, drive).num_rows
    assert (decoded[0].encoding, decoded[0].width, decoded[0].height) == ("rgb8", 320, 240)


def _strip_parameter_sets(au: bytes) -> bytes:
    """The access unit without its SPS and PPS NAL units (an encoder that writes them once)."""
    parts = au.split(b"\x00\x00\x01")
    kept = [p for p in parts[1:] if p and p[0] & 0x1F not in (7, 8)]
    return b"".join(b"\x00\x00\x01" + p for p in kept)


def _lake_with_camera(src: Lake, drive: str, root: Path, camera: pa.Table) -> Lake:
    copy = Lake(str(root))
    for layer, table in [("raw", "drives"), ("normalized", "streams")]:
        copy.write_partition(layer, table, drive, src.read_partition(layer, table, drive))
    copy.write_partition("normalized", "camera_frames", drive, camera)
    return copy


def test_a_stream_a_player_cannot_start_is_said(synthetic_lake, tmp_path):
    """Key frames without SPS/PPS in band, or a stream that starts inside a GOP: exported as
    recorded (nothing dropped), with a warning naming the topic."""
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["adtf"].drive_id
    camera = frames(lake, drive)
    stripped = camera.set_column(
        camera.schema.get_field_index("data"),
        camera.schema.field("data"),
        pa.array(
            [_strip_parameter_sets(d) for d in camera.column("data").to_pylist()], pa.binary()
        ),
    )
    copy = _lake_with_camera(lake, drive, tmp_path / "no_sps", stripped)
    result = export_drive(copy, drive, tmp_path / "a.mcap", ExportRequest(topics=[VIDEO]))
    assert result.topics[VIDEO].messages == camera.num_rows
    assert [w for w in result.warnings if "no SPS/PPS in band" in w and VIDEO in w]
    late = camera.slice(5)  # the lake's stream starts 5 frames into a GOP
    copy = _lake_with_camera(lake, drive, tmp_path / "late", late)
    result = export_drive(copy, drive, tmp_path / "b.mcap", ExportRequest(topics=[VIDEO]))
    assert result.topics[VIDEO].messages == late.num_rows
    assert [w for w in result.warnings if "not a key frame" in w and VIDEO in w]
    assert not pc.any(late.column("is_keyframe").slice(0, 1)).as_py()


def test_shipped_mapping_states_one_camera_form_per_encoding():
    from bridge_lake.export.mapping import default_mapping_path

    m = load_mapping(default_mapping_path("adtf"))
    assert [r.topic for r in m.for_encoding("ros2").topics if "camera" in r.topic] == [VIDEO]
    assert [r.topic for r in m.for_encoding("protobuf").topics if "camera" in r.topic] == [VIDEO]
    assert [r.topic for r in m.for_encoding("ros1").topics if "camera" in r.topic] == [IMAGE]


@pytest.mark.parametrize(
    ("encodings", "match"),
    [
        ("[ros3]", r"topics\[0\]\.encodings: unknown encoding 'ros3'"),
        ("[]", r"topics\[0\]\.encodings: expected a non-empty list"),
        ("ros1", r"topics\[0\]\.encodings: expected a non-empty list"),
    ],
)
def test_bad_encodings_name_the_key(encodings, match):
    doc = (
        "topics:\n"
        f"  - {{topic: /imu, type: sensor_msgs/msg/Imu, table: imu, encodings: {encodings}}}\n"
    )
    import yaml

    with pytest.raises(MappingError, match=match):
        parse_mapping(yaml.safe_load(doc), "m.yaml")


def test_a_topic_may_be_named_twice_for_disjoint_encodings_only():
    import yaml

    def rules(a: str, b: str):
        return yaml.safe_load(
            "topics:\n"
            f"  - {{topic: /cam, type: sensor_msgs/msg/Image, table: camera_frames{a}}}\n"
            "  - {topic: /cam, type: foxglove_msgs/msg/CompressedVideo, "
            f"table: camera_frames{b}}}\n"
        )

    m = parse_mapping(rules(", encodings: [ros1]", ", encodings: [ros2, protobuf]"), "m.yaml")
    assert [r.type for r in m.for_encoding("ros1").topics] == ["sensor_msgs/msg/Image"]
    with pytest.raises(MappingError, match=r"topics\[1\]\.topic: /cam is mapped twice for ros2"):
        parse_mapping(rules("", ", encodings: [ros2]"), "m.yaml")
    with pytest.raises(MappingError, match=r"topics\[1\]\.topic: /cam is mapped twice$"):
        parse_mapping(rules("", ""), "m.yaml")

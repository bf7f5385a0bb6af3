"""Protobuf serializers: written into an MCAP file with the mcap library's own Writer, read back
with mcap_protobuf's decoder (which builds the classes from our FileDescriptorSets alone), and
checked field by field against the inputs: stamps to the ns, floats bit for bit, point clouds
decoded with numpy from the messages' own fields / point_stride.

Every decoded message, serialized again by protobuf (upb), must also give back exactly our
bytes: the encoding is protobuf's canonical one, not merely parseable.
"""

from __future__ import annotations

import inspect
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from mcap.reader import make_reader
from mcap.writer import Writer
from mcap_protobuf.decoder import DecoderFactory

from bridge_lake.export import messages as m
from bridge_lake.export import protobuf as pb
from bridge_lake.export.messages.pointcloud import PointField, PointLayout
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.protobuf.proto_text import ProtoSyntaxError, parse
from bridge_lake.export.protobuf.schemas import FILE_NAME, own_file

NS = 1_000_000_000
STAMPS = np.array(
    [1_700_000_000_123_456_789, 0, -1_500_000_001, 1_700_000_000 * NS, 2**62], np.int64
)
N = STAMPS.size
RNG = np.random.default_rng(20240611)
PROTO = Path(pb.__file__).with_name("bridge_lake.proto")
KINDS = list(m.TYPENAMES)


def bits(values) -> list[int]:
    """float64 values as their bit patterns (NaN payloads and -0.0 compare exactly)."""
    return np.asarray(values, np.float64).view(np.uint64).tolist()


def ns(timestamp) -> int:
    return timestamp.seconds * NS + timestamp.nanos


def binary(chunks: list[bytes]) -> pa.Array:
    return pa.array(chunks, pa.binary())


# -- inputs ------------------------------------------------------------------------------------

ORIENTATION = RNG.standard_normal((N, 4))
ORIENTATION[1, 2] = np.nan  # no estimate for message 1
ORIENTATION[3] = [-0.0, 0.0, 0.0, 1.0]
COUNTS = np.array([3, 0, 1000, 1, 7])
TOTAL = int(COUNTS.sum())
CLOUD = {k: RNG.standard_normal(TOTAL).astype(np.float32) for k in ("x", "y", "z", "intensity")}
CLOUD["x"][5] = np.nan
CLOUD["ring"] = RNG.integers(0, 32, TOTAL).astype(np.uint16)
CLOUD["time"] = RNG.random(TOTAL).astype(np.float32)
RGB_LAYOUT = PointLayout((PointField("x", 0, np.float32), PointField("rgb", 8, np.uint8, 3)), 12)
RGB = {"x": CLOUD["x"], "rgb": RNG.integers(0, 256, (TOTAL, 3)).astype(np.uint8)}
PIXELS = [RNG.integers(0, 256, 4 * h, dtype=np.uint8).tobytes() for h in (2, 0, 5, 1, 3)]
JPEGS = [b"\xff\xd8" + bytes(RNG.integers(0, 256, s, dtype=np.uint8)) for s in (0, 9, 300, 1, 5)]
CAN_DATA = RNG.integers(0, 256, (N, 8), dtype=np.uint8)

INPUTS = {
    "imu": dict(
        frame_id="imu_link",
        orientation=ORIENTATION,
        orientation_covariance=RNG.standard_normal((N, 9)),
        angular_velocity=RNG.standard_normal((N, 3)),
        angular_velocity_covariance=RNG.standard_normal(9),
        linear_acceleration=RNG.standard_normal((N, 3)),
    ),
    "nav_sat_fix": dict(
        frame_id="gps",
        latitude_deg=RNG.uniform(-90, 90, N),
        longitude_deg=np.array([0.0, -0.0, 179.5, -180.0, 11.25]),
        altitude_m=np.array([np.nan, 12.5, np.nan, 0.0, -3.0]),
        status=np.array([-1, 0, 1, 2, 0]),
        service=np.array([1, 2, 4, 8, 15]),
        position_covariance=RNG.random((N, 9)),
        position_covariance_type=np.array([0, 1, 2, 3, 0], np.uint8),
    ),
    "can_frame": dict(
        frame_id="can0",
        can_id=np.array([0x123, 0, 0x1ABCDEF, 0x7FF, 0x10]),
        is_rtr=np.array([False, False, False, True, False]),
        is_extended=np.array([False, False, True, False, False]),
        is_error=False,
        dlc=np.array([8, 0, 3, 4, 15]),
        data=CAN_DATA,
    ),
    "point_cloud2": dict(frame_id="velodyne", counts=COUNTS, columns=CLOUD),
    "laser_scan": dict(
        frame_id="laser",
        angle_min=np.float32(-2.35),
        angle_max=np.float32(9.0),  # disagrees with the increment: must not matter
        angle_increment=np.array([0.01, 0.02, 0.0043, 0.5, -0.1], np.float32),
        time_increment=1.7e-5,
        scan_time=0.025,
        range_min=0.1,
        range_max=30.0,
        counts=COUNTS,
        ranges=RNG.random(TOTAL).astype(np.float32) * 30,
        intensities=RNG.random(TOTAL).astype(np.float32),
    ),
    "image": dict(
        frame_id="camera",
        height=np.array([2, 0, 5, 1, 3]),
        width=2,
        encoding="mono16",
        step=4,
        data=binary(PIXELS),
    ),
    "compressed_image": dict(frame_id="camera", format="jpeg", data=binary(JPEGS)),
    "compressed_video": dict(frame_id="camera", format="h264", data=binary(JPEGS)),
    "odometry": dict(
        frame_id="odom",
        child_frame_id="base_link",
        position=RNG.standard_normal((N, 3)),
        orientation=RNG.standard_normal((N, 4)),
        pose_covariance=RNG.standard_normal((N, 36)),
        linear_velocity=RNG.standard_normal((N, 3)),
    ),
    "adtf_sample": dict(
        frame_id="in1",
        stream="in1",
        meta_type=["adtf/anonymous", "", "adtf/anonymous", "x/y", "adtf/anonymous"],
        data=binary(JPEGS),
    ),
    "tf_message": dict(
        parent_frame_ids=["map", "odom"],
        child_frame_ids=["odom", "base_link"],
        translation=RNG.standard_normal((2 * N, 3)),
        rotation=RNG.standard_normal((2 * N, 4)),
        transforms_per_message=2,
    ),
}
TF_STAMPS = np.sort(RNG.integers(0, 2**40, 2 * N))  # one stamp per transform
UNKNOWN_ROWS = [1, 3]
"""Rows whose covariance the ROS formats write as "not estimated" (1e6 on the diagonal)."""
EXTRA = {  # second topics for the other branches: no orientation, /tf_static, a padded layout
    "imu_none": ("imu", dict(INPUTS["imu"], orientation=None)),
    "tf_static": (
        "tf_message",
        dict(
            parent_frame_ids=["base_link"] * 3,
            child_frame_ids=["lidar", "camera", "imu_link"],
            translation=RNG.standard_normal((3, 3)),
            rotation=RNG.standard_normal((3, 4)),
            transforms_per_message=3,
        ),
    ),
    "rgb_cloud": (
        "point_cloud2",
        dict(frame_id="lidar", counts=COUNTS, columns=RGB, fields=RGB_LAYOUT),
    ),
    "odometry_unknown": (
        "odometry",
        dict(
            INPUTS["odometry"],
            pose_covariance=np.where(
                np.isin(np.arange(N), UNKNOWN_ROWS)[:, None],
                np.diag([1e6] * 6).ravel(),
                INPUTS["odometry"]["pose_covariance"],
            ),
            twist_covariance=np.diag([1e6] * 6).ravel(),
        ),
    ),
}


def stamps_for(topic: str) -> np.ndarray:
    return {"tf_message": TF_STAMPS, "tf_static": STAMPS[:1]}.get(topic, STAMPS)


def encode(topic: str) -> tuple[str, Serialized]:
    kind, kwargs = EXTRA.get(topic, (topic, INPUTS.get(topic)))
    extra = {} if kind in ("tf_message", "compressed_video") else {"seq_start": 7}
    return kind, getattr(pb, kind)(stamps_for(topic), **kwargs, ros=2, **extra)


TOPICS = [*KINDS, *EXTRA]


@pytest.fixture(scope="module")
def decoded(tmp_path_factory) -> dict[str, list[tuple[object, bytes]]]:
    """topic -> [(decoded message, raw bytes)], through an MCAP file and back."""
    path = tmp_path_factory.mktemp("protobuf") / "all.mcap"
    with open(path, "wb") as f:
        writer = Writer(f)
        writer.start(profile="", library="bridge_lake tests")
        for topic in TOPICS:
            kind, out = encode(topic)
            name, data = pb.schema(m.TYPENAMES[kind])
            schema_id = writer.register_schema(name=name, encoding="protobuf", data=data)
            channel_id = writer.register_channel(
                topic=topic, message_encoding="protobuf", schema_id=schema_id
            )
            for i in range(len(out)):
                writer.add_message(channel_id, i, bytes(out.message(i)), i)
        writer.finish()
    result: dict[str, list[tuple[object, bytes]]] = defaultdict(list)
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message, proto in reader.iter_decoded_messages():
            assert schema.name == pb.SCHEMA_NAMES[m.TYPENAMES[encode(channel.topic)[0]]]
            result[channel.topic].append((proto, message.data))
    return result


@pytest.mark.parametrize("topic", TOPICS)
def test_canonical_encoding(decoded, topic: str) -> None:
    _, out = encode(topic)
    assert (
        len(decoded[topic])
        == len(out)
        == len(stamps_for(topic)) // (2 if topic == "tf_message" else 1)
    )
    for proto, raw in decoded[topic]:
        assert proto.SerializeToString() == raw


def test_imu(decoded) -> None:
    inp = INPUTS["imu"]
    for topic in ("imu", "imu_none"):
        for i, (msg, _) in enumerate(decoded[topic]):
            assert ns(msg.timestamp) == STAMPS[i]
            assert msg.frame_id == "imu_link"
            q_cov = list(inp["orientation_covariance"][i])
            if topic == "imu_none" or i == 1:
                assert not msg.HasField("orientation")
                q_cov[0] = -1.0
            else:
                q = msg.orientation
                assert bits([q.x, q.y, q.z, q.w]) == bits(ORIENTATION[i])
            assert bits(msg.orientation_covariance) == bits(q_cov)
            w, a = msg.angular_velocity, msg.linear_acceleration
            assert bits([w.x, w.y, w.z]) == bits(inp["angular_velocity"][i])
            assert bits([a.x, a.y, a.z]) == bits(inp["linear_acceleration"][i])
            assert bits(msg.angular_velocity_covariance) == bits(inp["angular_velocity_covariance"])
            assert bits(msg.linear_acceleration_covariance) == bits(np.zeros(9))


def test_nav_sat_fix(decoded) -> None:
    inp = INPUTS["nav_sat_fix"]
    for i, (msg, _) in enumerate(decoded["nav_sat_fix"]):
        assert ns(msg.timestamp) == STAMPS[i]
        assert msg.frame_id == "gps"
        assert bits([msg.latitude, msg.longitude, msg.altitude]) == bits(
            [inp["latitude_deg"][i], inp["longitude_deg"][i], inp["altitude_m"][i]]
        )
        assert bits(msg.position_covariance) == bits(inp["position_covariance"][i])
        assert msg.position_covariance_type == inp["position_covariance_type"][i]
        assert [(kv.key, kv.value) for kv in msg.metadata] == [
            ("status", str(inp["status"][i])),
            ("service", str(inp["service"][i])),
        ]
    assert np.isnan(decoded["nav_sat_fix"][0][0].altitude)


def test_can_frame(decoded) -> None:
    inp = INPUTS["can_frame"]
    payloads = [CAN_DATA[0].tobytes(), b"", CAN_DATA[2, :3].tobytes(), b"", CAN_DATA[4].tobytes()]
    for i, (msg, _) in enumerate(decoded["can_frame"]):
        assert ns(msg.timestamp) == STAMPS[i]
        assert msg.frame_id == "can0"
        assert msg.id == inp["can_id"][i]
        assert msg.is_extended == inp["is_extended"][i]
        assert msg.is_rtr == inp["is_rtr"][i]
        assert msg.is_error is False
        assert msg.dlc == inp["dlc"][i]
        assert msg.data == payloads[i]


NUMERIC = {1: "u1", 2: "i1", 3: "<u2", 4: "<i2", 5: "<u4", 6: "<i4", 7: "<f4", 8: "<f8"}


def points(msg) -> np.ndarray:
    """A foxglove.PointCloud's points as a structured array built from its own fields."""
    dtype = np.dtype(
        {
            "names": [f.name for f in msg.fields],
            "formats": [NUMERIC[f.type] for f in msg.fields],
            "offsets": [f.offset for f in msg.fields],
            "itemsize": msg.point_stride,
        }
    )
    assert len(msg.data) % msg.point_stride == 0
    return np.frombuffer(msg.data, dtype)


@pytest.mark.parametrize("topic", ["point_cloud2", "rgb_cloud"])
def test_point_cloud(decoded, topic: str) -> None:
    ends = np.cumsum(COUNTS)
    for i, (msg, _) in enumerate(decoded[topic]):
        assert ns(msg.timestamp) == STAMPS[i]
        p = msg.pose
        assert (p.position.x, p.position.y, p.position.z) == (0, 0, 0)
        assert (p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w) == (0, 0, 0, 1)
        got = points(msg)
        a, b = ends[i] - COUNTS[i], ends[i]
        assert got.size == COUNTS[i]
        if topic == "point_cloud2":
            assert msg.frame_id == "velodyne" and msg.point_stride == 22
            assert [(f.name, f.offset, f.type) for f in msg.fields] == [
                ("x", 0, 7), ("y", 4, 7), ("z", 8, 7), ("intensity", 12, 7), ("ring", 16, 3),
                ("time", 18, 7),
            ]  # fmt: skip
            for name, column in CLOUD.items():
                assert got[name].tobytes() == column[a:b].tobytes(), name
        else:
            assert msg.frame_id == "lidar" and msg.point_stride == 12
            assert [(f.name, f.offset, f.type) for f in msg.fields] == [
                ("x", 0, 7), ("rgb[0]", 8, 1), ("rgb[1]", 9, 1), ("rgb[2]", 10, 1),
            ]  # fmt: skip
            assert got["x"].tobytes() == CLOUD["x"][a:b].tobytes()
            rgb = np.stack([got[f"rgb[{k}]"] for k in range(3)], -1)
            assert rgb.tobytes() == RGB["rgb"][a:b].tobytes()
            raw = np.frombuffer(msg.data, np.uint8).reshape(-1, 12)
            assert not raw[:, [4, 5, 6, 7, 11]].any()  # bytes no field covers are zero


def test_laser_scan(decoded) -> None:
    inp = INPUTS["laser_scan"]
    ends = np.cumsum(COUNTS)
    for i, (msg, _) in enumerate(decoded["laser_scan"]):
        assert ns(msg.timestamp) == STAMPS[i]
        assert msg.frame_id == "laser"
        assert msg.pose.orientation.w == 1
        start = float(np.float32(-2.35))
        increment = float(inp["angle_increment"][i])
        assert bits([msg.start_angle]) == bits([start])
        assert bits([msg.end_angle]) == bits([start + max(COUNTS[i] - 1, 0) * increment])
        a, b = ends[i] - COUNTS[i], ends[i]
        assert bits(msg.ranges) == bits(inp["ranges"][a:b].astype(np.float64))
        assert bits(msg.intensities) == bits(inp["intensities"][a:b].astype(np.float64))


@pytest.mark.parametrize("kind", ["image", "compressed_image", "compressed_video"])
def test_images(decoded, kind: str) -> None:
    inp = INPUTS[kind]
    for i, (msg, _) in enumerate(decoded[kind]):
        assert ns(msg.timestamp) == STAMPS[i]
        assert msg.frame_id == "camera"
        assert msg.data == (PIXELS if kind == "image" else JPEGS)[i]
        if kind == "image":
            assert (msg.width, msg.height, msg.step) == (2, inp["height"][i], 4)
            assert msg.encoding == "mono16"
        else:
            assert msg.format == inp["format"]


def test_odometry(decoded) -> None:
    inp = INPUTS["odometry"]
    for i, (msg, _) in enumerate(decoded["odometry"]):
        assert ns(msg.timestamp) == STAMPS[i]
        assert (msg.frame_id, msg.body_frame_id) == ("odom", "base_link")
        p, q, v = msg.pose.position, msg.pose.orientation, msg.linear_velocity
        assert bits([p.x, p.y, p.z]) == bits(inp["position"][i])
        assert bits([q.x, q.y, q.z, q.w]) == bits(inp["orientation"][i])
        assert bits([v.x, v.y, v.z]) == bits(inp["linear_velocity"][i])
        assert not msg.HasField("angular_velocity")  # not given: unset, not zeros
        assert bits(msg.pose_covariance) == bits(inp["pose_covariance"][i])
        assert bits(msg.velocity_covariance) == bits(np.zeros(36))


def test_odometry_unknown_covariance_is_zeros(decoded) -> None:
    """The ROS formats' "not estimated" (1e6 on the diagonal) is foxglove.Odometry's own
    "set to zero if unknown", row by row; known rows pass unchanged."""
    inp = INPUTS["odometry"]
    for i, (msg, _) in enumerate(decoded["odometry_unknown"]):
        pose = np.zeros(36) if i in UNKNOWN_ROWS else inp["pose_covariance"][i]
        assert bits(msg.pose_covariance) == bits(pose)
        assert bits(msg.velocity_covariance) == bits(np.zeros(36))


@pytest.mark.parametrize("topic", ["tf_message", "tf_static"])
def test_tf_message(decoded, topic: str) -> None:
    inp = INPUTS["tf_message"] if topic == "tf_message" else EXTRA["tf_static"][1]
    k = inp["transforms_per_message"]
    stamps = np.broadcast_to(
        stamps_for(topic).reshape(len(decoded[topic]), -1), (len(decoded[topic]), k)
    )
    for i, (msg, _) in enumerate(decoded[topic]):
        assert len(msg.transforms) == k
        for j, t in enumerate(msg.transforms):
            assert ns(t.timestamp) == stamps[i, j]
            assert (t.parent_frame_id, t.child_frame_id) == (
                inp["parent_frame_ids"][j],
                inp["child_frame_ids"][j],
            )
            tr, rot = t.translation, t.rotation
            assert bits([tr.x, tr.y, tr.z]) == bits(inp["translation"][i * k + j])
            assert bits([rot.x, rot.y, rot.z, rot.w]) == bits(inp["rotation"][i * k + j])


# -- API, schemas and errors ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_same_signature_as_ros_serializers(kind: str) -> None:
    assert inspect.signature(getattr(pb, kind)) == inspect.signature(getattr(m, kind))


@pytest.mark.parametrize("kind", KINDS)
def test_no_messages(kind: str) -> None:
    kwargs = dict(EXTRA["tf_static"][1] if kind == "tf_message" else INPUTS[kind])
    for key, value in kwargs.items():  # per-message columns: keep no rows
        if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == N:
            kwargs[key] = value[:0]
    zero = {
        "can_frame": {"data": np.zeros((0, 8), np.uint8)},
        "point_cloud2": {"counts": [], "columns": {k: v[:0] for k, v in CLOUD.items()}},
        "laser_scan": {"counts": [], "ranges": [], "intensities": []},
        "image": {"data": binary([])},
        "compressed_image": {"data": binary([])},
        "compressed_video": {"data": binary([])},
        "adtf_sample": {"data": binary([]), "meta_type": []},
        "tf_message": {"translation": np.zeros((0, 3)), "rotation": np.zeros((0, 4))},
    }
    kwargs.update(zero.get(kind, {}))
    out = getattr(pb, kind)(np.zeros(0, np.int64), **kwargs, ros=2)
    assert len(out) == 0 and out.data.size == 0 and out.offsets.tolist() == [0]


@pytest.mark.parametrize("typename", sorted(pb.SCHEMA_NAMES))
def test_schema_sets_are_complete(typename: str) -> None:
    name, data = pb.schema(typename)
    assert name == pb.SCHEMA_NAMES[typename]
    assert pb.schema(typename.replace("/msg/", "/")) == (name, data)  # ROS 1 spelling
    files = descriptor_pb2.FileDescriptorSet.FromString(data).file
    assert len({f.name for f in files}) == len(files)
    pool = descriptor_pool.DescriptorPool()
    for file in files:  # dependencies first, or Add raises
        pool.Add(file)
    assert pool.FindMessageTypeByName(name).full_name == name
    assert "google/protobuf/timestamp.proto" in {f.name for f in files}


SCALARS = {
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}


def parse_proto(text: str) -> dict:
    """The subset of .proto syntax bridge_lake.proto uses, read independently of schemas.py."""
    text = re.sub(r"//[^\n]*", "", text)
    messages = {}
    for name, body in re.findall(r"message\s+(\w+)\s*\{([^}]*)\}", text):
        fields = []
        for repeated, kind, field, number in re.findall(
            r"(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;", body
        ):
            fields.append(
                (
                    field,
                    int(number),
                    SCALARS.get(kind, descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE),
                    "" if kind in SCALARS else f".{kind}",
                    3 if repeated else 1,  # LABEL_REPEATED / LABEL_OPTIONAL
                )
            )
        assert len(fields) == body.count(";"), f"unparsed lines in message {name}"
        messages[name] = fields
    return {
        "syntax": re.search(r'syntax\s*=\s*"(\w+)"\s*;', text).group(1),
        "package": re.search(r"package\s+([\w.]+)\s*;", text).group(1),
        "imports": sorted(re.findall(r'import\s+"([^"]+)"\s*;', text)),
        "messages": messages,
    }


def test_committed_proto_matches_runtime_descriptors() -> None:
    text = parse_proto(PROTO.read_text())
    runtime = own_file()
    assert PROTO.name == FILE_NAME == runtime.name
    assert (text["syntax"], text["package"]) == (runtime.syntax, runtime.package)
    assert text["imports"] == sorted(runtime.dependency)
    assert text["messages"] == {
        msg.name: [(f.name, f.number, f.type, f.type_name, f.label) for f in msg.field]
        for msg in runtime.message_type
    }
    assert set(text["messages"]) == {"Imu", "CanFrame", "AdtfSample"}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('syntax = "proto3";\noption java_package = "x";\n', 2),  # options: not in the subset
        ("message A {\n  uint32 a = 1;\n  enum E { X = 0; }\n}\n", 3),
        ("message A {\n  message B {\n  }\n}\n", 2),  # nested messages
        ("uint32 a = 1;\n", 1),  # a field outside a message
        ("message A {\n  uint32 a = 1;\n}\n}\n", 4),
        ("message A {\n  map<string, bytes> m = 1;\n}\n", 2),
    ],
)
def test_proto_parser_refuses_what_it_does_not_know(text: str, line: int) -> None:
    with pytest.raises(ProtoSyntaxError, match=rf"^x\.proto:{line}: "):
        parse(text, "x.proto")
    with pytest.raises(ProtoSyntaxError, match="not closed"):
        parse("message A {\n  uint32 a = 1;\n", "x.proto")


def test_adtf_sample(decoded) -> None:
    inp = INPUTS["adtf_sample"]
    assert len(decoded["adtf_sample"]) == N
    for i, (msg, _) in enumerate(decoded["adtf_sample"]):
        assert ns(msg.timestamp) == STAMPS[i] and msg.frame_id == "in1"
        assert (msg.stream, msg.meta_type, msg.data) == ("in1", inp["meta_type"][i], JPEGS[i])


BAD = [
    ("imu", {"orientation": np.zeros((N, 3))}, "orientation"),
    ("imu", {"frame_id": "a\0b"}, "frame_id"),
    ("nav_sat_fix", {"status": 3}, "status"),
    ("nav_sat_fix", {"position_covariance_type": 4}, "position_covariance_type"),
    ("can_frame", {"can_id": np.full(N, 0x800)}, r"can_id\[0\]"),
    ("can_frame", {"data": np.zeros((N, 7))}, "data"),
    ("point_cloud2", {"columns": {"x": CLOUD["x"]}}, "columns"),
    ("point_cloud2", {"counts": [1, 2]}, "counts"),
    ("laser_scan", {"ranges": np.zeros(3)}, "ranges"),
    ("laser_scan", {"scan_time": np.zeros(2)}, "scan_time"),
    ("image", {"height": 3}, r"data\[0\]"),
    ("image", {"is_bigendian": True}, "is_bigendian"),
    ("compressed_image", {"data": pa.array([1, 2, 3, 4, 5])}, "data"),
    ("compressed_video", {"format": "h26\x004"}, "format"),
    ("odometry", {"position": np.zeros((N, 2))}, "position"),
    ("odometry", {"twist_covariance": np.zeros(35)}, "twist_covariance"),
    ("tf_message", {"parent_frame_ids": ["map"]}, "parent_frame_ids"),
    ("tf_message", {"transforms_per_message": 0}, "transforms_per_message"),
]


@pytest.mark.parametrize(("kind", "change", "name"), BAD)
def test_bad_input_names_the_argument(kind: str, change: dict, name: str) -> None:
    stamps = TF_STAMPS if kind == "tf_message" else STAMPS
    with pytest.raises(ValueError, match=name):
        getattr(pb, kind)(stamps, **{**INPUTS[kind], **change}, ros=2)


def test_bad_stamps_and_typename() -> None:
    with pytest.raises(ValueError, match="stamp_ns"):
        pb.imu(STAMPS.astype(float), **INPUTS["imu"], ros=2)
    with pytest.raises(ValueError, match="typename"):
        pb.schema("sensor_msgs/msg/Temperature")

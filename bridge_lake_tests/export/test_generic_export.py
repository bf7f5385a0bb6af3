"""Generic ADTF streams in exports (issues 13, 21): the public recordings, which no shipped
rule maps, reach ROS 1 bags, ROS 2 bags and MCAP (ros2, ros1, protobuf) as message types
generated from their DDL (streams without a DDL as bridge_lake_msgs/AdtfSample), read back
with readers we did not write (bridge_lake_tests.export.readers), every message equal to its
lake row."""

from __future__ import annotations

import shutil

import pyarrow.compute as pc
import pytest
import yaml
from rosbags.rosbag1 import Reader as Bag1Reader
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.context import DriveContext
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.generic_types import plan_generic, plan_types
from bridge_lake.export.health import Kind
from bridge_lake.export.lake_exports import export_to_lake
from bridge_lake.export.mapping import TopicRule, parse_mapping
from bridge_lake.export.messages.ddl_types import field_name
from bridge_lake.export.source import Lane
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake_tests.export.readers import RULE, fields_of, read, time_of
from bridge_lake_tests.support import register
from bridge_lake_tests.testdata import adtf_available

FILES = (
    "test_file_rec_newfile.dat",
    "test_file_rec_newfile.dat.description",
    "test_type_seek.dat",
    "test_modify_extension.adtfdat",
    "one_empty_stream.dat",
    "adtfdat.hexpat.adtfdat",
)
EXPORTS = [
    pytest.param("bag1", None, "real.bag", id="bag1"),
    pytest.param("bag2", None, "real_bag2", id="bag2"),
    pytest.param("mcap", "ros2", "real.mcap", id="mcap-ros2"),
    pytest.param("mcap", "ros1", "real_ros1.mcap", id="mcap-ros1"),
    pytest.param("mcap", "protobuf", "real_pb.mcap", id="mcap-protobuf"),
]
BASE = ("time_ns", "sample_time_ns", "stream")


@pytest.fixture(scope="module")
def real_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("generic")
    drive = root / "landing" / "real"
    drive.mkdir(parents=True)
    for name in FILES:
        if (path := adtf_available(name)) is not None:  # the GPL ns file may be absent
            shutil.copy(path, drive / name)
    (drive / "drive.yaml").write_text(
        "source: adtf\nvehicle: test-vehicle-01\nrecorded_at: 2024-05-14T09:00:00Z\n"
    )
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    register(landing, lake, "real")
    result, published = normalize_drive(landing, lake, "real", "adtf")
    assert published and result.quarantined == 0
    _, published = calibrate_drive(lake, "real")
    assert published
    return lake, result, root


def lake_rows(lake: Lake, table: str, stream: str) -> list[dict]:
    rows = lake.read_partition("normalized", table, "real")
    return rows.filter(pc.equal(rows.column("stream"), stream)).to_pylist()


def unflatten(row: dict) -> dict:
    """A generic-table row as the message's fields: dotted columns nested, names as ROS."""
    out: dict = {}
    for key, value in row.items():
        if key in BASE:
            continue
        parts = key.split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(field_name(p), {})
        name = parts[-1][:-1] if len(parts) == 1 and parts[-1][:-1] in BASE else parts[-1]
        node[field_name(name)] = _names(value)
    return out


def _names(value: object) -> object:
    if isinstance(value, dict):
        return {field_name(k): _names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_names(v) for v in value]
    return value


def same(lake: object, message: object) -> bool:
    """Equal as the message carries it: tChar (int8 in the lake) is its byte (uint8)."""
    if isinstance(lake, dict):
        return (
            isinstance(message, dict)
            and lake.keys() == message.keys()
            and all(same(lake[k], message[k]) for k in lake)
        )
    if isinstance(lake, list):
        return (
            isinstance(message, list)
            and len(lake) == len(message)
            and all(same(a, b) for a, b in zip(lake, message, strict=True))
        )
    if isinstance(lake, bool) or isinstance(message, bool):
        return bool(lake) == bool(message)
    if isinstance(lake, int) and lake < 0 and message == lake + 256:
        return True
    return lake == message


def generic_streams(result) -> dict[str, tuple[str, int]]:
    """stream -> (lake table, rows) of every stream that went to a generic table."""
    return {
        s.info.stream: (s.info.table, s.rows_written)
        for s in result.streams
        if s.info.target in ("generic", "payload")
    }


@pytest.mark.parametrize(("fmt", "encoding", "name"), EXPORTS)
def test_every_generic_stream_is_a_topic_equal_to_its_rows(real_lake, fmt, encoding, name):
    lake, result, root = real_lake
    out = root / name
    export = export_drive(lake, "real", out, ExportRequest(format=fmt, encoding=encoding))
    assert export.left_out == [] and export.warnings == []
    messages = read(out)
    streams = generic_streams(result)
    assert streams, "the recordings have generic streams"
    checked = 0
    for stream, (table, count) in streams.items():
        topic = TopicRule("/adtf/{stream}", "ddl", "x", split_by="stream").topic_for(stream)
        if table == "adtf_payloads":
            topic = topic.replace("/adtf/", "/adtf/raw/", 1)
        got = messages.get(topic, [])
        if count == 0:  # a stream without samples has no lane, so no topic
            assert topic not in export.topics and not got
            continue
        assert len(got) == count == export.topics[topic].messages, (topic, len(got), count)
        rows = lake_rows(lake, table, stream)
        for (log_time, typename, message), row in zip(got, rows, strict=True):
            assert time_of(message) == (row["time_ns"], stream) and log_time == row["time_ns"]
            fields = fields_of(message)
            if table == "adtf_payloads":
                assert typename.endswith("AdtfSample")
                assert fields["stream"] == stream and fields["meta_type"] == (
                    row["meta_type"] or ""
                )
                assert bytes(fields["data"]) == row["data"]
            else:
                assert typename.startswith("adtf_msgs"), typename
                assert same(unflatten(row), fields), (topic, unflatten(row), fields)
            checked += 1
    assert checked == sum(c for _, c in streams.values())
    mytype = [fields_of(m) for _, _, m in messages["/adtf/test_serialize"]]
    assert [m["testval1"] for m in mytype] == list(range(1000))
    assert [m["testval2"] for m in mytype] == list(range(1000))


def test_bag1_definitions_and_md5_as_ros_computes_them(real_lake):
    """The connection header's message_definition holds the type and its dependencies, and
    its md5sum is what rosbags computes from that very text (ROS 1's rule)."""
    lake, _, root = real_lake
    out = root / "md5.bag"
    export_drive(lake, "real", out, ExportRequest(format="bag1"))
    with Bag1Reader(out) as reader:
        generated = [c for c in reader.connections if c.msgtype.startswith("adtf_msgs/")]
        assert generated
        for conn in generated:
            text = conn.msgdef.data if hasattr(conn.msgdef, "data") else conn.msgdef
            store = get_typestore(Stores.ROS1_NOETIC)
            blocks = text.split(RULE)
            types = get_types_from_msg(blocks[0], conn.msgtype)
            for block in blocks[1:]:
                head, _, body = block.partition("\n")
                dep = head.removeprefix("MSG: ").strip().replace("/", "/msg/", 1)
                if not dep.startswith("std_msgs"):
                    types.update(get_types_from_msg(body, dep))
            store.register(types)
            assert store.generate_msgdef(conn.msgtype, ros_version=1)[1] == conn.digest
            assert "std_msgs/Header header" in blocks[0] and "# DDL " in blocks[0]


def test_bags_with_json_topics_fail_unless_told_to_skip(real_lake, tmp_path):
    lake, _, _ = real_lake
    mapping = tmp_path / "json.yaml"
    mapping.write_text(
        "topics:\n  - topic: /adtf/{stream}\n    type: json\n    table: normalized/ddl_*\n"
        "    split_by: stream\n"
    )
    request = ExportRequest(format="bag1", mapping=mapping)
    with pytest.raises(BridgeLakeError, match=r"cannot carry .*/adtf/test_serialize"):
        export_drive(lake, "real", tmp_path / "x.bag", request)
    assert not (tmp_path / "x.bag").exists()
    skip = ExportRequest(format="bag1", mapping=mapping, skip_unsupported=True)
    export = export_drive(lake, "real", tmp_path / "x.bag", skip)
    assert "/adtf/test_serialize" in export.left_out
    assert export.left_out_rows["/adtf/test_serialize"] == 1000
    assert not export.topics


def test_the_exports_health_counts_every_generic_stream(real_lake, tmp_path):
    lake, result, _ = real_lake
    made = export_to_lake(lake, "real", "bag1", ExportRequest())
    assert made.health.ok, made.health.problems
    counted = {t.topic: t.expected_messages for t in made.health.topics.values()}
    assert counted["/adtf/test_serialize"] == 1000
    carried = {s for t in made.result.topics.values() for s in t.streams}
    assert {s for s, (_, n) in generic_streams(result).items() if n} <= carried
    # a mapping without the generic rules: the health check names what it dropped
    only_tf = tmp_path / "tf.yaml"
    only_tf.write_text(
        "topics:\n  - topic: /tf_static\n    type: tf2_msgs/msg/TFMessage\n"
        "    table: calibrated/tf_static\n"
    )
    made = export_to_lake(lake, "real", "bag1", ExportRequest(mapping=only_tf))
    assert not made.health.ok
    assert any(
        p.kind == Kind.UNEXPORTED
        and "stream test_serialize (ddl_mytype, 1000 rows) is in no topic" in p.message
        for p in made.health.problems
    )


@pytest.mark.parametrize(
    ("value", "topic"),
    [
        ("substreams1/stream1", "/adtf/substreams1/stream1"),
        ("stream1@test_history.dat", "/adtf/stream1_test_history_dat"),
        ("7up", "/adtf/_7up"),
    ],
)
def test_split_values_become_valid_ros_names(value, topic):
    rule = TopicRule("/adtf/{stream}", "ddl", "normalized/ddl_*", split_by="stream")
    assert rule.topic_for(value) == topic


def test_a_mapping_renames_topics_fields_and_the_package(real_lake, tmp_path):
    lake, _, _ = real_lake
    mapping = tmp_path / "mine.yaml"
    mapping.write_text(
        "topics:\n  - topic: /vehicle/{stream}\n    type: ddl\n    table: normalized/ddl_mytype\n"
        "    split_by: stream\n    frame_id: rec\n"
        "    options: {package: veh_msgs, rename: {testval1: value_a}}\n"
    )
    out = tmp_path / "mine_bag2"
    export = export_drive(lake, "real", out, ExportRequest(format="bag2", mapping=mapping))
    assert export.topics["/vehicle/test_serialize"].type == "veh_msgs/msg/Mytype"
    got = read(out)["/vehicle/test_serialize"]
    assert got[0][1] == "veh_msgs/msg/Mytype"
    assert [fields_of(m)["value_a"] for _, _, m in got] == list(range(1000))
    assert {time_of(m)[1] for _, _, m in got} == {"rec"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(mapping.read_text().replace("value_a", "Value-A"))
    with pytest.raises(BridgeLakeError, match=r"options\.rename\.testval1: 'Value-A' is not"):
        export_drive(lake, "real", tmp_path / "x.bag", ExportRequest(format="bag1", mapping=bad))
    typo = tmp_path / "typo.yaml"
    typo.write_text(mapping.read_text().replace("testval1:", "testvall:"))
    with pytest.raises(BridgeLakeError, match=r"options\.rename\.testvall: no element 'testvall'"):
        export_drive(lake, "real", tmp_path / "y.bag", ExportRequest(format="bag1", mapping=typo))
    assert not (tmp_path / "y.bag").exists()


def test_one_stream_at_a_time_skips_the_drive_wide_rename_check(real_lake):
    """The live bridge plans a rule's streams one by one (`plan_generic`): a rename key for a
    struct still to come must not fail the stream at hand. The offline plan, which sees every
    stream of the drive, fails on the same key (test above)."""
    lake, _, _ = real_lake
    ctx = DriveContext.load(lake, "real")
    catalog = {r["stream"]: (r["ddl_struct"], r["ddl"]) for r in ctx.streams}
    doc = yaml.safe_load(
        "topics:\n  - topic: /vehicle/{stream}\n    type: ddl\n    table: normalized/ddl_mytype\n"
        "    split_by: stream\n    options: {rename: {testvall: value_a}}\n"
    )
    rule = parse_mapping(doc, "live.yaml").topics[0]
    lane = Lane("/vehicle/test_serialize", rule, "rec", {"stream": "test_serialize"})
    plan = plan_generic([lane], lambda: catalog)
    assert lane.extra["type"] == "adtf_msgs/msg/Mytype" and not plan.warnings
    offline = Lane("/vehicle/test_serialize", rule, "rec", {"stream": "test_serialize"})
    with pytest.raises(BridgeLakeError, match=r"options\.rename\.testvall: no element"):
        plan_types(ctx, [offline])


def test_cli_fails_naming_unsupported_topics_or_skips_them(real_lake, tmp_path, capsys):
    from bridge_lake.cli import main

    lake, _, _ = real_lake
    mapping = tmp_path / "json.yaml"
    mapping.write_text(
        "topics:\n  - topic: /adtf/{stream}\n    type: json\n    table: normalized/ddl_*\n"
        "    split_by: stream\n"
    )
    args = ["export", "--lake", lake.root, "--drive", "real", "--format", "bag1", "--quiet",
            "--mapping", str(mapping), "--out", str(tmp_path / "x.bag")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "cannot carry" in err and "/adtf/test_serialize (json)" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main([*args, "--skip-unsupported"]) == 0
    out = capsys.readouterr().out
    assert "left out (--skip-unsupported): /adtf/test_serialize, 1000 rows" in out

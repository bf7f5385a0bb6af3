"""DDL structs as generated ROS message types (issue 21): names, fields, enums, collisions and
bad input; a synthetic struct with every DDL type (arrays of nested structs, dynamic arrays,
enums) written as an ADTF 3 recording, normalized and exported to every format, read back
by readers we did not write; bad DDL goes out as AdtfSample with a warning, nothing lost."""

from __future__ import annotations

import json
import struct as S
from dataclasses import replace

import numpy as np
import pytest
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.messages import ExportTypes, ddl_message
from bridge_lake.export.messages.ddl_types import (
    DDLTypeError,
    TypeSet,
    build,
    field_name,
    message_name,
)
from bridge_lake.formats.adtf import DatWriter, Property, StreamType, parse_ddl
from bridge_lake.formats.adtf.ddl import DDL, Struct
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.adtf_generic import element_columns
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake.scenes.faults import inject, parse_compact
from bridge_lake_tests.export.readers import fields_of, read, time_of
from bridge_lake_tests.export.test_generic_export import same, unflatten
from bridge_lake_tests.support import register


def el(name: str, type_: str, size: str = "1") -> str:
    return (
        f'<element name="{name}" type="{type_}" arraysize="{size}">'
        '<serialized byteorder="LE"/><deserialized alignment="1"/></element>'
    )


ALL_TYPES = (
    '<enums><enum name="eTag" type="tUInt8"><element name="MT_Data" value="0"/>'
    '<element name="MT_Status" value="1"/></enum></enums><structs>'
    '<struct name="tInner" alignment="1" version="1">'
    + el("f64X", "tFloat64")
    + el("u8Flag", "tUInt8")
    + el("ai16Pair", "tInt16", "2")
    + "</struct>"
    '<struct name="tAll" alignment="1" version="1">'
    + "".join(
        el(n, t)
        for n, t in [
            ("bFlag", "tBool"),
            ("cChar", "tChar"),
            ("i8Value", "tInt8"),
            ("u16Value", "tUInt16"),
            ("i16Value", "tInt16"),
            ("tag", "eTag"),
            ("u32Count", "tUInt32"),
            ("i32Value", "tInt32"),
            ("u64Value", "tUInt64"),
            ("i64Value", "tInt64"),
        ]
    )
    + el("af32Vec", "tFloat32", "3")
    + el("inner", "tInner")
    + el("fixedInner", "tInner", "2")
    + el("adDyn", "tFloat64", "u32Count")
    + el("u8N", "tUInt8")
    + el("dynInner", "tInner", "u8N")
    + el("stream", "tUInt8")
    + "</struct></structs>"
)


def inner(k: int) -> bytes:
    return S.pack("<dBhh", k * 1.25 - 3, k % 256, -k, k * 7)


def all_types_sample(i: int) -> bytes:
    count, n = i % 4, i % 3
    return (
        bytes([i % 2, (200 + i) % 256, (256 - i) % 256])
        + S.pack("<HhBIiQq", 1000 + i, -i, i % 2, count, -7 * i, 2**63 + i, -(2**40) - i)
        + S.pack("<3f", 1.5 * i, -i, 0.25)
        + inner(i)
        + inner(2 * i)
        + inner(2 * i + 1)
        + S.pack(f"<{count}d", *[i + 0.5 * k for k in range(count)])
        + bytes([n])
        + b"".join(inner(10 * i + k) for k in range(n))
        + bytes([i % 256])
    )


def ddl_type(struct: str, defs: str) -> StreamType:
    return StreamType(
        "adtf/default",
        {
            "md_struct": Property("cString", struct),
            "md_definitions": Property("cString", defs),
            "md_data_serialized": Property("tBool", "false"),
        },
    )


T0 = 1_715_677_200_000_000_000


def lake_of(root, drive: str, streams: dict[str, tuple[StreamType, list[bytes]]]) -> Lake:
    """A drive of one ADTF 3 recording with these streams, normalized and calibrated."""
    folder = root / "landing" / drive
    folder.mkdir(parents=True)
    with DatWriter(folder / f"{drive}.dat", version=0x0500, file_time=T0) as w:
        ids = {name: w.add_stream(name, stream_type=st) for name, (st, _) in streams.items()}
        longest = max(len(s) for _, s in streams.values())
        for i in range(longest):
            for k, (name, (_, samples)) in enumerate(streams.items()):
                if i < len(samples):
                    w.write_sample(ids[name], T0 + i * 10_000_000 + k, samples[i])
    (folder / "drive.yaml").write_text(
        "source: adtf\nvehicle: test-vehicle-01\nrecorded_at: 2024-05-14T09:00:00Z\n"
    )
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    register(landing, lake, drive)
    _, published = normalize_drive(landing, lake, drive, "adtf")
    assert published
    _, published = calibrate_drive(lake, drive)
    assert published
    return lake


# -- names, fields, definitions --------------------------------------------------------------


@pytest.mark.parametrize(
    ("ddl", "ros"),
    [
        ("testval1", "testval1"),
        ("ui32Count", "ui32_count"),
        ("f64AccelX", "f64_accel_x"),
        ("HTTPServer2", "http_server2"),
        ("a.b-c", "a_b_c"),
        ("__x__", "x"),
        ("3dPos", "field_3d_pos"),
        ("€", None),
    ],
)
def test_field_names_are_ros2_names(ddl: str, ros: str | None) -> None:
    assert field_name(ddl) == ros


@pytest.mark.parametrize(
    ("ddl", "ros"),
    [("mytype", "Mytype"), ("tVehicle.Status", "TVehicleStatus"), ("UINT32", "UINT32"),
     ("9axis", "Msg9axis"), ("..", None)],
)  # fmt: skip
def test_message_names(ddl: str, ros: str | None) -> None:
    assert message_name(ddl) == ros


def test_definition_has_header_comments_enums_and_nested_types() -> None:
    ts = TypeSet()
    root = ts.add(build(parse_ddl(ALL_TYPES), "tAll"))
    texts = ts.resolve()
    assert set(texts) == {"adtf_msgs/msg/TAll", "adtf_msgs/msg/TInner"}
    lines = texts["adtf_msgs/msg/TAll"].splitlines()
    assert lines[1:4] == ["uint8 MT_DATA=0", "uint8 MT_STATUS=1", "std_msgs/Header header"]
    assert "uint8 c_char  # DDL cChar: tChar" in lines
    assert "float32[3] af32_vec  # DDL af32Vec: tFloat32[3]" in lines
    assert "adtf_msgs/TInner[2] fixed_inner  # DDL fixedInner: tInner[2]" in lines
    assert "float64[] ad_dyn  # DDL adDyn: tFloat64[u32Count]" in lines
    assert "adtf_msgs/TInner[] dyn_inner  # DDL dynInner: tInner[u8N]" in lines
    assert "uint8 stream  # DDL stream: tUInt8" in lines  # the lake column is stream_
    assert not root.fixed_size
    assert "std_msgs/Header" not in texts["adtf_msgs/msg/TInner"]


def test_collisions_are_resolved_by_ddl_name_not_by_order() -> None:
    one = parse_ddl('<struct name="my.type" alignment="1">' + el("a", "tUInt8") + "</struct>")
    two = parse_ddl('<struct name="my_type" alignment="1">' + el("b", "tUInt8") + "</struct>")
    same_as_one = parse_ddl(
        '<struct name="my.type" alignment="1">' + el("a", "tUInt8") + "</struct>"
    )
    names = []
    for order in ([one, two, same_as_one], [two, same_as_one, one]):
        ts = TypeSet("veh_msgs")
        roots = [ts.add(build(d, next(iter(d.structs)))) for d in order]
        ts.resolve()
        names.append({r.ddl_name + "/" + r.fields[0].name: r.name for r in roots})
    assert (
        names[0]
        == names[1]
        == {
            "my.type/a": "veh_msgs/msg/MyType",
            "my_type/b": "veh_msgs/msg/MyType2",
        }
    )


def test_rename_and_field_collisions() -> None:
    ddl = parse_ddl(
        '<struct name="s" alignment="1">'
        + el("fooBar", "tUInt8")
        + el("foo_bar", "tUInt8")
        + el("header", "tUInt8")
        + "</struct>"
    )
    assert [f.name for f in build(ddl, "s").fields] == ["foo_bar", "foo_bar_2", "header_2"]
    renamed = build(ddl, "s", rename={"header": "status"})
    assert [f.name for f in renamed.fields] == ["foo_bar", "foo_bar_2", "status"]


def test_bad_ddl_is_a_typed_error_naming_struct_and_element() -> None:
    base = parse_ddl('<struct name="s" alignment="1">' + el("a", "tUInt8") + "</struct>")
    a = base.structs["s"].elements[0]
    loop = Struct("tLoop", 1, (replace(a, name="next", type="tLoop"),))
    cyclic = DDL(base.datatypes, {}, {"tLoop": loop}, {}, {})
    with pytest.raises(DDLTypeError, match="struct 'tLoop' element 'next': struct contains"):
        build(cyclic, "tLoop")
    odd = DDL(base.datatypes, {}, {"s": Struct("s", 1, (replace(a, type="tFloat128"),))}, {}, {})
    with pytest.raises(DDLTypeError, match="struct 's' element 'a': unknown DDL type 'tFloat128'"):
        build(odd, "s")
    euro = DDL(base.datatypes, {}, {"s": Struct("s", 1, (replace(a, name="€"),))}, {}, {})
    with pytest.raises(DDLTypeError, match="element '€': name has no letter"):
        build(euro, "s")


@pytest.mark.parametrize("ros", [1, 2])
def test_fixed_and_variable_layouts_are_byte_equal_to_rosbags(ros: int) -> None:
    """Our bytes == rosbags' serialization of what rosbags read from them (a fixed struct
    takes the strided path, one with dynamic arrays the scatter path)."""
    ddl = parse_ddl(ALL_TYPES)
    samples = [all_types_sample(i) for i in range(40)]
    buf = b"".join(samples)
    lengths = np.array([len(s) for s in samples])
    rows = element_columns(decode(ddl, "tAll", buf, np.cumsum(lengths) - lengths, lengths))
    for struct, table in (("tAll", rows), ("tInner", None)):
        ts = TypeSet()
        root = ts.add(build(ddl, struct))
        store = ExportTypes(ts.resolve()).typestore(ros)
        if table is None:  # tInner alone: the fixed-layout path
            table = element_columns(
                decode(ddl, "tInner", b"".join(inner(k) for k in range(40)),
                       np.arange(40) * 13, np.full(40, 13))
            )  # fmt: skip
            assert root.fixed_size
        out = ddl_message(np.arange(40) + T0, "f", struct=root, rows=table, ros=ros)
        for i in range(40):
            raw = bytes(out.message(i))
            if ros == 1:
                again = store.serialize_ros1(store.deserialize_ros1(raw, root.name), root.name)
            else:
                again = store.serialize_cdr(store.deserialize_cdr(raw, root.name), root.name)
            assert bytes(again) == raw


# -- end to end --------------------------------------------------------------------------------

EXPORTS = [("bag1", None), ("bag2", None), ("mcap", "ros2"), ("mcap", "ros1"), ("mcap", "protobuf")]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddl")
    samples = [all_types_sample(i) for i in range(60)]
    lake = lake_of(root, "synth", {"all": (ddl_type("tAll", ALL_TYPES), samples)})
    return lake, root


@pytest.mark.parametrize(("fmt", "encoding"), EXPORTS)
def test_every_ddl_type_round_trips_through_every_format(synthetic, fmt, encoding) -> None:
    lake, root = synthetic
    suffix = {"bag1": ".bag", "bag2": "", "mcap": ".mcap"}[fmt]
    out = root / f"synth_{fmt}_{encoding}{suffix}"
    export = export_drive(lake, "synth", out, ExportRequest(format=fmt, encoding=encoding))
    assert export.warnings == [] and export.topics["/adtf/all"].type == "adtf_msgs/msg/TAll"
    got = read(out)["/adtf/all"]
    rows = lake.read_partition("normalized", "ddl_tall", "synth").to_pylist()
    assert len(got) == len(rows) == 60
    for (log_time, _, message), row in zip(got, rows, strict=True):
        assert time_of(message) == (row["time_ns"], "all") == (log_time, "all")
        assert same(unflatten(row), fields_of(message)), (unflatten(row), fields_of(message))
    deepest = fields_of(got[5][2])
    assert deepest["dyn_inner"][1]["ai16_pair"] == [-51, 357]  # inner(10 * 5 + 1)
    assert deepest["ad_dyn"] == [5.0] and deepest["stream"] == 5


@pytest.mark.parametrize("encoding", ["ros2", "ros1"])
def test_clock_offset_shifts_header_stamps_of_generated_types(synthetic, encoding) -> None:
    """A scene variant's `*:clock_offset` moves the header stamps of a generated type too: the
    injector finds them through the file's own definition of the type (it is in no shipped
    typestore), read back by decoders built from that definition."""
    lake, root = synthetic
    clean = root / f"offset_{encoding}.mcap"
    export_drive(lake, "synth", clean, ExportRequest(format="mcap", encoding=encoding))
    shifted = root / f"offset_{encoding}--clk.mcap"
    inject(clean, shifted, parse_compact("*:clock_offset=+20ms"), seed=1)
    before, after = read(clean)["/adtf/all"], read(shifted)["/adtf/all"]
    assert len(after) == len(before) == 60
    for (log0, _, m0), (log1, _, m1) in zip(before, after, strict=True):
        assert log1 == log0 + 20_000_000
        assert time_of(m1)[0] == time_of(m0)[0] + 20_000_000
        assert fields_of(m1) == fields_of(m0)


def test_bad_ddl_goes_out_as_adtf_sample_with_a_warning(tmp_path) -> None:
    loop = '<structs><struct name="tLoop" alignment="1">' + el("ui32A", "tUInt32")
    loop += el("next", "tLoop") + "</struct></structs>"
    odd = (
        '<structs><struct name="tOdd" alignment="1">' + el("x", "tFloat128") + "</struct></structs>"
    )
    euro = (
        '<structs><struct name="tName" alignment="1">' + el("€", "tUInt32") + "</struct></structs>"
    )
    payload = [S.pack("<I", i) for i in range(5)]
    lake = lake_of(
        tmp_path,
        "bad",
        {
            "cyclic": (ddl_type("tLoop", loop), payload),
            "unknown": (ddl_type("tOdd", odd), payload),
            "badname": (ddl_type("tName", euro), payload),
        },
    )
    out = tmp_path / "bad.bag"
    export = export_drive(lake, "bad", out, ExportRequest(format="bag1"))
    warned = "\n".join(export.warnings)
    assert "stream cyclic" in warned and "struct tLoop element next: contains itself" in warned
    assert "stream unknown" in warned and "element x: unknown type 'tFloat128'" in warned
    assert "stream badname" in warned and "struct 'tName' element '€'" in warned
    messages = read(out)
    for topic in ("/adtf/raw/cyclic", "/adtf/raw/unknown", "/adtf/badname"):
        assert export.topics[topic].type == "bridge_lake_msgs/msg/AdtfSample"
        assert len(messages[topic]) == 5
    raw = [fields_of(m) for _, _, m in messages["/adtf/raw/cyclic"]]
    assert [bytes(m["data"]) for m in raw] == payload and raw[0]["stream"] == "cyclic"
    samples = [fields_of(m) for _, _, m in messages["/adtf/badname"]]
    assert {m["meta_type"] for m in samples} == {"application/json"}
    lake_rows = lake.read_partition("normalized", "ddl_tname", "bad").to_pylist()
    for message, row in zip(samples, lake_rows, strict=True):
        assert json.loads(bytes(message["data"])) == {
            k: v for k, v in row.items() if k != "time_ns"
        }
    assert [r["€"] for r in lake_rows] == [0, 1, 2, 3, 4]


def test_md5_of_generated_types_is_rosbags_of_the_same_text() -> None:
    ts = TypeSet()
    root = ts.add(build(parse_ddl(ALL_TYPES), "tAll"))
    types = ExportTypes(ts.resolve())
    d = types.definition(root.name, 1)
    store = get_typestore(Stores.ROS1_NOETIC)
    main, *deps = d.text.split("\n" + "=" * 80 + "\n")
    parsed = get_types_from_msg(main, root.name)
    for block in deps:
        head, _, body = block.partition("\n")
        name = head.removeprefix("MSG: ").replace("/", "/msg/", 1)
        if name.startswith("adtf_msgs"):
            parsed.update(get_types_from_msg(body, name))
    store.register(parsed)
    assert store.generate_msgdef(root.name, ros_version=1)[1] == d.md5sum
    assert "# DDL u32Count: tUInt32" in d.text and "MSG: adtf_msgs/TInner" in d.text

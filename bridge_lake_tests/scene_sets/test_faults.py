"""Fault specs in both forms, and each fault kind injected into a real scene, read back by
readers we did not write (the mcap reader, rosbags' deserializers)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from bridge_lake.export.messages import typestore
from bridge_lake.formats.ros.stamps import StampError, read_stamp, stamp_positions
from bridge_lake.scenes.faults import (
    FaultError,
    FaultSpec,
    inject,
    parse_compact,
    parse_yaml,
    read_mcap,
)
from bridge_lake.scenes.sets import build_scene, build_variant, read_catalog
from bridge_lake_tests.scene_sets import scene_lake

MS = 1_000_000


@pytest.fixture(scope="module")
def scenes(synthetic_lake, tmp_path_factory):
    """The first scene of each drive, exported: source → SceneFile."""
    root = tmp_path_factory.mktemp("faults")
    lake, drives = scene_lake(synthetic_lake, root / "lake")
    out = {}
    for src, drive in drives.items():
        folder = root / src
        folder.mkdir()
        out[src] = build_scene(lake, read_catalog(lake, drive)[0], folder)
    return out


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("camera:drop=0.5%", FaultSpec("drop", "camera", rate=0.005)),
        ("imu:delay=30ms", FaultSpec("delay", "imu", offset_ns=30 * MS)),
        ("camera:black=2", FaultSpec("black", "camera", count=2)),
        ("camera:black=1%", FaultSpec("black", "camera", rate=0.01)),
        (
            "camera:black=500ms@1s",
            FaultSpec("black", "camera", duration_ns=500 * MS, at_ns=1000 * MS),
        ),
        (
            "lidar:missing=2s@10s",
            FaultSpec("missing", "lidar", duration_ns=2000 * MS, at_ns=10_000 * MS),
        ),
        ("lidar:missing=1.5s", FaultSpec("missing", "lidar", duration_ns=1500 * MS)),
        (
            "can:reorder=5@window=50ms",
            FaultSpec("reorder", "can", count=5, window_ns=50 * MS),
        ),
        ("*:clock_offset=+20ms", FaultSpec("clock_offset", "*", offset_ns=20 * MS)),
        ("/tf:clock_offset=-500us", FaultSpec("clock_offset", "/tf", offset_ns=-500_000)),
    ],
)
def test_compact_form_parses_and_round_trips(text, expected):
    (spec,) = parse_compact(text)
    assert spec == expected
    assert parse_compact(spec.compact()) == [spec]


def test_compact_form_takes_several_and_reorder_has_a_default_window():
    specs = parse_compact("camera:drop=1%, imu:delay=5ms,can:reorder=2")
    assert [s.kind for s in specs] == ["drop", "delay", "reorder"]
    assert specs[2].window_ns == 50 * MS
    assert specs[2].compact() == "can:reorder=2@window=50ms"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("camera:drop=10%", "outside 0.1-5 %"),
        ("camera:drop=0.05%", "outside 0.1-5 %"),
        ("camera:explode=1", "unknown fault kind"),
        ("radar:drop=1%", "unknown selector"),
        ("imu:delay=30", "not a duration"),
        ("imu:delay=-30ms", "must be positive"),
        ("imu", "expected SELECTOR:KIND=VALUE"),
        ("camera:black=2@1s", "takes no @start"),
        ("imu:delay=30ms@window=5ms", "takes no parameter"),
        ("can:reorder=0", "at least 1"),
    ],
)
def test_compact_form_errors_say_what_is_wrong(text, message):
    with pytest.raises(FaultError, match=message):
        parse_compact(text)


FAULTS_YAML = """
version: 1
seed: 42
variants:
  - name: sensor-faults
    scenes: [first, "tag:braking"]
    faults:
      - camera:drop=0.5%
      - {topic: lidar, kind: missing, duration: 2s, at: 1s}
      - {topic: imu, kind: delay, by: 30ms}
      - {topic: can, kind: reorder, count: 5, window: 50ms}
      - {topic: "*", kind: clock_offset, by: +20ms}
      - {topic: camera, kind: black, count: 2}
      - {topic: gnss, kind: drop, rate: 0.01}
  - name: late
    seed: 7
    faults: ["imu:delay=10ms"]
"""


def test_yaml_form_gives_the_same_specs_as_the_compact_form():
    sensor, late = parse_yaml(FAULTS_YAML)
    assert sensor.name == "sensor-faults" and sensor.seed == 42
    assert sensor.scenes == ("first", "tag:braking")
    assert [f.compact() for f in sensor.faults] == [
        "camera:drop=0.5%",
        "lidar:missing=2s@1s",
        "imu:delay=30ms",
        "can:reorder=5@window=50ms",
        "*:clock_offset=+20ms",
        "camera:black=2",
        "gnss:drop=1%",
    ]
    assert late.seed == 7 and late.faults == tuple(parse_compact("imu:delay=10ms"))
    assert sensor.selects("x", ["braking"], first=False)
    assert sensor.selects("x", [], first=True)
    assert not sensor.selects("x", ["turn"], first=False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("variants: []", "variants: expected a non-empty list"),
        ("variants: [{name: a, faults: [imu:delay=1ms]}]\nextra: 1", "extra: unknown key"),
        ("variants: [{name: Bad Name, faults: [imu:delay=1ms]}]", r"variants\[0\].name"),
        ("variants: [{name: clean, faults: [imu:delay=1ms]}]", "not 'clean'"),
        ("variants: [{name: a, faults: [{topic: imu, kind: delay, rate: 1}]}]", "not a parameter"),
        ("variants: [{name: a, faults: [{topic: imu, kind: drop, rate: 0.5}]}]", "outside"),
        (
            "variants: [{name: a, faults: [imu:delay=1ms]}, {name: a, faults: [imu:delay=1ms]}]",
            "given twice",
        ),
        ("seed: -1\nvariants: [{name: a, faults: [imu:delay=1ms]}]", "seed"),
    ],
)
def test_yaml_errors_name_the_key(text, message):
    with pytest.raises(FaultError, match=message):
        parse_yaml(text, "faults.yaml")


# --- stamps ----------------------------------------------------------------------------------


def test_stamp_positions_agree_with_rosbags_for_every_topic(scenes):
    """The stamps the injector moves are the header stamps rosbags decodes (TFMessage: every
    transform's)."""
    store = typestore(2)
    checked = set()
    for scene in scenes.values():
        content = read_mcap(scene.path)
        for topic, m in content.topics.items():
            for data in m.data[:3]:
                msg = store.deserialize_cdr(data, m.type)
                if m.type == "tf2_msgs/msg/TFMessage":
                    stamps = [t.header.stamp for t in msg.transforms]
                else:
                    stamps = [msg.header.stamp]
                positions = stamp_positions(m.type, m.encoding, data, m.definition)
                assert [read_stamp(data, p, "cdr") for p in positions] == [
                    s.sec * 10**9 + s.nanosec for s in stamps
                ], topic
                checked.add(m.type)
    assert {"tf2_msgs/msg/TFMessage", "sensor_msgs/msg/Image", "can_msgs/msg/Frame"} <= checked
    assert len(checked) >= 8


# --- injection -------------------------------------------------------------------------------


def _read(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    out: dict[str, list[tuple[int, bytes]]] = {}
    with path.open("rb") as f:
        for _, channel, m in make_reader(f, validate_crcs=True).iter_messages(log_time_order=False):
            out.setdefault(channel.topic, []).append((m.log_time, m.data))
    return out


def _stamp(data: bytes, typename: str) -> int:
    msg = typestore(2).deserialize_cdr(data, typename)
    h = msg.transforms[0].header if typename.startswith("tf2") else msg.header
    return h.stamp.sec * 10**9 + h.stamp.nanosec


KIND_CASES = {
    "drop": ("adtf", "imu:drop=5%"),
    "delay": ("adtf", "imu:delay=30ms"),
    "black": ("adtf", "camera:black=2"),
    "missing": ("adtf", "lidar:missing=500ms@0.5s"),
    "reorder": ("adtf", "/vehicle/can_1:reorder=3@window=20ms"),
    "clock_offset": ("nclt", "*:clock_offset=+20ms"),
}


@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_each_fault_kind_is_injected_deterministically_and_listed(kind, scenes, tmp_path):
    src, text = KIND_CASES[kind]
    scene = scenes[src]
    specs = parse_compact(text)
    a = inject(scene.path, tmp_path / "a.mcap", specs, seed=5)
    b = inject(scene.path, tmp_path / "b.mcap", specs, seed=5)
    assert a.faults and a.faults == b.faults
    assert (tmp_path / "a.mcap").read_bytes() == (tmp_path / "b.mcap").read_bytes()
    assert {f.kind for f in a.faults} == {kind}

    clean, variant = _read(scene.path), _read(tmp_path / "a.mcap")
    types = {t: m.type for t, m in read_mcap(scene.path).topics.items()}
    by_topic: dict[str, dict[int, tuple[int, int | None]]] = {}
    for f in a.faults:
        assert clean[f.topic][f.index][0] == f.orig_ns  # index and time name the message
        by_topic.setdefault(f.topic, {})[f.index] = (f.orig_ns, f.new_ns)
    for topic, msgs in clean.items():
        listed = by_topic.get(topic, {})
        got = variant.get(topic, [])
        if not listed:
            assert got == msgs, topic  # untouched topics are byte-identical
            continue
        if kind in ("drop", "missing"):
            assert len(got) == len(msgs) - len(listed)
            assert got == [m for i, m in enumerate(msgs) if i not in listed]
            if kind == "missing":
                start = read_mcap(scene.path).window()[0]
                assert not [t for t, _ in got if start + 500 * MS <= t < start + 1000 * MS]
            continue
        assert len(got) == len(msgs)
        stamps = {_stamp(d, types[topic]): (t, d) for t, d in got}
        for i, (t, data) in enumerate(msgs):
            stamp = _stamp(data, types[topic])
            if kind == "clock_offset":
                t_new, d_new = stamps[stamp + 20 * MS]  # stamp moved with the log time
                assert t_new == t + 20 * MS
                continue
            t_new, d_new = stamps[stamp]  # stamps kept: a late or reordered arrival
            if i in listed and kind != "black":
                assert t_new == listed[i][1] != t
            else:
                assert t_new == t
            if kind == "black":
                pixels = typestore(2).deserialize_cdr(d_new, types[topic]).data
                assert (not pixels.any()) == (i in listed) and len(pixels)
            else:
                assert d_new == data
    if kind == "reorder":
        log = [t for t, _ in variant[next(iter(by_topic))]]
        stamps_in_file = [
            _stamp(d, types[next(iter(by_topic))]) for _, d in variant[next(iter(by_topic))]
        ]
        assert log == sorted(log)
        assert np.any(np.diff(stamps_in_file) < 0)  # arrival order differs from stamp order
    if kind in ("drop", "black"):
        c = inject(scene.path, tmp_path / "c.mcap", specs, seed=6)
        assert [f.index for f in c.faults] != [f.index for f in a.faults]


def test_rates_drop_at_least_one_and_scale(scenes, tmp_path):
    scene = scenes["adtf"]
    one = inject(scene.path, tmp_path / "1.mcap", parse_compact("imu:drop=0.1%"), seed=1)
    five = inject(scene.path, tmp_path / "5.mcap", parse_compact("imu:drop=5%"), seed=1)
    n = len(read_mcap(scene.path).topics["/sensor/imu/data"])
    assert len(one.faults) == 1
    assert len(five.faults) == round(0.05 * n)


def test_selectors_and_errors(scenes, tmp_path):
    scene = scenes["nclt"]
    r = inject(scene.path, tmp_path / "v.mcap", parse_compact("camera:black=1"), seed=0)
    assert {f.topic for f in r.faults} == {f"/lb3_cam{i}/image_raw" for i in range(6)}
    r = inject(scene.path, tmp_path / "v.mcap", parse_compact("*:delay=1ms"), seed=0)
    assert "/tf_static" not in {f.topic for f in r.faults}
    with pytest.raises(FaultError, match="selects no topic"):
        inject(scene.path, tmp_path / "v.mcap", parse_compact("can:drop=1%"))
    with pytest.raises(FaultError, match="black frames need raw images"):
        inject(scene.path, tmp_path / "v.mcap", parse_compact("/velodyne_points:black=1"))
    with pytest.raises(FaultError, match="affects no message"):
        inject(scene.path, tmp_path / "v.mcap", parse_compact("lidar:missing=1s@30s"))
    with pytest.raises(FaultError, match="room for only"):
        inject(scene.path, tmp_path / "v.mcap", parse_compact("lidar:reorder=1@window=1ms"))
    optional = inject(
        scene.path, tmp_path / "v.mcap", parse_compact("can:drop=1%,imu:drop=1%"), optional=True
    )
    assert optional.skipped == ["can:drop=1%"] and len(optional.faults) == 1
    assert not list(tmp_path.glob(".*partial"))


def test_variant_manifest_lists_every_fault(scenes, tmp_path):
    from bridge_lake.scenes.faults import VariantSpec

    scene = scenes["adtf"]
    variant = VariantSpec("mixed", tuple(parse_compact("imu:drop=2%,gnss:delay=30ms")), seed=3)
    made = build_variant(scene, variant, tmp_path)
    listed = made.manifest["faults"]
    assert listed["seed"] == 3 and listed["specs"] == ["imu:drop=2%", "gnss:delay=30ms"]
    assert listed["count"] == len(made.injection.faults) > 20
    flat = [
        (g["kind"], g["topic"], k, o, n)
        for g in listed["injected"]
        for k, o, n in zip(g["index"], g["orig_ns"], g["new_ns"], strict=True)
    ]
    assert flat == [(f.kind, f.topic, f.index, f.orig_ns, f.new_ns) for f in made.injection.faults]
    assert made.manifest["source"] == {"file": scene.path.name, "sha256": scene.sha256}
    assert made.manifest["file"]["sha256"] == hashlib.sha256(made.path.read_bytes()).hexdigest()
    counts = {t: len(v) for t, v in _read(made.path).items()}
    assert {t: v["messages"] for t, v in made.manifest["topics"].items() if v["messages"]} == counts


@pytest.mark.parametrize("encoding", ["cdr", "ros1"])
def test_a_malformed_tf_message_is_a_typed_error(encoding: str) -> None:
    """A TFMessage whose lengths point past its end (the CRC of its chunk can still be
    valid) is a StampError naming the type, not a struct.error from deep inside."""
    header = b"\0\1\0\0" if encoding == "cdr" else b""
    one_transform_no_body = header + (1).to_bytes(4, "little")
    huge_frame_id = header + (1).to_bytes(4, "little") + bytes(12) + (1 << 30).to_bytes(4, "little")
    for data in (one_transform_no_body, huge_frame_id, header[:2]):
        with pytest.raises(StampError, match=r"tf2_msgs/msg/TFMessage message of \d+ bytes"):
            stamp_positions("tf2_msgs/msg/TFMessage", encoding, data)

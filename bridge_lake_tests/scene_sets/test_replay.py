"""replay-check: a clean scene passes, each injected fault kind is found exactly where the
manifest says (and an unlisted one is found with its kind), a flipped byte fails the
content level, and the exit codes gate CI."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from bridge_lake.export.mcap_writer import McapWriter
from bridge_lake.export.messages import message_definition, typestore
from bridge_lake.scenes.cli import main
from bridge_lake.scenes.faults import VariantSpec, parse_compact, read_mcap, sha256_file
from bridge_lake.scenes.replay import replay_check
from bridge_lake.scenes.sets import (
    MANIFEST_KIND,
    MANIFEST_VERSION,
    Scene,
    SceneFile,
    build_scene,
    build_variant,
    manifest_path_for,
    read_catalog,
)
from bridge_lake_tests.scene_sets import scene_lake

KINDS = {
    "drop": ("adtf", "imu:drop=5%"),
    "delay": ("adtf", "imu:delay=30ms"),
    "black": ("adtf", "camera:black=2"),
    "missing": ("adtf", "lidar:missing=500ms"),
    "reorder": ("adtf", "can:reorder=2@window=20ms"),
    "clock_offset": ("nclt", "*:clock_offset=+20ms"),
}
LOOKS_LIKE = {"missing": "drop"}
"""What an unlisted fault looks like from the data alone (a missing span is drops)."""
MIXED = "imu:delay=30ms,imu:drop=2%,*:clock_offset=-5ms,can:reorder=2@window=20ms,camera:black=1"


@pytest.fixture(scope="module")
def built(synthetic_lake, tmp_path_factory):
    root = tmp_path_factory.mktemp("replay")
    lake, drives = scene_lake(synthetic_lake, root / "lake")
    folder = root / "scenes"
    folder.mkdir()
    clean = {
        src: build_scene(lake, read_catalog(lake, drive)[0], folder)
        for src, drive in drives.items()
    }
    variants = {
        kind: build_variant(
            clean[src],
            VariantSpec(kind.replace("_", "-"), tuple(parse_compact(text)), seed=11),
            folder,
        )
        for kind, (src, text) in KINDS.items()
    }
    variants["mixed"] = build_variant(
        clean["adtf"], VariantSpec("mixed", tuple(parse_compact(MIXED)), seed=2), folder
    )
    return lake, clean, variants


def _levels(report) -> dict[str, bool]:
    return {lv: report.level_ok(lv) for lv in ("data", "timing", "content")}


@pytest.mark.parametrize("src", ["adtf", "nclt"])
def test_a_clean_scene_passes_every_level(built, src):
    lake, clean, _ = built
    report = replay_check(clean[src].path)
    assert report.ok, [c for c in report.checks if not c.ok]
    assert {c.name for c in report.checks} >= {"decodes", "counts", "order", "stamps", "sha256"}
    against = replay_check(clean[src].path, against=lake.root)
    assert against.ok, [c for c in against.checks if not c.ok]
    assert against.reference.startswith("lake ")
    fast = replay_check(clean[src].path, decode=False)
    assert fast.ok and "not decoded" in next(c for c in fast.checks if c.name == "decodes").detail
    assert {c.name for c in against.checks} >= {"faults", "messages", "lake snapshot"}
    assert not against.findings


@pytest.mark.parametrize("kind", [*KINDS, "mixed"])
def test_each_fault_kind_is_found_exactly(built, kind):
    lake, _, variants = built
    made = variants[kind]
    listed = made.manifest["faults"]["count"]
    assert listed > 0
    for against in (None, lake.root):
        report = replay_check(made.path, against=against)
        assert report.ok, [c for c in report.checks if not c.ok]
        assert report.count("found") == listed
        assert report.count("not found") == report.count("unexpected") == 0
        if kind in KINDS:
            assert {f.kind for f in report.findings} == {kind}


def _doctored(made, tmp_path: Path, edit) -> Path:
    """The variant and its clean source in tmp_path, the manifest changed by `edit`."""
    for p in (made.path, made.path.parent / made.manifest["source"]["file"]):
        shutil.copy(p, tmp_path / p.name)
    doc = json.loads(made.manifest_path.read_text())
    edit(doc)
    (tmp_path / made.manifest_path.name).write_text(json.dumps(doc))
    return tmp_path / made.path.name


@pytest.mark.parametrize("kind", list(KINDS))
def test_unlisted_faults_are_found_with_their_kind(built, kind, tmp_path):
    made = built[2][kind]
    path = _doctored(made, tmp_path, lambda d: d["faults"].update(injected=[]))
    report = replay_check(path)
    assert not report.ok and not report.level_ok("timing") and report.level_ok("data")
    unexpected = [f for f in report.findings if f.status == "unexpected"]
    assert len(unexpected) == made.manifest["faults"]["count"]
    assert {f.kind for f in unexpected} == {LOOKS_LIKE.get(kind, kind)}
    truth = {(g["topic"], k) for g in made.manifest["faults"]["injected"] for k in g["index"]}
    assert {(f.topic, f.index) for f in unexpected} == truth


def test_one_fault_missing_from_or_added_to_the_listing_fails(built, tmp_path):
    made = built[2]["mixed"]

    def drop_one(doc):
        g = doc["faults"]["injected"][0]
        for key in ("index", "orig_ns", "new_ns"):
            g[key] = g[key][1:]

    report = replay_check(_doctored(made, tmp_path, drop_one))
    assert not report.ok
    assert report.count("unexpected") == 1 and report.count("not found") == 0

    def add_one(doc):
        topic = "/sensor/gps/fix"
        first = made.manifest["topics"][topic]["first_ns"] + 5_000_000  # before the -5 ms offset
        doc["faults"]["injected"].append(
            {
                "step": 0,
                "kind": "drop",
                "topic": topic,
                "index": [0],
                "orig_ns": [first],
                "new_ns": [None],
                "spec": "gnss:drop=1%",
            }
        )

    (tmp_path / "b").mkdir()
    report = replay_check(_doctored(made, tmp_path / "b", add_one))
    assert not report.ok
    not_found = [f for f in report.findings if f.status == "not found"]
    assert len(not_found) == 1 and not_found[0].topic == "/sensor/gps/fix"
    assert report.count("unexpected") == 0

    def wrong_time(doc):
        doc["faults"]["injected"][0]["orig_ns"][0] += 1

    (tmp_path / "c").mkdir()
    report = replay_check(_doctored(made, tmp_path / "c", wrong_time))
    timing = next(c for c in report.checks if c.name == "faults")
    assert not timing.ok and "manifest: " in timing.detail and "the source says" in timing.detail


def _flip_one_byte(src: Path, out: Path, topic: str, index: int, at: int) -> None:
    """A copy of an MCAP with one byte of one message payload flipped (CRCs recomputed, so
    only the content can tell)."""
    content = read_mcap(src)
    with McapWriter(out, profile=content.profile, library=content.library) as w:
        schemas = {
            sid: w.add_schema(s.name, s.encoding, s.data) for sid, s in content.schemas.items()
        }
        chans = {
            c.id: w.add_channel(c.topic, c.message_encoding, schemas[c.schema_id], c.metadata)
            for c in content.channels.values()
        }
        rows = []
        for t, m in content.topics.items():
            for i, (log, data, order) in enumerate(zip(m.log, m.data, m.order, strict=True)):
                if t == topic and i == index:
                    data = bytearray(data)
                    data[at] ^= 0xFF
                rows.append((int(order), chans[m.channel_id], int(log), bytes(data)))
        for _, cid, log, data in sorted(rows):
            w.write_message(cid, log, data)
        for name, meta in content.metadata:
            w.add_metadata(name, meta)
        for a in content.attachments:
            w.add_attachment(a.name, a.media_type, a.data)


def test_content_level_catches_a_flipped_byte(built, tmp_path):
    lake, clean, _ = built
    scene = clean["adtf"]
    out = tmp_path / scene.path.name
    _flip_one_byte(scene.path, out, "/sensor/imu/data", 7, 200)  # a covariance float byte
    shutil.copy(scene.manifest_path, tmp_path / scene.manifest_path.name)
    report = replay_check(out)
    assert _levels(report) == {"data": True, "timing": True, "content": False}
    assert next(c for c in report.checks if c.name == "sha256").ok is False
    against = replay_check(out, against=lake.root)
    assert _levels(against) == {"data": True, "timing": True, "content": False}
    messages = next(c for c in against.checks if c.name == "messages")
    assert not messages.ok and "/sensor/imu/data #7" in messages.detail
    (bad,) = [f for f in against.findings if f.status == "unexpected"]
    assert (bad.topic, bad.index, bad.kind) == ("/sensor/imu/data", 7, "data")


def test_data_level_catches_counts_and_unreadable_files(built, tmp_path):
    scene = built[1]["adtf"]
    path = _doctored_clean(
        scene,
        tmp_path,
        lambda d: d["topics"]["/sensor/imu/data"].update(
            messages=d["topics"]["/sensor/imu/data"]["messages"] + 1
        ),
    )
    report = replay_check(path)
    counts = next(c for c in report.checks if c.name == "counts")
    assert not counts.ok and "/sensor/imu/data" in counts.detail
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    report = replay_check(path)
    assert not report.ok and not report.level_ok("data")
    assert [c.name for c in report.checks if c.level != "data"] == ["not run", "not run"]


def _doctored_clean(scene, tmp_path: Path, edit) -> Path:
    shutil.copy(scene.path, tmp_path / scene.path.name)
    doc = json.loads(scene.manifest_path.read_text())
    edit(doc)
    (tmp_path / scene.manifest_path.name).write_text(json.dumps(doc))
    return tmp_path / scene.path.name


def test_a_variant_without_its_source_cannot_pass(built, tmp_path):
    made = built[2]["drop"]
    shutil.copy(made.path, tmp_path / made.path.name)
    shutil.copy(made.manifest_path, tmp_path / made.manifest_path.name)
    report = replay_check(tmp_path / made.path.name)
    assert (
        not report.ok and "no source" in next(c for c in report.checks if c.name == "faults").detail
    )


def test_cli_exit_codes_and_reports(built, tmp_path, capsys):
    _, clean, variants = built
    assert main(["replay-check", str(clean["nclt"].path)]) == 0
    out = capsys.readouterr().out
    assert "RESULT: PASS" in out and "data     PASS" in out
    html_path = tmp_path / "r.html"
    made = variants["mixed"]
    assert main(["replay-check", str(made.path), "--json", "--html", str(html_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["faults"]["found"] == made.manifest["faults"]["count"]
    assert set(doc["levels"]) == {"data", "timing", "content"}
    page = html_path.read_text()
    assert '<svg id="timeline"' in page and 'class="fault found"' in page
    flipped = tmp_path / clean["adtf"].path.name
    _flip_one_byte(clean["adtf"].path, flipped, "/sensor/imu/data", 3, 200)
    shutil.copy(clean["adtf"].manifest_path, tmp_path / clean["adtf"].manifest_path.name)
    assert main(["replay-check", str(flipped)]) == 1
    assert "RESULT: FAIL" in capsys.readouterr().out
    assert main(["replay-check", str(tmp_path / "missing.mcap")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "lonely.mcap").write_bytes(clean["adtf"].path.read_bytes())
    assert main(["replay-check", str(tmp_path / "lonely.mcap")]) == 2
    assert "no manifest" in capsys.readouterr().err


def _camera_scene(folder: Path, frames: int, frame_bytes: int) -> SceneFile:
    """A clean scene of `frames` raw mono8 images of random pixels (so the file is about
    frames * frame_bytes) and its manifest, as build_scene writes them."""
    store = typestore(2)
    image, header, time = (
        store.types[n]
        for n in ("sensor_msgs/msg/Image", "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    schema = message_definition("sensor_msgs/msg/Image", 2)
    topic, width, height = "/camera/image_raw", 1024, frame_bytes // 1024
    rng = np.random.default_rng(4)
    t0, period = 1_700_000_000_000_000_000, 100_000_000
    path = folder / "big.mcap"
    with McapWriter(path, compression="none") as w:
        sid = w.add_schema(schema.name, schema.encoding, schema.text.encode())
        cid = w.add_channel(topic, "cdr", sid)
        for i in range(frames):
            t = t0 + i * period
            pixels = rng.integers(0, 256, width * height, np.uint8)
            msg = image(
                header(time(*divmod(t, 10**9)), "cam"), height, width, "mono8", 0, width, pixels
            )
            w.write_message(cid, t, bytes(store.serialize_cdr(msg, schema.name)))
    last, sha = t0 + (frames - 1) * period, sha256_file(path)
    manifest = {
        "kind": MANIFEST_KIND,
        "manifest_version": MANIFEST_VERSION,
        "scene_id": "big",
        "drive": "big",
        "variant": "clean",
        "window": {"start_ns": t0, "end_ns": last + 1},
        "file": {"name": path.name, "bytes": path.stat().st_size, "sha256": sha},
        "messages": frames,
        "topics": {
            topic: {"type": schema.name, "messages": frames, "first_ns": t0, "last_ns": last}
        },
        "source": None,
        "faults": None,
    }
    mpath = manifest_path_for(path)
    mpath.write_text(json.dumps(manifest))
    scene = Scene("big", "big", t0, last + 1)
    return SceneFile(scene, "clean", path, mpath, manifest, sha, path.stat().st_size)


def test_replay_memory_does_not_grow_with_the_scene_file(tmp_path):
    """Issue 16: a scene window has no length limit, so replay-check streams the variant and
    its clean source and keeps per message a few numbers and digests, never the payloads: its
    Python memory is bound by the MCAP chunk (4 MB, ~16 MB at the peak), not by the 2 x 64 MB
    it reads (the whole-file reader peaked above 128 MB here)."""
    clean = _camera_scene(tmp_path, frames=32, frame_bytes=2 << 20)
    made = build_variant(
        clean, VariantSpec("black", tuple(parse_compact("camera:black=2"))), tmp_path
    )
    assert min(clean.bytes, made.bytes) > 64 << 20
    tracemalloc.start()
    try:
        report = replay_check(made.path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.ok, [c for c in report.checks if not c.ok]
    assert report.reference == f"clean scene {clean.path.name}"
    assert report.count("found") == 2 and {f.kind for f in report.findings} == {"black"}
    assert peak < made.bytes / 3, f"peak {peak >> 20} MB of Python memory for {made.bytes >> 20} MB"

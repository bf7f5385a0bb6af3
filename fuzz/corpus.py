"""Seed material for the fuzz targets: the real files of bridge_lake_tests/data and small synthetic
files written by the project's own writers (`bridge_lake.synth`, `DatWriter`, the MCAP and
bag writers). Built once into a work folder and reused; each target picks its seeds here.

Seeds are kept small (tens of KB): libFuzzer mutates a few bytes at a time, so a short seed
puts every mutation near a structure the reader has to check.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTDATA = REPO / "bridge_lake_tests" / "data"
ADTF_TESTDATA = TESTDATA / "adtf"
NCLT_CALIBRATION = TESTDATA / "nclt" / "calibration.yaml"
EXTERNAL_ADTF = Path(os.environ.get("BRIDGE_LAKE_TESTDATA", REPO.parent / "shared" / "testdata"))
EXTERNAL_ADTF /= "adtf"


def testdata_dat_files() -> list[Path]:
    """The real ADTF recordings (every IFHD version the project reads): the repository's,
    plus those found in $BRIDGE_LAKE_TESTDATA/adtf (the GPL-2.0 ns file is kept out)."""
    found = {
        p.name: p
        for folder in (EXTERNAL_ADTF, ADTF_TESTDATA)
        for p in folder.glob("*")
        if p.suffix in (".dat", ".adtfdat") and p.is_file()
    }
    return sorted(found.values())


def testdata_descriptions() -> list[Path]:
    return sorted(ADTF_TESTDATA.glob("*.description"))


@functools.cache
def synth_adtf(work: Path) -> Path:
    """A quarter-second synthetic ADTF 3 drive (H.264 camera, CAN, lidar, GNSS, IMU)."""
    out = work / "synth" / "adtf"
    done = out / ".done"
    if not done.exists():
        from bridge_lake.synth.adtf import write_adtf_drive

        out.mkdir(parents=True, exist_ok=True)
        write_adtf_drive(out, minutes=0.004, seed=1, lidar_points=20, fps=5)
        done.touch()
    return next(out.glob("*.dat"))


@functools.cache
def synth_nclt(work: Path) -> Path:
    """A one-second synthetic NCLT session folder (every file kind, thinned)."""
    out = work / "synth" / "nclt"
    done = out / ".done"
    if not done.exists():
        from bridge_lake.synth.nclt import write_nclt_drive

        out.mkdir(parents=True, exist_ok=True)
        write_nclt_drive(out, minutes=0.02, seed=1, hits_per_rev=50, image_size=(16, 12))
        done.touch()
    return next(p for p in out.iterdir() if p.is_dir())


_WRITER_DDL = (
    "<struct name='P'><element name='a' type='tUInt16' arraysize='1' bytepos='1' "
    "byteorder='BE' alignment='2'/><element name='n' type='tUInt8' arraysize='1' bytepos='3'/>"
    "<element name='v' type='tInt8' arraysize='n' bytepos='4'/></struct>"
)


@functools.cache
def writer_dat_files(work: Path) -> list[Path]:
    """Small DatWriter files: ADTF 2 DDL and plain-type streams with their sidecar, ADTF 3
    anonymous, substream and media-description (serialized DDL) streams, triggers and type
    changes, for IFHD 0x0201, 0x0400 and 0x0500."""
    from bridge_lake.formats.adtf import Property, StreamType, parse_ddl
    from bridge_lake.formats.adtf.ddl_convert import convert
    from bridge_lake.formats.adtf.samples import SERIALIZER_MD
    from bridge_lake.formats.adtf.writer import DatWriter

    ddl = parse_ddl(_WRITER_DDL)
    out = work / "writer"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for version in (0x0201, 0x0400, 0x0500):
        path = out / f"w{version:04x}.dat"
        paths.append(path)
        if path.exists():
            continue
        with DatWriter(path, version=version) as w:
            typed = StreamType(
                "adtf/default",
                {
                    "md_struct": Property("cString", "P"),
                    "md_definitions": Property("cString", _WRITER_DDL),
                },
            )
            if version < 0x0400:
                a = w.add_stream("P", ddl=ddl, ddl_struct="P")
                b = w.add_stream("u8", major=0x0300, sub=5)
                c = None
            else:
                a = w.add_stream("a", stream_type=typed)
                b = w.add_stream("b")
                c = w.add_stream("md", stream_type=typed, serializer=SERIALIZER_MD)
                w.write_stream_type(
                    b, 0, StreamType("adtf/anonymous", {"k": Property("tUInt32", "1")})
                )
            for i in range(6):
                row = bytes([0, 0, i, 3, 1, 2, 3])
                ser = convert(ddl, "P", bytes([0, i, 3, 0, 1, 2, 3]), "deserialized", "serialized")
                w.write_sample(a, i * 1000, ser if version < 0x0400 else row)
                w.write_sample(
                    b, i * 1000 + 500, bytes([i]), substream_id=0 if version < 0x0400 else i % 2
                )
                if version >= 0x0400 and i % 3 == 0:
                    w.write_trigger(b, i * 1000 + 600)
                if c is not None:
                    w.write_sample(c, i * 1000 + 700, ser)
    return paths


def ddl_texts(work: Path) -> dict[str, bytes]:
    """Every DDL we have: ADTF 2 sidecars, the `md_definitions` of the real and synthetic
    ADTF 3 recordings, the writer's fragment."""
    from bridge_lake.formats.adtf import open_dat

    out = {p.name: p.read_bytes() for p in testdata_descriptions()}
    out["writer_fragment"] = _WRITER_DDL.encode()
    for path in [*testdata_dat_files(), synth_adtf(work)]:
        try:
            with open_dat(path, strict=False) as f:
                for s in f.streams:
                    defs = s.stream_type.properties.get("md_definitions") if s.stream_type else None
                    if defs is not None:
                        out.setdefault(_digest(defs.value.encode()), defs.value.encode())
        except Exception:  # noqa: S112 - a source that does not open is simply not a seed
            continue
    return out


def ddl_sample_sets(work: Path) -> list[tuple[bytes, str, str, list[bytes]]]:
    """(DDL text, struct, layout, the first samples' bytes) of every DDL-described stream of
    the real and synthetic recordings: real samples for the decoder's seeds."""
    from bridge_lake.formats.adtf import open_dat
    from bridge_lake.formats.adtf.ddl import render_ddl

    out = []
    paths = [*testdata_dat_files(), synth_adtf(work), *writer_dat_files(work)]
    for path in paths:
        try:
            with open_dat(path, strict=False) as f:
                for s in f.streams:
                    if s.ddl is None or s.ddl_struct is None:
                        continue
                    table = f.sample_table(s.stream_id)
                    view = f.view
                    samples = [
                        bytes(view[o : o + n])
                        for o, n in zip(table["offset"][:3], table["length"][:3], strict=True)
                    ]
                    layout = s.stored_layout or "deserialized"
                    out.append((render_ddl(s.ddl).encode(), s.ddl_struct, layout, samples))
        except Exception:  # noqa: S112 - a source that does not open is simply not a seed
            continue
    return out


@functools.cache
def small_mcaps(work: Path) -> list[Path]:
    """MCAP files as the exports write them: ROS 2 CDR (Imu with header stamps, a String),
    ROS 1, JSON and protobuf channels, chunked and compressed or not."""
    import numpy as np
    from mcap.writer import CompressionType, Writer
    from mcap_ros2.writer import Writer as Ros2Writer

    out = work / "mcap"
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "ros2.mcap", out / "mixed.mcap"]
    if all(p.exists() for p in paths):
        return paths
    imu_schema = (
        "std_msgs/Header header\n"
        + "\n".join(f"float64 {n}" for n in ("ax", "ay", "az"))
        + "\n================================================================================\n"
        + (
            "MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
            "================================================================================\n"
            "MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
        )
    )
    with paths[0].open("wb") as f:
        w = Ros2Writer(f, compression=CompressionType.ZSTD)
        schema = w.register_msgdef("test_msgs/msg/Accel", imu_schema)
        text = w.register_msgdef("std_msgs/msg/String", "string data")
        for i in range(5):
            t = 1_000_000_000 + i * 10_000_000
            stamp = {"sec": t // 10**9, "nanosec": t % 10**9}
            msg = {"header": {"stamp": stamp, "frame_id": "imu"}, "ax": i, "ay": 0.5, "az": 9.8}
            w.write_message("/imu", schema, msg, log_time=t, publish_time=t)
            w.write_message("/text", text, {"data": f"m{i}"}, log_time=t + 1, publish_time=t)
        w.finish()
    with paths[1].open("wb") as f:
        w = Writer(f, compression=CompressionType.NONE)
        w.start(profile="", library="bridge_lake fuzz seeds")
        js = w.register_schema("Row", "jsonschema", json.dumps({"type": "object"}).encode())
        jc = w.register_channel("/adtf/row", "json", js)
        r1 = w.register_schema("std_msgs/String", "ros1msg", b"string data")
        rc = w.register_channel("/ros1", "ros1", r1)
        for i in range(4):
            t = 2_000_000_000 + i * 1_000_000
            w.add_message(jc, log_time=t, data=json.dumps({"i": i}).encode(), publish_time=t)
            data = np.uint32(2).tobytes() + b"m" + bytes([48 + i])
            w.add_message(rc, log_time=t, data=data, publish_time=t)
        w.add_metadata("bridge_lake.export", {"drive": "seed"})
        w.add_attachment(0, 0, "rig.yaml", "text/yaml", b"vehicle: seed\n")
        w.finish()
    return paths


@functools.cache
def small_bag1(work: Path) -> Path:
    """A ROS 1 bag (rosbags' writer) with an Imu topic, LZ4 chunks."""
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_typestore

    path = work / "bag1" / "seed.bag"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    store = get_typestore(Stores.ROS1_NOETIC)
    Imu = store.types["sensor_msgs/msg/Imu"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    Quat = store.types["geometry_msgs/msg/Quaternion"]
    Vec = store.types["geometry_msgs/msg/Vector3"]
    import numpy as np

    w = Writer(path)
    w.set_compression(Writer.CompressionFormat.LZ4)
    with w:
        conn = w.add_connection("/imu", Imu.__msgtype__, typestore=store)
        for i in range(4):
            t = 3_000_000_000 + i * 10_000_000
            msg = Imu(
                Header(i, Time(t // 10**9, t % 10**9), "imu"),
                Quat(0.0, 0.0, 0.0, 1.0),
                np.zeros(9),
                Vec(0.0, 0.0, 0.1 * i),
                np.zeros(9),
                Vec(0.0, 0.0, 9.8),
                np.zeros(9),
            )
            w.write(conn, t, store.serialize_ros1(msg, Imu.__msgtype__))
    return path


@functools.cache
def scene(work: Path) -> tuple[Path, Path]:
    """A clean scene file and its manifest as `scenes.sets` writes them (hand-made from the
    ROS 2 seed MCAP: counts, first/last times and sha256 are the file's)."""
    from bridge_lake.scenes.faults import read_mcap
    from bridge_lake.scenes.sets import MANIFEST_KIND, MANIFEST_VERSION

    folder = work / "scene"
    folder.mkdir(parents=True, exist_ok=True)
    path, manifest = folder / "seed-scene.mcap", folder / "seed-scene.json"
    if manifest.exists():
        return path, manifest
    path.write_bytes(small_mcaps(work)[0].read_bytes())
    content = read_mcap(path)
    topics = {
        t: {
            "type": m.type,
            "messages": len(m.log),
            "first_ns": int(m.log.min()),
            "last_ns": int(m.log.max()),
        }
        for t, m in sorted(content.topics.items())
    }
    first = min(v["first_ns"] for v in topics.values())
    last = max(v["last_ns"] for v in topics.values())
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    doc = {
        "kind": MANIFEST_KIND,
        "manifest_version": MANIFEST_VERSION,
        "scene_id": "seed-scene",
        "drive": "seed",
        "variant": "clean",
        "window": {"start_ns": first, "end_ns": last + 1, "seconds": (last + 1 - first) / 1e9},
        "file": {"name": path.name, "bytes": path.stat().st_size, "sha256": sha},
        "messages": sum(v["messages"] for v in topics.values()),
        "topics": topics,
        "source": None,
        "faults": None,
    }
    manifest.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path, manifest


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]

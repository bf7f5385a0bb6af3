"""`bridge-lake export` and `bridge-lake health` as a user runs them: files, exit codes,
one-line errors; health on a bag another tool wrote; TUM trajectories; bag variants."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from rosbags.rosbag1 import Writer as Bag1Writer
from rosbags.typesys import Stores, get_typestore

from bridge_lake.cli import main
from bridge_lake.export.health import Kind, check_file
from bridge_lake_tests.export.test_export import read_back


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_export_then_health_from_the_command_line(synthetic_lake, tmp_path, capsys):
    lake, drive = synthetic_lake.lake.root, synthetic_lake.drives["adtf"].drive_id
    out = tmp_path / "d.mcap"
    rc, stdout, _ = run(capsys, "export", "--lake", lake, "--drive", drive, "--out", out, "--quiet")
    assert rc == 0 and out.is_file() and "/sensor/lidar/points" in stdout and "MB" in stdout
    rc, _, err = run(capsys, "export", "--lake", lake, "--drive", drive, "--out", out)
    assert rc == 2 and err.strip().endswith("exists; pass --force to overwrite it")
    assert err.count("\n") == 1 and "Traceback" not in err
    html = tmp_path / "h.html"
    rc, stdout, _ = run(capsys, "health", out, "--json", "--html", html)
    report = json.loads(stdout)
    assert rc == 0 and report["ok"] and report["topics"]["/sensor/imu/data"]["messages"] > 0
    page = html.read_text()
    assert 'id="timeline"' in page and "/vehicle/can_0" in page
    # errors say what exists, in one line
    rc, _, err = run(capsys, "export", "--lake", lake, "--drive", "nope", "--out", tmp_path / "x")
    assert rc == 2 and "drives:" in err and drive in err
    rc, _, err = run(capsys, "export", "--lake", lake, "--drive", drive, "--out",
                     tmp_path / "x.mcap", "--topics", "/camera*")  # fmt: skip
    assert rc == 2 and "no topic matches '/camera*'; topics:" in err
    rc, _, err = run(capsys, "export", "--lake", tmp_path / "no-lake", "--drive", drive, "--out",
                     tmp_path / "x.mcap")  # fmt: skip
    assert rc == 2 and "no lake at" in err
    rc, _, err = run(capsys, "health", tmp_path / "h.html")
    assert rc == 2 and "neither an MCAP file, a ROS 1 bag nor a ROS 2 bag folder" in err


def test_health_finds_problems_in_a_bag_written_by_another_tool(tmp_path, capsys):
    """A ROS 1 bag written with rosbags: a header stamp goes backwards, another differs from
    its log time (readers order bags by log time, so that is where disorder shows)."""
    store = get_typestore(Stores.ROS1_NOETIC)
    path = tmp_path / "foreign.bag"
    w = Bag1Writer(path)
    w.open()
    Imu = store.types["sensor_msgs/msg/Imu"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    V3 = store.types["geometry_msgs/msg/Vector3"]
    Q = store.types["geometry_msgs/msg/Quaternion"]
    conn = w.add_connection("/imu", "sensor_msgs/msg/Imu", typestore=store)
    times = [10**18 + i * 10**7 for i in range(50)]
    for i, t in enumerate(times):
        stamp = {30: times[29] - 5, 40: t + 1}.get(i, t)
        msg = Imu(
            Header(i, Time(stamp // 10**9, stamp % 10**9), "imu"),
            Q(0, 0, 0, 1), np.zeros(9), V3(0, 0, 0), np.zeros(9), V3(0, 0, 9.8), np.zeros(9),
        )  # fmt: skip
        w.write(conn, t, store.serialize_ros1(msg, "sensor_msgs/msg/Imu"))
    w.close()
    health = check_file(path)
    (t,) = health.topics.values()
    assert t.messages == 50 and t.decoded == 50 and t.stamp_mismatches == 2
    assert not health.ok and "header stamps go backwards 1 times" in map(str, t.problems)
    kinds = {(p.kind, p.topic, p.severity) for p in t.problems}
    assert kinds == {
        (Kind.STAMPS_BACKWARDS, t.topic, "error"),
        (Kind.STAMP_MISMATCH, t.topic, "error"),
    }
    rc, stdout, _ = run(capsys, "health", path)
    assert rc == 1 and "PROBLEMS" in stdout and "2 header stamps differ" in stdout
    # the kind is read from the content, not the name; an export's expectations come back
    # as typed problems (a rate is a warning: the data is whole)
    renamed = path.rename(tmp_path / "foreign.recording")
    expected = check_file(
        renamed, expected_counts={"/imu": 49, "/gone": 3}, expected_rates={"/imu": 50.0}
    )
    assert expected.format == "bag1"
    (t,) = expected.topics.values()
    by_kind = {p.kind: p for p in t.problems}
    assert by_kind[Kind.COUNT].message == "50 messages, expected 49"
    assert by_kind[Kind.RATE].severity == "warn" and by_kind[Kind.RATE].topic == "/imu"
    assert [(p.kind, p.topic) for p in expected.problems] == [(Kind.MISSING, "/gone")]


@pytest.mark.parametrize(
    ("fmt", "extra"),
    [
        ("bag2", ["--storage", "sqlite3", "--compression", "none"]),
        ("bag1", ["--compression", "bz2"]),
        ("mcap", ["--compression", "lz4", "--encoding", "ros1"]),
    ],
)
def test_other_storages_and_compressions(synthetic_lake, tmp_path, capsys, fmt, extra):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["nclt"].drive_id
    out = tmp_path / ("out.bag" if fmt == "bag1" else "out" if fmt == "bag2" else "out.mcap")
    args = ["export", "--lake", lake.root, "--drive", drive, "--out", out, "--format", fmt]
    rc, _, err = run(capsys, *args, "--topics", "/imu/data", "--quiet", *extra)
    assert rc == 0, err
    health = check_file(out)
    assert health.ok and health.topics["/imu/data"].messages == len(
        read_back(out, "ros1" if fmt == "bag1" or "ros1" in extra else "ros2")["/imu/data"]
    )
    want = {"bag2": "none", "bag1": "bz2", "mcap": "lz4"}[fmt]
    assert health.compression.startswith(want)
    if fmt == "bag2":
        assert list(out.glob("*.db3"))


def test_tum_trajectories(synthetic_lake, tmp_path, capsys):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["nclt"].drive_id
    rc, stdout, _ = run(capsys, "export", "--lake", lake.root, "--drive", drive, "--format", "tum",
                        "--out", tmp_path)  # fmt: skip
    assert rc == 0 and "poses.tum" in stdout and "ground_truth.tum" in stdout
    rows = np.loadtxt(tmp_path / "poses.tum")
    poses = lake.read_partition("calibrated", "poses", drive)
    assert rows.shape == (poses.num_rows, 8)
    t = poses.column("time_ns").to_numpy()
    line = (tmp_path / "poses.tum").read_text().splitlines()[1]
    assert line.split()[0] == f"{t[0] // 10**9}.{t[0] % 10**9:09d}"  # exact ns, no float
    np.testing.assert_allclose(rows[:, 1], poses.column("x_m").to_numpy(), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rows[:, 4:], axis=1), 1, atol=1e-8)
    gt = np.loadtxt(tmp_path / "ground_truth.tum")
    valid = lake.read_partition("normalized", "ground_truth", drive)
    valid = valid.filter(pc.is_finite(valid.column("x_m")).fill_null(False))
    assert gt.shape == (valid.num_rows, 8)
    assert Path(tmp_path / "poses.tum").read_text().startswith("# timestamp tx ty tz qx qy qz qw")


def test_health_reads_an_mcap_in_file_order_one_chunk_at_a_time(tmp_path):
    """Written by mcap_ros2 (not us): 24 MB of messages in 1 MB chunks, one log time stepping
    back. health must see the step (file order, not log-time order) and hold about a chunk:
    the seeking reader's file-order mode queued every message first (1.5 GB of RSS for a
    5-minute drive's export)."""
    import tracemalloc

    from mcap_ros2.writer import Writer as Ros2Writer

    path = tmp_path / "foreign.mcap"
    noise = np.random.default_rng(1).bytes(500 * 24_000).hex()  # incompressible text
    with path.open("wb") as f:
        w = Ros2Writer(f)
        schema = w.register_msgdef("std_msgs/msg/String", "string data")
        for i in range(24_000):
            t = 1_000_000_000 + i * 1_000_000 - (5_000_000 if i == 12_000 else 0)
            data = noise[i * 1000 : (i + 1) * 1000]
            w.write_message("/text", schema, {"data": data}, log_time=t, publish_time=t)
        w.finish()
    assert path.stat().st_size > 12e6  # zstd halves the hex text
    tracemalloc.start()
    try:
        health = check_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    t = health.topics["/text"]
    assert (t.messages, t.decoded, t.backwards) == (24_000, 24_000, 1)
    assert peak < 8e6, f"{peak / 1e6:.0f} MB traced while reading 24 MB of messages"


def test_the_same_mapping_from_two_places_gives_the_same_bytes(synthetic_lake, tmp_path, capsys):
    """The export names its mapping by file name, sha256 and whether it is shipped, not by
    where the file lay (the exports asset writes a drive's captured mapping into a temp
    folder): the same mapping copied to two folders exports byte-identical MCAP files."""
    from bridge_lake.export.mapping import default_mapping_path
    from bridge_lake.formats.ros.readers import open_recording

    lake, drive = synthetic_lake.lake.root, synthetic_lake.drives["adtf"].drive_id
    text = default_mapping_path("adtf").read_bytes()
    outs = []
    for where in ("a", "b/deeper"):
        mapping = tmp_path / where / "mine.yaml"
        mapping.parent.mkdir(parents=True)
        mapping.write_bytes(text)
        out = tmp_path / f"{where.replace('/', '_')}.mcap"
        rc, _, err = run(capsys, "export", "--lake", lake, "--drive", drive, "--out", out,
                         "--mapping", mapping, "--quiet")  # fmt: skip
        assert rc == 0, err
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    with open_recording(tmp_path / "a.mcap") as rec:
        meta = dict(rec.metadata())["bridge_lake.export"]
    assert meta["mapping_file"] == "mine.yaml" and meta["mapping_shipped"] == "false"
    assert len(meta["mapping_sha256"]) == 64 and str(tmp_path) not in str(meta)


@pytest.mark.parametrize(
    ("name", "magic"),
    [("x.bag", b"#ROSBAG V2.0\n"), ("X.BAG", b"#ROSBAG V2.0\n"), ("x.mcap", b"\x89MCAP0\r\n")],
)
def test_the_out_suffix_picks_the_format(synthetic_lake, tmp_path, capsys, name, magic):
    """--out x.bag without --format is a ROS 1 bag (it was an MCAP under that name; real
    `rosbag` reads it: test_bag1_rosbag), x.mcap an MCAP."""
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["nclt"].drive_id
    out = tmp_path / name
    args = ["export", "--lake", lake.root, "--drive", drive, "--out", out, "--quiet"]
    rc, stdout, err = run(capsys, *args, "--topics", "/imu/data", "--end", "2")
    assert rc == 0, err
    assert out.read_bytes()[: len(magic)] == magic
    want = "bag1 (ros1)" if magic.startswith(b"#ROSBAG") else "mcap (ros2)"
    assert f": {want}," in stdout


@pytest.mark.parametrize(
    ("name", "fmt", "says"),
    [
        ("x.bag", "mcap", "--out x.bag names a ROS 1 bag (--format bag1), but --format is mcap: "
         "name it x.mcap, or leave out --format"),
        ("x.mcap", "bag1", "--out x.mcap names an MCAP file (--format mcap), but --format is "
         "bag1: name it x.bag, or leave out --format"),
        ("x.bag", "bag2", "a ROS 2 bag is a folder: give it a name without a suffix"),
        ("x.mcap", "tum", "TUM trajectories go into a folder"),
    ],
)  # fmt: skip
def test_a_suffix_that_contradicts_the_format_is_refused(
    synthetic_lake, tmp_path, capsys, name, fmt, says
):
    lake, drive = synthetic_lake.lake, synthetic_lake.drives["nclt"].drive_id
    out = tmp_path / name
    rc, _, err = run(capsys, "export", "--lake", lake.root, "--drive", drive, "--out", out,
                     "--format", fmt, "--quiet")  # fmt: skip
    assert rc == 2 and says in err and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_a_name_that_contradicts_the_request(synthetic_lake, tmp_path):
    from bridge_lake.export.exporter import ExportRequest, export_drive
    from bridge_lake.export.source import ExportError

    drive = synthetic_lake.drives["nclt"].drive_id
    with pytest.raises(ExportError, match="names a ROS 1 bag"):
        export_drive(synthetic_lake.lake, drive, tmp_path / "x.bag", ExportRequest())
    assert list(tmp_path.iterdir()) == []

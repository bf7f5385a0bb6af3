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
from bridge_lake.export.health import check_file
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
    assert not health.ok and "header stamps go backwards 1 times" in t.problems
    rc, stdout, _ = run(capsys, "health", path)
    assert rc == 1 and "PROBLEMS" in stdout and "2 header stamps differ" in stdout


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

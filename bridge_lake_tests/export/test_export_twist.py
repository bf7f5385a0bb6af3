"""NCLT /odom and /ground_truth carry the body's motion: the twist (in child_frame_id, the
NCLT body axes x forward, y right, z down) against what the synthetic drive's generator wrote
from its known trajectory, decoded by readers we did not write; covariances say "unknown",
never zeros-with-certainty.

Oracles (files the generator wrote, not the lake): wheels.csv, left/right speeds of the known
speed and heading rate (v = (l + r) / 2, sd ≈ 7 mm/s); kvh.csv, the integrated heading without
noise (its derivative is the heading rate). Synthetic odometry is the truth scaled by 1.01.
Measured on a 1.5-min drive with the planted loop (seed 3): forward speed off the wheels by
4.7 mm/s median, 27 mm/s max; yaw rate off the KVH by 0.08 mrad/s median, 0.5 mrad/s at the
99th percentile, 74 mrad/s max on the 8 samples at the generator's motion steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory as ProtobufDecoders
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.messages import UNKNOWN_COVARIANCE, typestore
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake.synth import synthesize
from bridge_lake.synth.nclt import PLANT_MIN_MINUTES, TRACK_WIDTH
from bridge_lake_tests.support import register

NS = 1_000_000_000
TOPICS = ("/odom", "/ground_truth")
ODOMETRY_SCALE = {"/odom": 1.01, "/ground_truth": 1.0}
"""The generator writes odometry as the truth scaled by 1.01 (a slow drift)."""


def _csv(drive, name: str) -> np.ndarray:
    """The generator's CSV rows, fault-injected lines (text, short rows) left out."""
    rows = np.genfromtxt(next(drive.path.rglob(name)), delimiter=",", invalid_raise=False)
    return rows[np.isfinite(rows).all(axis=1)]


@pytest.fixture(scope="module")
def nclt(tmp_path_factory):
    """A drive long enough for the planted sharp turn (a 2 m loop at 0.5 rad/s): the campus
    loop alone turns too slowly to tell a yaw rate from none. (lake, drive)"""
    root = tmp_path_factory.mktemp("twist_lake")
    (made,) = synthesize(
        root / "landing", drives=1, minutes=PLANT_MIN_MINUTES, seed=3, source="nclt", light=True
    )
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    register(landing, lake, made.drive_id)
    assert normalize_drive(landing, lake, made.drive_id, made.source)[1]
    assert calibrate_drive(lake, made.drive_id)[1]
    return lake, made


@pytest.fixture(scope="module")
def motion(nclt):
    """The generator's known motion: wheel speed and heading rate, by time (ns)."""
    drive = nclt[1]
    wheels, kvh = _csv(drive, "wheels.csv"), _csv(drive, "kvh.csv")
    return {
        "speed": (wheels[:, 0] * 1000, (wheels[:, 1] + wheels[:, 2]) / 2),
        "wheel_rate": (wheels[:, 0] * 1000, (wheels[:, 1] - wheels[:, 2]) / TRACK_WIDTH),
        "rate": (kvh[:, 0] * 1000, np.gradient(kvh[:, 1]) / np.gradient(kvh[:, 0] / 1e6)),
    }


def _ros2_mcap(path: Path) -> dict[str, list]:
    with path.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()], validate_crcs=True)
        out: dict[str, list] = {}
        for _, channel, _, m in reader.iter_decoded_messages(topics=list(TOPICS)):
            out.setdefault(channel.topic, []).append(m)
    return out


def _bag1(path: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    with AnyReader([path], default_typestore=typestore(1)) as reader:
        conns = [c for c in reader.connections if c.topic in TOPICS]
        for conn, _, raw in reader.messages(connections=conns):
            out.setdefault(conn.topic, []).append(reader.deserialize(raw, conn.msgtype))
    return out


def _twists(msgs: list) -> dict[str, np.ndarray]:
    def stamp(m):
        s = m.header.stamp
        return s.sec * NS + (s.nanosec if hasattr(s, "nanosec") else s.nsec)

    def vec(v):
        return [v.x, v.y, v.z]

    return {
        "t": np.array([stamp(m) for m in msgs], np.int64),
        "linear": np.array([vec(m.twist.twist.linear) for m in msgs]),
        "angular": np.array([vec(m.twist.twist.angular) for m in msgs]),
        "twist_cov": np.array([list(m.twist.covariance) for m in msgs]),
        "pose_cov": np.array([list(m.pose.covariance) for m in msgs]),
    }


@pytest.fixture(scope="module")
def exported(nclt, tmp_path_factory):
    """/odom and /ground_truth as ROS 2 MCAP (read by mcap_ros2) and ROS 1 bag (rosbags)."""
    lake, drive = nclt[0], nclt[1].drive_id
    out = tmp_path_factory.mktemp("twist")
    made = {}
    for fmt, enc, read in (("mcap", "ros2", _ros2_mcap), ("bag1", "ros1", _bag1)):
        path = out / f"odom-{enc}.{'mcap' if fmt == 'mcap' else 'bag'}"
        export_drive(lake, drive, path, ExportRequest(format=fmt, encoding=enc, topics=TOPICS))
        made[enc] = {topic: _twists(msgs) for topic, msgs in read(path).items()}
    return made


@pytest.mark.parametrize("enc", ["ros2", "ros1"])
@pytest.mark.parametrize("topic", TOPICS)
def test_twist_is_the_known_motion(exported, motion, topic, enc):
    got = exported[enc][topic]
    t, lin, ang = got["t"], got["linear"], got["angular"]
    ok = np.isfinite(lin).all(axis=1)
    assert ok.sum() >= len(t) - 3  # only the ground truth's NaN pose rows have no twist
    assert np.isfinite(ang[ok]).all()
    speed = ODOMETRY_SCALE[topic] * np.interp(t[ok], *motion["speed"])
    assert speed.max() > 1.0  # the drive moves
    # forward speed in the body x axis; the wheels' own noise is sd ≈ 7 mm/s
    err = np.abs(lin[ok, 0] - speed)
    assert np.median(err) < 0.01 and err.max() < 0.05
    assert np.abs(lin[ok, 1]).max() < 0.01  # no sideways slip
    # yaw rate about the body z axis (down): positive = right turn, as the heading grows
    rate = np.interp(t[ok], *motion["rate"])
    assert rate.max() > 0.4  # the planted loop: a right turn at 0.5 rad/s
    err = np.abs(ang[ok, 2] - rate)
    assert np.median(err) < 1e-3 and np.percentile(err, 99) < 2e-3
    # The generator steps its motion four times (into and out of the loop, the pitch jump of
    # the hard brake, which tilts body z away from the vertical the KVH turns about); there
    # two derivatives sampled at other times differ by up to 0.08 rad/s, on 2 samples each.
    assert (err > 0.02).sum() <= 10 and err.max() < 0.1
    # the wheels agree on the turn direction (a second, noisier oracle)
    wheel_rate = np.interp(t[ok], *motion["wheel_rate"])
    assert np.corrcoef(ang[ok, 2], wheel_rate)[0, 1] > 0.8


@pytest.mark.parametrize("enc", ["ros2", "ros1"])
def test_covariances_say_unknown_not_certain(nclt, exported, enc):
    """Twist covariance: unknown on every message. Pose covariance: the lake's where it has
    one (odometry_cov on every /odom row), unknown where it has none (NCLT gives the ground
    truth's only at SLAM nodes, the synthetic nodes fall between its rows)."""
    lake, drive = nclt[0], nclt[1].drive_id
    for topic, table, stream in (
        ("/odom", "odometry", "odometry_mu_100hz"),
        ("/ground_truth", "ground_truth", "groundtruth"),
    ):
        got = exported[enc][topic]
        n = len(got["t"])
        np.testing.assert_array_equal(got["twist_cov"], np.tile(UNKNOWN_COVARIANCE, (n, 1)))
        cov = _lake(lake, table, drive, stream).column("covariance")
        known = np.asarray(cov.is_valid().to_numpy(zero_copy_only=False), bool)
        assert len(known) == n and not (got["pose_cov"] == 0).all(axis=1).any()
        np.testing.assert_array_equal(
            got["pose_cov"][~known], np.tile(UNKNOWN_COVARIANCE, ((~known).sum(), 1))
        )
        upper = np.triu_indices(6)
        values = np.array(cov.filter(pc.is_valid(cov)).to_pylist(), np.float64).reshape(-1, 21)
        np.testing.assert_array_equal(got["pose_cov"][known].reshape(-1, 6, 6)[:, *upper], values)
        if topic == "/odom":
            assert known.all()


def _lake(lake, table: str, drive: str, stream: str) -> pa.Table:
    rows = lake.read_partition("normalized", table, drive)
    return rows.filter(pc.equal(rows.column("stream"), stream))


def test_lake_twist_is_what_goes_out(nclt, exported):
    """The lake's twist columns are the messages' twist, value for value (null = NaN)."""
    lake, drive = nclt[0], nclt[1].drive_id
    for topic, table, stream in (
        ("/odom", "odometry", "odometry_mu_100hz"),
        ("/ground_truth", "ground_truth", "groundtruth"),
    ):
        rows = _lake(lake, table, drive, stream)
        got = exported["ros2"][topic]
        np.testing.assert_array_equal(got["t"], rows.column("time_ns").to_numpy())
        for kind in ("linear", "angular"):
            cols = [
                rows.column(f"{kind}_velocity_{a}").to_numpy(zero_copy_only=False) for a in "xyz"
            ]
            np.testing.assert_array_equal(got[kind], np.stack(cols, -1).astype(np.float64))


def test_protobuf_odometry_velocities(nclt, exported, tmp_path):
    """foxglove.Odometry gets the same velocities; its covariances follow that schema's own
    "zero if unknown"."""
    lake, drive = nclt[0], nclt[1].drive_id
    path = tmp_path / "fox.mcap"
    export_drive(lake, drive, path, ExportRequest(encoding="protobuf", topics=["/odom"]))
    with path.open("rb") as f:
        reader = make_reader(f, decoder_factories=[ProtobufDecoders()], validate_crcs=True)
        msgs = [m for *_, m in reader.iter_decoded_messages(topics=["/odom"])]
    ros = exported["ros2"]["/odom"]
    assert len(msgs) == len(ros["t"])
    lin = np.array([[m.linear_velocity.x, m.linear_velocity.y, m.linear_velocity.z] for m in msgs])
    ang = np.array(
        [[m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z] for m in msgs]
    )
    np.testing.assert_array_equal(lin, ros["linear"])
    np.testing.assert_array_equal(ang, ros["angular"])
    assert all(list(m.velocity_covariance) == [0.0] * 36 for m in msgs)
    known = np.array([list(m.pose_covariance) for m in msgs])
    np.testing.assert_array_equal(known, ros["pose_cov"])  # odometry_cov joined on every row

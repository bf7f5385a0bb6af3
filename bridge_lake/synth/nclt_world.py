"""The simulated world of the synthetic NCLT session: its constants, the rig's mounts, the
trajectory every sensor samples and the writer that records each file in the truth.

Split from synth/nclt.py (which writes the session) so the lidar simulation
(synth/nclt_lidar.py) shares it without an import cycle."""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bridge_lake.calibrate.rig import SHIPPED_RIGS, Rig, load_rig
from bridge_lake.geometry import Transform

FAULTS = frozenset(
    {
        "bad_magic",
        "truncated_packet",
        "hits_past_eof",
        "csv_short_row",
        "csv_text_field",
        "duplicate_utime",
        "backward_utime",
        "missing_optional",
    }
)
"""Fault switches of spec §14; each is applied to one named file and recorded in the truth."""
TRUTH_FILE = "_synth_truth.json"
DEFAULT_DATES = ("2012-01-08", "2012-02-04", "2012-03-17", "2012-05-26", "2012-08-04", "2013-01-10")
DEFAULT_IMAGE_SIZE = (101, 77)
"""Stored (sideways) size of synthetic Ladybug3 images: 1616x1232 / 16, RGB. Pass
`image_size=C.LB3_STORED_SIZE` for the full size (6 MB per image uncompressed)."""
DEFAULT_HITS_PER_REV = 50_000
"""Realistic density (real revolutions hold 17k-70k hits); demos pass a few thousand."""

BASE_HZ = 200.0
"""Trajectory sampling rate; sensors interpolate it."""
PACKETS_PER_REV = 181
BLOCKS_PER_PACKET = 12
BLOCKS_PER_REV = PACKETS_PER_REV * BLOCKS_PER_PACKET
REV_US = 100_000
"""10 revolutions per second: a packet every 100 ms / 181 ≈ 552.5 µs."""
SEAM_PHASE_BLOCKS = 6
"""The scan seam falls in the middle of a packet, so readers must split packets hit by hit."""
MAST_HALF_WIDTH = np.radians(0.5)
RETURN_FRACTION = 0.93
"""Share of firing slots of this scene that return an echo (measured on it); sets the density."""
RIG = SHIPPED_RIGS / "nclt-segway.yaml"
"""The rig the sensors are mounted by (the same file the calibrated layer uses)."""

PLANT_MIN_MINUTES = 1.5
"""Sessions at least this long get the planted events (they need about 50 s around the
indoor segment and the natural stops); shorter ones keep every sensor at its real rate."""
EVENT_AT = {"hard_brake": 0.15, "sharp_turn": 0.30, "lidar_dropout": 0.80, "camera_black": 0.90}
"""Start of each planted event as a fraction of the drive (±1 % from the seed); a natural stop
that would fall on a planted motion event is left out."""
PLANT_MOTION = ("hard_brake", "sharp_turn")
INDOOR = (0.55, 0.68)
"""The indoor segment without GPS, as fractions of the drive (a planted GNSS outage)."""
BRAKE_DECEL, BRAKE_HOLD_S, REACCEL = 3.5, 1.5, 0.6
"""Planted hard brake: to a standstill at 3.5 m/s² (a natural stop peaks near 2 m/s²), held
1.5 s, then away at 0.6 m/s²."""
LOOP_RADIUS, LOOP_SPEED, LOOP_DECEL = 2.0, 1.0, 0.5
"""Planted sharp turn: a full loop of 2 m radius at 1 m/s (0.5 rad/s; the campus loop turns
at most ~0.1 rad/s), slowed into and out of at 0.5 m/s²."""
LIDAR_DROPOUT_S, BLACK_S = 3.0, 2.0
STOP_HALF_S = 4.0
"""A natural stop disturbs the speed for about ±4 s around its centre."""


@functools.cache
def nclt_rig() -> Rig:
    return load_rig(RIG)


def sensor_mount(frame: str) -> Transform:
    """T_body_sensor of an NCLT sensor, from the rig (NCLT's x_body_* numbers)."""
    return nclt_rig().frames[frame].transform


SENSOR_HEIGHT = 1.2
"""Velodyne above the ground, metres (body origin on the axle, 0.243 m above the ground)."""
AXLE_HEIGHT = SENSOR_HEIGHT + float(sensor_mount("velodyne").translation[2])
MAX_RANGE = 100.0
TRACK_WIDTH = 0.56
"""Segway wheel track, metres."""
GRAVITY = 9.81
EARTH_FIELD_NED = np.array([0.19, -0.02, 0.53])
"""Magnetic field near Ann Arbor in Gauss, north/east/down."""
RATES_HZ = {
    "groundtruth": 107.0,
    "odometry_mu_100hz": 100.0,
    "odometry_mu": 5.0,
    "ms25": 47.5,
    "kvh": 94.0,
    "wheels": 45.0,
    "gps_fix": 4.0,
    "gps_rtk": 2.5,
    "hokuyo_30m": 40.0,
    "hokuyo_4m": 10.0,
    "lb3": 5.0,
}


@dataclass(frozen=True)
class Trajectory:
    """Body pose in the local NED world at BASE_HZ; `at` interpolates it for any sensor."""

    t_us: np.ndarray
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    roll: np.ndarray
    pitch: np.ndarray
    heading: np.ndarray
    """Unwrapped, radians."""
    speed: np.ndarray
    indoor: tuple[int, int]
    """utime range without GPS reception."""
    stops: tuple[int, ...] = ()
    """utime of each natural stop's centre."""
    events: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Planted motion events: kind → utime window."""

    def at(self, utime: np.ndarray) -> dict[str, np.ndarray]:
        return {
            k: np.interp(utime, self.t_us, getattr(self, k))
            for k in ("x", "y", "z", "roll", "pitch", "heading", "speed")
        }


class Writer:
    """Writes files, applies fault switches and records each file in the truth."""

    def __init__(self, session: Path, truth: dict[str, object], faults: frozenset[str]) -> None:
        self.session = session
        self.truth = truth
        self.faults = faults
        self.paths: list[Path] = []

    def file(self, rel: str, data: bytes, **facts: object) -> None:
        path = self.session / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.paths.append(path)
        self.truth["files"][rel] = {"bytes": len(data), **facts}  # type: ignore[index]

    def fault(self, name: str, **facts: object) -> None:
        self.truth["faults"][name] = facts  # type: ignore[index]


def start_utime(date: str, rng: np.random.Generator) -> int:
    day = dt.datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=dt.UTC)
    seconds = 15 * 3600 + int(rng.integers(0, 4 * 3600))
    return int(day.timestamp() + seconds) * 1_000_000 + int(rng.integers(0, 1_000_000))


def make_trajectory(
    start: int,
    duration_s: float,
    rng: np.random.Generator,
    plant: np.random.Generator | None = None,
) -> Trajectory:
    """A superellipse loop (≈ 140 m x 90 m) driven with ramps, stops and gentle body motion;
    with `plant`, a hard brake and a sharp turn (a full loop off the path) as well."""
    n = int(duration_s * BASE_HZ) + 1
    t = np.arange(n) / BASE_HZ
    vmax = 1.5 + 0.3 * rng.random()
    ramp = np.clip(t / 4.0, 0, 1) * np.clip((duration_s - t) / 4.0, 0, 1)
    stops = np.ones(n)
    centres = rng.uniform(0.1, 0.9, size=max(1, int(duration_s // 90))) * duration_s
    loop_len = 2 * np.pi * LOOP_RADIUS
    loop_s = loop_len / LOOP_SPEED
    at: dict[str, float] = {}
    if plant is not None:
        jitter = plant.uniform(-0.01, 0.01, 2)
        at = {k: (EVENT_AT[k] + j) * duration_s for k, j in zip(PLANT_MOTION, jitter, strict=True)}
        # a natural stop where a planted event needs the Segway cruising is left out
        spans = [(at["hard_brake"] - 2.0, at["hard_brake"] + 7.0)]
        spans.append((at["sharp_turn"] - 5.0, at["sharp_turn"] + loop_s + 5.0))
        clear = [
            all(c + STOP_HALF_S <= lo or c - STOP_HALF_S >= hi for lo, hi in spans) for c in centres
        ]
        centres = centres[np.asarray(clear, dtype=bool)]
    for centre in centres:
        stops *= 1 - np.exp(-(((t - centre) / 3.0) ** 8))
    v = vmax * ramp * stops * (1 + 0.08 * np.sin(t / 7.0))
    planted: dict[str, tuple[float, float]] = {}
    if "hard_brake" in at:
        tb = at["hard_brake"]
        v0 = float(np.interp(tb, t, v))
        t_stop = tb + v0 / BRAKE_DECEL
        t_go = t_stop + BRAKE_HOLD_S
        cap = np.where(t < tb, np.inf, np.maximum(v0 - BRAKE_DECEL * (t - tb), 0.0))
        v = np.minimum(v, np.where(t > t_go, REACCEL * (t - t_go), cap))
        planted["hard_brake"] = (tb, t_stop)
    if "sharp_turn" in at:
        tl = at["sharp_turn"]
        v = np.minimum(
            v, LOOP_SPEED + LOOP_DECEL * np.maximum.reduce([tl - t, t - tl - loop_s, np.zeros(n)])
        )
    s = np.concatenate([[0.0], np.cumsum((v[1:] + v[:-1]) / 2) / BASE_HZ])
    path = s
    if "sharp_turn" in at:
        s_in = float(np.interp(at["sharp_turn"], t, s))
        path = s - np.clip(s - s_in, 0.0, loop_len)  # the campus path waits during the loop
    theta = np.linspace(0, 2 * np.pi, 4001)
    cx, cy = np.cos(theta), np.sin(theta)
    px = 70 * np.sign(cx) * np.abs(cx) ** 0.5 - 30.0
    py = 45 * np.sign(cy) * np.abs(cy) ** 0.5 + 20.0
    arc = np.concatenate([[0.0], np.cumsum(np.hypot(np.diff(px), np.diff(py)))])
    phase = rng.random() * arc[-1]
    sl = (path + phase) % arc[-1]
    x, y = np.interp(sl, arc, px), np.interp(sl, arc, py)
    dx, dy = (
        np.interp(sl + 0.5, arc, px) - np.interp(sl - 0.5, arc, px),
        np.interp(sl + 0.5, arc, py) - np.interp(sl - 0.5, arc, py),
    )
    heading = np.arctan2(dy, dx)
    if "sharp_turn" in at:
        inside = np.flatnonzero((s > s_in) & (s < s_in + loop_len))
        h, x0, y0 = heading[inside[0]], x[inside[0]], y[inside[0]]
        phi = (s[inside] - s_in) / LOOP_RADIUS  # a right turn (NED): heading grows
        x[inside] = x0 - LOOP_RADIUS * np.sin(h) + LOOP_RADIUS * np.sin(h + phi)
        y[inside] = y0 + LOOP_RADIUS * np.cos(h) - LOOP_RADIUS * np.cos(h + phi)
        heading[inside] = h + phi
        planted["sharp_turn"] = (float(t[inside[0]]), float(t[inside[-1]]))
    heading = np.unwrap(heading)
    accel = np.gradient(v, 1 / BASE_HZ)
    pitch = np.radians(1.0) * np.sin(t / 5.3) + 0.02 * accel
    roll = np.radians(0.8) * np.sin(t / 3.1 + 1.0)
    z = 0.3 * np.sin(2 * np.pi * sl / arc[-1])
    t_us = start + np.round(t * 1e6).astype(np.int64)
    indoor = (
        start + int(INDOOR[0] * duration_s * 1e6),
        start + int(INDOOR[1] * duration_s * 1e6),
    )
    return Trajectory(
        t_us,
        x,
        y,
        z,
        roll,
        pitch,
        heading,
        v,
        indoor,
        tuple(start + round(c * 1e6) for c in centres),
        {k: (start + round(a * 1e6), start + round(b * 1e6)) for k, (a, b) in planted.items()},
    )


def sample_times(
    traj: Trajectory, rate: float, rng: np.random.Generator, jitter: float = 0.05
) -> np.ndarray:
    """Sample utimes at `rate` with a little jitter, strictly increasing, inside the drive."""
    t0, t1 = int(traj.t_us[0]), int(traj.t_us[-1])
    period = 1e6 / rate
    k = int((t1 - t0) / period)
    steps = period * (1 + jitter * rng.uniform(-1, 1, size=k))
    t = t0 + int(rng.integers(0, int(period))) + np.round(np.cumsum(steps)).astype(np.int64)
    return t[t <= t1]

"""A faithful synthetic NCLT session (spec §14): every file, byte-exact, from one trajectory.

One simulated Segway drive (a campus loop near the ground-truth origin, 0-2 m/s with stops
and turns, a short indoor segment without GPS) is sampled by every sensor at its real rate,
so the files agree with each other and the same readers read synthetic and real sessions.
Output is deterministic for a seed. A `_synth_truth.json` beside the files records what was
written (counts, first/last utime, revolutions, injected faults with their byte ranges and
lines) so tests compare readers against the writer's own knowledge, not against a reader.

Conventions chosen where the real data is still to be verified (spec §15), documented here
and in the truth file: the MS25 accelerometer gives specific force in body axes (x forward,
y right, z down), so at rest it reads about -9.81 m/s² on z; positive heading rate is a right
turn (NED, z down), so the left wheel is the faster one; velodyne_sync files are named by the
utime of the first packet of their revolution; odometry rows are absolute poses starting at
the identity. Lidar points come from ray casting a simple scene (ground plane 1.2 m below the
sensor, building walls, poles); the robot's own mast hides ±0.5° around the scan seam behind
it, which keeps revolution membership unambiguous for tests.

Sessions of at least PLANT_MIN_MINUTES carry planted scene events at known times (a hard
brake, a sharp turn, a lidar dropout, black frames of one camera) beside the indoor segment
without GPS that every session has; the truth file lists them all under `events` (utime
windows, kind = the scene tag that must find it) and the natural stops under `stops`.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from bridge_lake.calibrate.rig import SHIPPED_RIGS, Rig, load_rig
from bridge_lake.formats.nclt import constants as C
from bridge_lake.formats.nclt.csv_tables import COLUMNS, COV_INDEX
from bridge_lake.formats.nclt.images import encode_baseline_tiff
from bridge_lake.geometry import Transform, quaternion_to_rpy, rpy_to_matrix

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
def _rig() -> Rig:
    return load_rig(RIG)


def _mount(frame: str) -> Transform:
    """T_body_sensor of an NCLT sensor, from the rig (NCLT's x_body_* numbers)."""
    return _rig().frames[frame].transform


SENSOR_HEIGHT = 1.2
"""Velodyne above the ground, metres (body origin on the axle, 0.243 m above the ground)."""
AXLE_HEIGHT = SENSOR_HEIGHT + float(_mount("velodyne").translation[2])
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


def write_nclt_drive(
    out_dir: Path,
    *,
    minutes: float,
    seed: int,
    date: str | None = None,
    faults: frozenset[str] = frozenset(),
    hits_per_rev: int = DEFAULT_HITS_PER_REV,
    image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE,
) -> list[Path]:
    """Write one NCLT session under `out_dir/<date>/` and return every file written.

    `hits_per_rev` sets the lidar density (file size ≈ 8 B x hits x 10/s); `image_size` the
    stored TIFF size (width, height). Unknown fault names are rejected.
    """
    unknown = set(faults) - FAULTS
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; known: {sorted(FAULTS)}")
    if minutes <= 0 or hits_per_rev < 1:
        raise ValueError("minutes must be > 0 and hits_per_rev >= 1")
    rng = np.random.default_rng(seed)
    date = date or DEFAULT_DATES[seed % len(DEFAULT_DATES)]
    session = out_dir / date
    session.mkdir(parents=True, exist_ok=True)
    start = _start_utime(date, rng)
    # planted events draw from a generator of their own: every other draw stays as it was
    plant = np.random.default_rng([seed, 0x5CE7E5]) if minutes >= PLANT_MIN_MINUTES else None
    traj = _trajectory(start, minutes * 60.0, rng, plant)
    scene = _Scene.make(traj, rng)
    events = [{"kind": "gnss_degraded", "start_utime": traj.indoor[0], "end_utime": traj.indoor[1]}]
    events += [{"kind": k, "start_utime": a, "end_utime": b} for k, (a, b) in traj.events.items()]
    dropout = black = None
    if plant is not None:
        at = {
            k: (EVENT_AT[k] + plant.uniform(-0.01, 0.01)) for k in ("lidar_dropout", "camera_black")
        }
        t0 = start + round(at["lidar_dropout"] * minutes * 60e6)
        dropout = (t0, t0 + round(LIDAR_DROPOUT_S * 1e6))
        t0 = start + round(at["camera_black"] * minutes * 60e6)
        black = (int(plant.integers(0, C.LB3_CAMERAS)), t0, t0 + round(BLACK_S * 1e6))
        events.append({"kind": "lidar_dropout", "start_utime": dropout[0], "end_utime": dropout[1]})
        events.append(
            {
                "kind": "camera_black",
                "start_utime": black[1],
                "end_utime": black[2],
                "camera": black[0],
            }
        )
    truth: dict[str, object] = {
        "date": date,
        "seed": seed,
        "start_utime": start,
        "files": {},
        "faults": {},
        "events": sorted(events, key=lambda e: e["start_utime"]),
        "stops": list(traj.stops),
    }
    w = _Writer(session, truth, faults)
    _write_csvs(w, traj, rng, date)
    _write_velodyne(w, traj, scene, rng, hits_per_rev, dropout)
    _write_hokuyo(w, traj, scene, rng)
    _write_images(w, traj, rng, image_size, black)
    conventions = {
        "accel": "specific force, body axes x fwd y right z down; about -9.81 m/s^2 on z at rest",
        "wheels": "positive heading rate = right turn: v_left = v + rate*track/2",
        "velodyne_sync_stamp": "utime of the first packet of the revolution",
        "odometry": "absolute poses from the identity",
        "velodyne_spin": "azimuth atan2(y, x) increases; seam at constants.REAR_AZIMUTH",
    }
    truth["conventions"] = conventions
    truth_path = session / TRUTH_FILE
    truth_path.write_text(json.dumps(truth, indent=1, sort_keys=True), encoding="utf-8")
    return [*w.paths, truth_path]


class _Writer:
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


def _start_utime(date: str, rng: np.random.Generator) -> int:
    day = dt.datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=dt.UTC)
    seconds = 15 * 3600 + int(rng.integers(0, 4 * 3600))
    return int(day.timestamp() + seconds) * 1_000_000 + int(rng.integers(0, 1_000_000))


def _trajectory(
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


def _grid(
    traj: Trajectory, rate: float, rng: np.random.Generator, jitter: float = 0.05
) -> np.ndarray:
    """Sample utimes at `rate` with a little jitter, strictly increasing, inside the drive."""
    t0, t1 = int(traj.t_us[0]), int(traj.t_us[-1])
    period = 1e6 / rate
    k = int((t1 - t0) / period)
    steps = period * (1 + jitter * rng.uniform(-1, 1, size=k))
    t = t0 + int(rng.integers(0, int(period))) + np.round(np.cumsum(steps)).astype(np.int64)
    return t[t <= t1]


def _fmt(values: np.ndarray) -> list[str]:
    """`%.15g` per value: up to 15 significant digits, whole numbers without a decimal point,
    `nan` lower case — the number format of the real CSVs (spec §3)."""
    return list(map("%.15g".__mod__, values.tolist()))


def _csv(utime: np.ndarray, cols: list[np.ndarray]) -> bytes:
    frame = pl.DataFrame(
        {
            "utime": utime.astype(np.int64).astype(str),
            **{f"c{i}": _fmt(c) for i, c in enumerate(cols)},
        }
    )
    lines = frame.select(pl.concat_str(pl.all(), separator=",")).to_series()
    return ("\n".join(lines.to_list()) + "\n").encode()


def _put_csv(
    w: _Writer, rel: str, kind: str, utime: np.ndarray, cols: list[np.ndarray], **facts: object
) -> None:
    assert len(cols) == len(COLUMNS[kind]), kind
    data = _csv(utime, cols)
    w.file(
        rel, data, rows=len(utime), first_utime=int(utime[0]), last_utime=int(utime[-1]), **facts
    )


def _cov_rows(n: int, scale: float, rng: np.random.Generator) -> list[np.ndarray]:
    """n positive-definite 6x6 covariances (A Aᵀ + εI), as the 21 upper-triangle columns."""
    a = rng.normal(0, scale, size=(n, 6, 6))
    m = a @ a.transpose(0, 2, 1) + np.eye(6) * scale**2 * 0.1
    return [m[:, i, j] for i, j in COV_INDEX]


def _write_csvs(w: _Writer, traj: Trajectory, rng: np.random.Generator, date: str) -> None:
    # Ground truth with a few NaN pose rows, and covariance at SLAM nodes every ~8 m.
    t = _grid(traj, RATES_HZ["groundtruth"], rng)
    p = traj.at(t)
    pose = [p["x"], p["y"], p["z"], p["roll"], p["pitch"], np.angle(np.exp(1j * p["heading"]))]
    nan_rows = np.sort(rng.choice(len(t), size=min(3, len(t)), replace=False))
    for col in pose:
        col[nan_rows] = np.nan
    _put_csv(w, f"groundtruth_{date}.csv", "groundtruth", t, pose, nan_rows=nan_rows.tolist())
    dist = np.concatenate([[0.0], np.cumsum(traj.speed[1:] / BASE_HZ)])
    nodes = traj.t_us[np.flatnonzero(np.diff(np.floor(dist / 8.0)) > 0) + 1]
    nodes = np.concatenate([traj.t_us[:1], nodes])
    _put_csv(w, f"cov_{date}.csv", "cov", nodes, _cov_rows(len(nodes), 0.05, rng))

    # Odometry: absolute poses from the identity, drifting slowly (scale and heading bias).
    for kind in ("odometry_mu_100hz", "odometry_mu"):
        t = _grid(traj, RATES_HZ[kind], rng, jitter=0.02)
        t = np.concatenate([traj.t_us[:1], t[t > traj.t_us[0]]])
        p = traj.at(t)
        h0 = traj.heading[0]
        drift = 1e-4 * (t - t[0]) / 1e6
        dx, dy = p["x"] - traj.x[0], p["y"] - traj.y[0]
        c, s = np.cos(-h0 + drift), np.sin(-h0 + drift)
        cols = [
            1.01 * (c * dx - s * dy),
            1.01 * (s * dx + c * dy),
            p["z"] - traj.z[0],
            p["roll"] - traj.roll[0],
            p["pitch"] - traj.pitch[0],
            np.angle(np.exp(1j * (p["heading"] - h0 + drift))),
        ]
        rows = _csv_faults(w, kind, t, cols)
        _put_csv(w, f"{kind}.csv", kind, *rows)
        cov_kind = kind.replace("mu", "cov")
        _put_csv(w, f"{cov_kind}.csv", cov_kind, t, _cov_rows(len(t), 1e-3, rng))

    # MS25 IMU: body rates, specific force, magnetic field, Euler angles.
    t = _grid(traj, RATES_HZ["ms25"], rng)
    p = traj.at(t)
    dt_s = np.gradient(t / 1e6)
    droll, dpitch, dhead = (np.gradient(p[k]) / dt_s for k in ("roll", "pitch", "heading"))
    r, q = p["roll"], p["pitch"]
    gyro = [
        droll - dhead * np.sin(q),
        dpitch * np.cos(r) + dhead * np.sin(r) * np.cos(q),
        -dpitch * np.sin(r) + dhead * np.cos(r) * np.cos(q),
    ]
    vel = np.stack([np.gradient(p[k]) / dt_s for k in ("x", "y", "z")], -1)
    acc = np.stack([np.gradient(vel[:, i]) / dt_s for i in range(3)], -1)
    rot = rpy_to_matrix(r, q, p["heading"])
    specific = np.einsum("nji,nj->ni", rot, acc - np.array([0.0, 0.0, GRAVITY]))
    mag = np.einsum("nji,j->ni", rot, EARTH_FIELD_NED)
    cols = [
        *(mag[:, i] + rng.normal(0, 0.002, len(t)) for i in range(3)),
        *(specific[:, i] + rng.normal(0, 0.03, len(t)) for i in range(3)),
        *(g + rng.normal(0, 0.002, len(t)) for g in gyro),
    ]
    _put_csv(w, "ms25.csv", "ms25", *_csv_faults(w, "ms25", t, cols))
    euler = [r + rng.normal(0, 0.002, len(t)), q + rng.normal(0, 0.002, len(t))]
    euler.append(np.angle(np.exp(1j * (p["heading"] + rng.normal(0, 0.01, len(t))))))
    _put_csv(w, "ms25_euler.csv", "ms25_euler", *_csv_faults(w, "ms25_euler", t, euler))

    # KVH fibre-optic gyro: integrated heading (unwrapped, slow bias), and wheel speeds.
    if "missing_optional" in w.faults:
        w.fault("missing_optional", file="kvh.csv")
    else:
        t = _grid(traj, RATES_HZ["kvh"], rng, jitter=0.01)
        h = traj.at(t)["heading"]
        _put_csv(w, "kvh.csv", "kvh", t, [h - h[0] + 2e-5 * (t - t[0]) / 1e6])
    t = _grid(traj, RATES_HZ["wheels"], rng)
    p = traj.at(t)
    rate = np.gradient(p["heading"]) / np.gradient(t / 1e6)
    noise = rng.normal(0, 0.01, (2, len(t)))
    wheels = [
        p["speed"] + rate * TRACK_WIDTH / 2 + noise[0],
        p["speed"] - rate * TRACK_WIDTH / 2 + noise[1],
    ]
    _put_csv(w, "wheels.csv", "wheels", t, wheels)
    _write_gps(w, traj, rng)


def _csv_faults(
    w: _Writer, kind: str, t: np.ndarray, cols: list[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Timestamp faults change values in place (the rows stay parseable and are recorded)."""
    mid = len(t) // 2
    if kind == "ms25_euler" and "backward_utime" in w.faults:
        t = t.copy()
        t[mid] = t[mid - 1] - 1_000
        w.fault("backward_utime", file="ms25_euler.csv", line=mid + 1, utime=int(t[mid]))
    return t, cols


def _text_faults(w: _Writer, rel: str, fault: str, line_index: int, broken: bytes) -> None:
    """Replace one line of an already written CSV (line faults need the text)."""
    path = w.session / rel
    lines = path.read_bytes().split(b"\n")
    original = lines[line_index]
    lines[line_index] = broken if broken else original.rsplit(b",", 2)[0]
    data = b"\n".join(lines)
    path.write_bytes(data)
    w.truth["files"][rel]["bytes"] = len(data)  # type: ignore[index]
    w.truth["files"][rel]["rows"] -= 1  # type: ignore[index]
    w.fault(fault, file=rel, line=line_index + 1)


def _ned_to_geodetic(
    x: np.ndarray, y: np.ndarray, z: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of the ground-truth linearization of the rig: radians, radians, metres (the
    units of gps.csv)."""
    lat, lon, alt = _rig().ground_truth.linearized_ned().to_geodetic(x, y, z)
    return np.radians(lat), np.radians(lon), alt


def _write_gps(w: _Writer, traj: Trajectory, rng: np.random.Generator) -> None:
    """Consumer GPS as mode-2/mode-3 row pairs, RTK at 2.5 Hz; no rows while indoors."""
    lo, hi = traj.indoor
    fix = _grid(traj, RATES_HZ["gps_fix"], rng)
    fix = fix[(fix < lo) | (fix > hi)]
    p = traj.at(fix)
    walk = np.cumsum(rng.normal(0, 0.15, (len(fix), 2)), axis=0)
    lat, lon, alt = _ned_to_geodetic(
        p["x"] + walk[:, 0], p["y"] + walk[:, 1], p["z"] + rng.normal(0, 1.5, len(fix))
    )
    vel_heading = np.degrees(np.angle(np.exp(1j * p["heading"]))) % 360.0
    speed = np.abs(p["speed"] + rng.normal(0, 0.05, len(fix)))
    # Some fixes get only their mode-3 row: the occasional same-mode run of the real files.
    single = rng.random(len(fix)) < 0.03
    pair_dt = rng.integers(1_000, 200_000, len(fix))
    n = len(fix)
    utime = np.empty(2 * n, np.int64)
    utime[0::2], utime[1::2] = fix, fix + pair_dt
    mode = np.tile([2.0, 3.0], n)
    keep = np.ones(2 * n, bool)
    keep[0::2] = ~single
    rows = {
        "lat": np.repeat(lat, 2),
        "lon": np.repeat(lon, 2),
        "alt": np.where(mode == 2, np.nan, np.repeat(alt, 2)),
        "track": np.repeat(vel_heading, 2),
        "speed": np.repeat(speed, 2),
    }
    mode3 = np.flatnonzero(mode == 3)
    gone = rng.choice(mode3, size=max(1, len(mode3) // 50), replace=False)
    rows["track"][gone] = np.nan
    rows["speed"][gone] = np.nan
    outlier, spike = mode3[len(mode3) // 3], mode3[2 * len(mode3) // 3]
    rows["alt"][outlier] = -35.0
    rows["speed"][spike] = 7.5
    facts = {"alt_outlier_utime": int(utime[outlier]), "speed_spike_utime": int(utime[spike])}
    if "duplicate_utime" in w.faults:
        dup = 2 * (n // 4) + 1
        utime[dup] = utime[dup - 1]
        w.fault("duplicate_utime", file="gps.csv", utime=int(utime[dup]))
    sel = np.flatnonzero(keep)
    cols = [
        mode[sel],
        np.zeros(len(sel)),
        *(rows[k][sel] for k in ("lat", "lon", "alt", "track", "speed")),
    ]
    _put_csv(w, "gps.csv", "gps", utime[sel], cols, indoor=[lo, hi], **facts)

    t = _grid(traj, RATES_HZ["gps_rtk"], rng)
    t = t[(t < lo) | (t > hi)]
    p = traj.at(t)
    err = 0.02 + 0.3 * rng.random(len(t)) ** 4
    lat, lon, alt = _ned_to_geodetic(
        *(p[k] + rng.normal(0, 1, len(t)) * err for k in ("x", "y", "z"))
    )
    cols = [
        np.full(len(t), 3.0),
        rng.integers(6, 13, len(t)).astype(float),
        lat,
        lon,
        alt,
        np.degrees(np.angle(np.exp(1j * p["heading"]))) % 360.0,
        p["speed"],
    ]
    _put_csv(w, "gps_rtk.csv", "gps_rtk", t, cols)
    _put_csv(w, "gps_rtk_err.csv", "gps_rtk_err", t, [err])
    if "csv_short_row" in w.faults:
        _text_faults(w, "gps_rtk.csv", "csv_short_row", len(t) // 2, b"")
    if "csv_text_field" in w.faults:
        line = _text_line(w, "wheels.csv")
        _text_faults(w, "wheels.csv", "csv_text_field", line, _replace_field(w, "wheels.csv", line))


def _text_line(w: _Writer, rel: str) -> int:
    return int(w.truth["files"][rel]["rows"]) // 3  # type: ignore[index]


def _replace_field(w: _Writer, rel: str, line: int) -> bytes:
    fields = (w.session / rel).read_bytes().split(b"\n")[line].split(b",")
    fields[1] = b"0.4x1"
    return b",".join(fields)


@dataclass(frozen=True)
class _Scene:
    """Vertical walls (segments, world NED) and poles (circles) standing on a level ground,
    shared by every range sensor."""

    walls: np.ndarray
    """(n, 4): x1, y1, x2, y2."""
    wall_height: np.ndarray
    poles: np.ndarray
    """(m, 4): x, y, radius, height."""

    @classmethod
    def make(cls, traj: Trajectory, rng: np.random.Generator) -> _Scene:
        walls = []
        # The campus boundary around the loop and one building inside it.
        for x0, y0, x1, y1 in [(-118, -40, 60, 82), (-55, 5, -5, 35)]:
            walls += [(x0, y0, x1, y0), (x1, y0, x1, y1), (x1, y1, x0, y1), (x0, y1, x0, y0)]
        idx = rng.choice(len(traj.x), size=10, replace=False)
        side = rng.choice([-1.0, 1.0], 10) * rng.uniform(3, 6, 10)
        h = traj.heading[idx]
        px, py = traj.x[idx] - np.sin(h) * side, traj.y[idx] + np.cos(h) * side
        poles = np.stack([px, py, rng.uniform(0.1, 0.3, 10), rng.uniform(4, 8, 10)], -1)
        return cls(np.array(walls, float), rng.uniform(6, 15, len(walls)), poles)

    def horizontal(self, ox: np.ndarray, oy: np.ndarray, dx: np.ndarray, dy: np.ndarray):
        """Horizontal distance along unit 2D rays to the first wall and the first pole, with the
        height of what was hit (inf distance when nothing)."""
        ox, oy, dx, dy = ox[:, None], oy[:, None], dx[:, None], dy[:, None]
        x1, y1, x2, y2 = (self.walls[:, i][None, :] for i in range(4))
        ex, ey = x2 - x1, y2 - y1
        den = dx * ey - dy * ex
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ((x1 - ox) * ey - (y1 - oy) * ex) / den
            u = ((x1 - ox) * dy - (y1 - oy) * dx) / den
        t = np.where((np.abs(den) > 1e-9) & (t > 0) & (u >= 0) & (u <= 1), t, np.inf)
        wi = t.argmin(axis=1)
        h_wall = t[np.arange(len(t)), wi]
        cx, cy, rr = (self.poles[:, i][None, :] for i in range(3))
        b = (ox - cx) * dx + (oy - cy) * dy
        c = (ox - cx) ** 2 + (oy - cy) ** 2 - rr**2
        disc = b**2 - c
        with np.errstate(invalid="ignore"):
            tp = -b - np.sqrt(disc)
        tp = np.where((disc >= 0) & (tp > 0), tp, np.inf)
        pi = tp.argmin(axis=1)
        h_pole = tp[np.arange(len(tp)), pi]
        return h_wall, self.wall_height[wi], h_pole, self.poles[pi, 3]

    def cast(
        self, origin: np.ndarray, direction: np.ndarray, height: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Distance along unit 3D rays (NED) from `height` metres above the ground to the first
        surface, and its class (0 none, 1 ground, 2 wall, 3 pole)."""
        dz = direction[:, 2]
        horiz = np.hypot(direction[:, 0], direction[:, 1])
        with np.errstate(divide="ignore", invalid="ignore"):
            flat = self.horizontal(
                origin[:, 0], origin[:, 1], direction[:, 0] / horiz, direction[:, 1] / horiz
            )
        return _first_surface(*flat, dz, horiz, height)


def _first_surface(
    hw: np.ndarray,
    top_w: np.ndarray,
    hp: np.ndarray,
    top_p: np.ndarray,
    dz: np.ndarray,
    horiz: np.ndarray,
    height: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Combine horizontal wall/pole distances with a ray's slope and the ground plane."""
    with np.errstate(divide="ignore", invalid="ignore"):
        candidates = np.stack(
            [
                np.where(dz > 1e-6, height / dz, np.inf),
                _within(hw / horiz, dz, height, top_w),
                _within(hp / horiz, dz, height, top_p),
            ]
        )
    what = candidates.argmin(axis=0)
    dist = candidates[what, np.arange(len(dz))]
    far = dist > MAX_RANGE
    dist[far] = np.inf
    return dist, np.where(far, 0, what + 1).astype(np.uint8)


def _within(t: np.ndarray, dz: np.ndarray, height: np.ndarray, top: np.ndarray) -> np.ndarray:
    """A vertical-surface hit at ray length t counts only between the ground and its top."""
    above = height - t * dz
    return np.where((above >= 0) & (above <= top), t, np.inf)


def _sensor_rays(traj: Trajectory, utime: np.ndarray, mount: Transform, local_dirs: np.ndarray):
    """World origins and directions of sensor-frame unit vectors at each utime (row-aligned).

    Rays of one scan share a utime: the body rotation is made once per distinct time (scipy's
    from_euler costs ~1 µs per row, most of a drive's synthesis when done per ray)."""
    times, inverse = np.unique(utime, return_inverse=True)
    at = traj.at(times)
    r_wb = rpy_to_matrix(at["roll"], at["pitch"], at["heading"])[inverse]
    p = {k: v[inverse] for k, v in at.items()}
    origin = np.stack([p["x"], p["y"], p["z"]], -1) + r_wb @ mount.translation
    direction = np.einsum("nij,jk,nk->ni", r_wb, mount.matrix, local_dirs)
    height = p["z"] + AXLE_HEIGHT - origin[:, 2]
    return origin, direction, height


def _encode(metres: np.ndarray) -> np.ndarray:
    return np.clip(np.round((metres - C.CODE_OFFSET) / C.CODE_SCALE), 0, 65535).astype(np.uint16)


def _write_velodyne(
    w: _Writer,
    traj: Trajectory,
    scene: _Scene,
    rng: np.random.Generator,
    hits_per_rev: int,
    dropout: tuple[int, int] | None = None,
) -> None:
    """velodyne_hits.bin packets (firing order, ray-cast scene) and velodyne_sync scans, written
    one revolution pair at a time so memory stays bounded for long drives. No packet is
    written in the `dropout` utime range (its hits are drawn all the same, so the random
    stream of the rest stays as it was); revolutions it empties get no sync file."""
    t0 = int(traj.t_us[0])
    n_packets = int((traj.t_us[-1] - t0) * PACKETS_PER_REV / REV_US)
    keep_p = min(1.0, hits_per_rev / (BLOCKS_PER_REV * C.LASER_COUNT * RETURN_FRACTION))
    path = w.session / "velodyne_hits.bin"
    offsets: list[np.ndarray] = []
    revs: dict[int, dict[str, int]] = {}
    pending: dict[int, list[np.ndarray]] = {}
    size = n_hits = 0
    utimes: list[int] = []
    with path.open("wb") as out:
        for p0 in range(0, n_packets, 2 * PACKETS_PER_REV):
            k = np.arange(p0, min(n_packets, p0 + 2 * PACKETS_PER_REV))
            hits, packet, rev = _fire(traj, scene, rng, k, keep_p, t0, ends=p0 == 0)
            if dropout is not None:
                at = t0 + (packet * REV_US) // PACKETS_PER_REV
                sent = (at < dropout[0]) | (at >= dropout[1])
                hits, packet, rev = hits[sent], packet[sent], rev[sent]
                if len(hits) == 0:
                    continue
            starts = np.concatenate([[0], np.flatnonzero(np.diff(packet)) + 1])
            counts = np.diff(np.append(starts, len(packet)))
            pk_utime = t0 + (packet[starts] * REV_US) // PACKETS_PER_REV
            blob, at = _packets(hits, counts, pk_utime)
            out.write(blob)
            offsets.append(size + at)
            size += len(blob)
            n_hits += len(hits)
            utimes += [int(pk_utime[0]), int(pk_utime[-1])]
            hit_utime = np.repeat(pk_utime, counts)
            for r in np.unique(rev).tolist():
                sel = rev == r
                info = revs.setdefault(
                    r, {"rev": r, "start_utime": int(hit_utime[sel][0]), "hits": 0}
                )
                info["hits"] += int(sel.sum())
                if r % 2 == 0:
                    pending.setdefault(r, []).append(hits[sel])
            for r in [r for r in pending if r < rev[-1] or p0 + len(k) >= n_packets]:
                scan = np.concatenate(pending.pop(r))
                w.file(
                    f"velodyne_sync/{revs[r]['start_utime']}.bin",
                    scan.tobytes(),
                    hits=len(scan),
                    rev=r,
                )
        for r in sorted(pending):  # a dropout at the very end leaves revolutions behind
            scan = np.concatenate(pending.pop(r))
            w.file(
                f"velodyne_sync/{revs[r]['start_utime']}.bin", scan.tobytes(), hits=len(scan), rev=r
            )
    all_offsets = np.concatenate(offsets)
    _velodyne_faults(w, path, all_offsets)
    w.paths.append(path)
    w.truth["files"]["velodyne_hits.bin"] = {  # type: ignore[index]
        "bytes": path.stat().st_size,
        "packets": len(all_offsets),
        "hits": n_hits,
        "first_utime": utimes[0],
        "last_utime": utimes[-1],
        "code_ends": {"z": [0, 65535]},
        "revolutions": [revs[r] for r in sorted(revs)],
    }


def _fire(
    traj: Trajectory,
    scene: _Scene,
    rng: np.random.Generator,
    k: np.ndarray,
    keep_p: float,
    t0: int,
    *,
    ends: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hits of packets `k` in firing order: (hits, packet index per hit, revolution per hit)."""
    slots = rng.random((len(k), BLOCKS_PER_PACKET * C.LASER_COUNT)) < keep_p
    pk, slot = np.nonzero(slots)
    packet = k[pk]
    block = packet * BLOCKS_PER_PACKET + slot // C.LASER_COUNT
    laser = slot % C.LASER_COUNT
    seam_block = block + SEAM_PHASE_BLOCKS
    rel = 2 * np.pi * (seam_block % BLOCKS_PER_REV) / BLOCKS_PER_REV
    az = C.REAR_AZIMUTH + rel
    e = np.radians(C.LASER_VERTICAL_DEG)[laser]
    local = np.stack([np.cos(e) * np.cos(az), np.cos(e) * np.sin(az), -np.sin(e)], -1)
    # Rays of one firing block share an azimuth: cast each block once in the horizontal plane
    # (sensor kept level; the body's ~1° tilt is ignored), then per laser add the slope.
    blocks, first, inverse = np.unique(block, return_index=True, return_inverse=True)
    b_utime = t0 + (blocks // BLOCKS_PER_PACKET * REV_US) // PACKETS_PER_REV
    p = traj.at(b_utime)
    velodyne = _mount("velodyne")
    yaw_v = quaternion_to_rpy(velodyne.quaternion)[2]
    ch, sh = np.cos(p["heading"]), np.sin(p["heading"])
    mx, my = velodyne.translation[:2]
    ox, oy = p["x"] + ch * mx - sh * my, p["y"] + sh * mx + ch * my
    world_az = p["heading"] + yaw_v + az[first]
    flat = scene.horizontal(ox, oy, np.cos(world_az), np.sin(world_az))
    flat = [f[inverse] for f in flat]
    dist, what = _first_surface(*flat, -np.sin(e), np.cos(e), np.full(len(e), SENSOR_HEIGHT))
    unmasked = (rel > MAST_HALF_WIDTH) & (rel < 2 * np.pi - MAST_HALF_WIDTH)
    ok = unmasked & (what > 0) & (rng.random(len(dist)) > 0.02)
    pts = local[ok] * (dist[ok] + rng.normal(0, 0.01, int(ok.sum())))[:, None]
    hits = np.empty(len(pts), C.HIT_DTYPE)
    for i, axis in enumerate("xyz"):
        hits[axis] = _encode(pts[:, i])
    base = np.array([0, 20, 90, 160], np.int64)[what[ok]]
    hits["intensity"] = np.clip(base + rng.integers(0, 60, len(pts)), 0, 255)
    hits["laser_id"] = laser[ok]
    if ends:
        hits["z"][5], hits["z"][13] = 65535, 0  # both ends of the code range, azimuth untouched
    return hits, packet[ok], seam_block[ok] // BLOCKS_PER_REV


PACKET_HEADER = np.dtype([("magic", "<u8"), ("num_hits", "<u4"), ("utime", "<u8"), ("pad", "<u4")])


def _packets(hits: np.ndarray, counts: np.ndarray, utime: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Serialize packets (header + hits) back to back; returns the bytes and packet offsets."""
    sizes = C.PACKET_HEADER_BYTES + C.HIT_BYTES * counts
    at = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    header = np.zeros(len(counts), PACKET_HEADER)
    header["magic"], header["num_hits"], header["utime"] = C.PACKET_MAGIC_U64, counts, utime
    buf = np.empty(int(sizes.sum()), np.uint8)
    buf[(at[:, None] + np.arange(C.PACKET_HEADER_BYTES)).ravel()] = header.view(np.uint8)
    first = np.repeat(at + C.PACKET_HEADER_BYTES, counts)
    idx = np.arange(len(hits)) - np.repeat(np.cumsum(counts) - counts, counts)
    pos = first + C.HIT_BYTES * idx
    buf[(pos[:, None] + np.arange(C.HIT_BYTES)).ravel()] = hits.view(np.uint8)
    return buf.tobytes(), at


def _velodyne_faults(w: _Writer, path: Path, offsets: np.ndarray) -> None:
    """Packet faults, patched into the written file and recorded with the byte range a
    resynchronizing reader must skip and the hits it loses."""
    with path.open("r+b") as f:

        def num_hits(at: int) -> int:
            f.seek(at + 8)
            return struct.unpack("<I", f.read(4))[0]

        if "bad_magic" in w.faults:
            i = len(offsets) // 2
            at = int(offsets[i])
            w.fault(
                "bad_magic",
                file="velodyne_hits.bin",
                skipped=[at, int(offsets[i + 1])],
                lost_hits=num_hits(at),
            )
            f.seek(at)
            f.write(b"\0\0")
        last = int(offsets[-1])
        lost = num_hits(last)
        end = path.stat().st_size
        if "truncated_packet" in w.faults:
            end = last + C.PACKET_HEADER_BYTES + C.HIT_BYTES * (lost // 2)
            f.truncate(end)
            w.fault(
                "truncated_packet", file="velodyne_hits.bin", skipped=[last, end], lost_hits=lost
            )
        if "hits_past_eof" in w.faults:
            f.seek(last + 8)
            f.write(struct.pack("<I", lost + 100))
            w.fault("hits_past_eof", file="velodyne_hits.bin", skipped=[last, end], lost_hits=lost)


def _write_hokuyo(w: _Writer, traj: Trajectory, scene: _Scene, rng: np.random.Generator) -> None:
    """Planar scans of the same walls and poles; no-returns written as code 20000 (0 m)."""
    for kind, max_range in (("hokuyo_30m", 30.0), ("hokuyo_4m", 4.0)):
        mount = _mount(kind)
        spec = C.HOKUYO[kind]
        t = _grid(traj, RATES_HZ[kind], rng, jitter=0.01)
        ang = spec["angle_min"] + np.arange(spec["ranges"]) * spec["angle_inc"]
        local = np.stack([np.cos(ang), np.sin(ang), np.zeros_like(ang)], -1)
        rec = np.zeros(len(t), np.dtype([("utime", "<u8"), ("r", "<u2", (spec["ranges"],))]))
        rec["utime"] = t
        for i0 in range(0, len(t), 64):
            tt = np.repeat(t[i0 : i0 + 64], len(ang))
            dirs = np.tile(local, (len(t[i0 : i0 + 64]), 1))
            origin, direction, ground = _sensor_rays(traj, tt, mount, dirs)
            dist, what = scene.cast(origin, direction, ground)
            dist = dist + rng.normal(0, 0.01, len(dist))
            codes = np.where((what > 0) & (dist < max_range), _encode(dist), _encode(np.zeros(1)))
            rec["r"][i0 : i0 + 64] = codes.reshape(-1, len(ang))
        w.file(
            f"{kind}.bin",
            rec.tobytes(),
            records=len(t),
            first_utime=int(t[0]),
            last_utime=int(t[-1]),
        )


def _write_images(
    w: _Writer,
    traj: Trajectory,
    rng: np.random.Generator,
    size: tuple[int, int],
    black: tuple[int, int, int] | None = None,
) -> None:
    """Six cameras per capture at ~5 Hz, one utime per capture; a gradient that moves with time.
    `black` = (camera, first utime, end utime): that camera's images in the range are black."""
    width, height = size
    t = _grid(traj, RATES_HZ["lb3"], rng, jitter=0.02)
    yy, xx = np.mgrid[0:height, 0:width]
    for i, utime in enumerate(t):
        for cam in range(C.LB3_CAMERAS):
            img = np.empty((height, width, 3), np.uint8)
            img[..., 0] = (xx * 255 // max(1, width - 1) + 7 * i) % 256
            img[..., 1] = (yy * 255 // max(1, height - 1) + 40 * cam) % 256
            img[..., 2] = (xx + yy + i) % 256
            if black is not None and cam == black[0] and black[1] <= utime < black[2]:
                img[:] = 0
            w.file(
                f"lb3/Cam{cam}/{utime}.tiff",
                encode_baseline_tiff(img.tobytes(), width, height),
                camera=cam,
            )

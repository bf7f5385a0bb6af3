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

import json
from pathlib import Path

import numpy as np
import polars as pl

from bridge_lake.formats.nclt import constants as C
from bridge_lake.formats.nclt.csv_tables import COLUMNS, COV_INDEX
from bridge_lake.formats.nclt.images import encode_baseline_tiff
from bridge_lake.geometry import rpy_to_matrix
from bridge_lake.synth.nclt_lidar import (
    Scene,
    write_hokuyo,
    write_velodyne,
)
from bridge_lake.synth.nclt_world import (
    BASE_HZ,
    BLACK_S,
    DEFAULT_DATES,
    DEFAULT_HITS_PER_REV,
    DEFAULT_IMAGE_SIZE,
    EARTH_FIELD_NED,
    EVENT_AT,
    FAULTS,
    GRAVITY,
    LIDAR_DROPOUT_S,
    PLANT_MIN_MINUTES,
    RATES_HZ,
    TRACK_WIDTH,
    TRUTH_FILE,
    Trajectory,
    Writer,
    make_trajectory,
    nclt_rig,
    sample_times,
    start_utime,
)


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
    start = start_utime(date, rng)
    # planted events draw from a generator of their own: every other draw stays as it was
    plant = np.random.default_rng([seed, 0x5CE7E5]) if minutes >= PLANT_MIN_MINUTES else None
    traj = make_trajectory(start, minutes * 60.0, rng, plant)
    scene = Scene.make(traj, rng)
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
    w = Writer(session, truth, faults)
    _write_csvs(w, traj, rng, date)
    write_velodyne(w, traj, scene, rng, hits_per_rev, dropout)
    write_hokuyo(w, traj, scene, rng)
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
    w: Writer, rel: str, kind: str, utime: np.ndarray, cols: list[np.ndarray], **facts: object
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


def _write_csvs(w: Writer, traj: Trajectory, rng: np.random.Generator, date: str) -> None:
    # Ground truth with a few NaN pose rows, and covariance at SLAM nodes every ~8 m.
    t = sample_times(traj, RATES_HZ["groundtruth"], rng)
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
        t = sample_times(traj, RATES_HZ[kind], rng, jitter=0.02)
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
    t = sample_times(traj, RATES_HZ["ms25"], rng)
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
        t = sample_times(traj, RATES_HZ["kvh"], rng, jitter=0.01)
        h = traj.at(t)["heading"]
        _put_csv(w, "kvh.csv", "kvh", t, [h - h[0] + 2e-5 * (t - t[0]) / 1e6])
    t = sample_times(traj, RATES_HZ["wheels"], rng)
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
    w: Writer, kind: str, t: np.ndarray, cols: list[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Timestamp faults change values in place (the rows stay parseable and are recorded)."""
    mid = len(t) // 2
    if kind == "ms25_euler" and "backward_utime" in w.faults:
        t = t.copy()
        t[mid] = t[mid - 1] - 1_000
        w.fault("backward_utime", file="ms25_euler.csv", line=mid + 1, utime=int(t[mid]))
    return t, cols


def _text_faults(w: Writer, rel: str, fault: str, line_index: int, broken: bytes) -> None:
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
    lat, lon, alt = nclt_rig().ground_truth.linearized_ned().to_geodetic(x, y, z)
    return np.radians(lat), np.radians(lon), alt


def _write_gps(w: Writer, traj: Trajectory, rng: np.random.Generator) -> None:
    """Consumer GPS as mode-2/mode-3 row pairs, RTK at 2.5 Hz; no rows while indoors."""
    lo, hi = traj.indoor
    fix = sample_times(traj, RATES_HZ["gps_fix"], rng)
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

    t = sample_times(traj, RATES_HZ["gps_rtk"], rng)
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


def _text_line(w: Writer, rel: str) -> int:
    return int(w.truth["files"][rel]["rows"]) // 3  # type: ignore[index]


def _replace_field(w: Writer, rel: str, line: int) -> bytes:
    fields = (w.session / rel).read_bytes().split(b"\n")[line].split(b",")
    fields[1] = b"0.4x1"
    return b",".join(fields)


def _write_images(
    w: Writer,
    traj: Trajectory,
    rng: np.random.Generator,
    size: tuple[int, int],
    black: tuple[int, int, int] | None = None,
) -> None:
    """Six cameras per capture at ~5 Hz, one utime per capture; a gradient that moves with time.
    `black` = (camera, first utime, end utime): that camera's images in the range are black."""
    width, height = size
    t = sample_times(traj, RATES_HZ["lb3"], rng, jitter=0.02)
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

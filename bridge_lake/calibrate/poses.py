"""Poses of base_link in the drive's map frame (REP-105 `map`, ENU) and their interpolation.

Three sources, chosen per drive (the `source` column says which):

- **Ground truth** (NCLT): the dataset's poses of its body frame in its own world frame,
  turned into base_link in an ENU map at the same geodetic origin through the rig
  (T_map_base = T_map_world · T_world_body(t) · T_body_base). Exact up to float rounding.
- **GNSS + IMU** (+ wheel speed where present), when there is no ground truth: a batch
  complementary smoother, planar (roll = pitch = 0). Heading is the integrated IMU yaw rate
  (rotated into base_link) corrected by a moving average of its offset to the GNSS course
  over YAW_WINDOW_S; position is dead reckoning with that heading and the measured speed,
  corrected by a moving average of its offset to the GNSS fixes (antenna lever arm removed)
  over POSITION_WINDOW_S; height is the averaged GNSS altitude. The gyro carries the high
  frequencies, GNSS the low ones; across a GNSS outage the correction is interpolated
  between its two edges, so the track stays continuous. Accuracy on the synthetic ADTF drive
  is in docs/ARCHITECTURE.md (measured by the tests).
- **GNSS alone** (no ground truth, no IMU: an NCLT drive of only gps.csv): base_link at every
  fix, ENU from lat/lon/alt averaged over TRACK_WINDOW_S with the antenna lever arm removed;
  heading from the track (the displacement of the fixes over TRACK_WINDOW_S) while it moves
  faster than MIN_TRACK_SPEED,
  held while stopped (and, before the first motion, the first heading); planar; height the
  median of MEDIAN_FIXES fixes (consumer receivers give spikes of tens of metres).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from scipy.ndimage import median_filter
from scipy.spatial.transform import Rotation

from bridge_lake.calibrate.rig import Rig
from bridge_lake.clock import NS_PER_S
from bridge_lake.errors import BridgeLakeError
from bridge_lake.geometry import NED_TO_ENU, enu_to_geodetic, geodetic_to_enu, slerp, wrap_angle

MAP_FRAME = "map"
YAW_WINDOW_S = 30.0
"""Heading offsets to the GNSS course are averaged over this window (gyro drift is slow)."""
POSITION_WINDOW_S = 4.0
"""Dead-reckoning offsets to GNSS fixes are averaged over this window (fix noise is white)."""
MIN_COURSE_SPEED = 2.0
"""GNSS course is used as a heading reference only above this speed [m/s]."""
ESTIMATOR_GT = "ground truth of the dataset, moved to base_link/ENU through the rig"
ESTIMATOR_FUSED = (
    f"GNSS + IMU batch complementary smoother (planar; heading window {YAW_WINDOW_S:g} s, "
    f"position window {POSITION_WINDOW_S:g} s)"
)
TRACK_WINDOW_S = 4.0
"""GNSS-only heading: the displacement of the fixes within ±2 s (fix noise averages out)."""
MIN_TRACK_SPEED = 0.5
"""GNSS-only heading is taken from the track only above this speed [m/s]; below, held."""
MEDIAN_FIXES = 9
"""GNSS-only height: running median over this many fixes."""
ESTIMATOR_GNSS = (
    f"GNSS only: ENU from lat/lon/alt (lever arm removed), heading from the track over "
    f"{TRACK_WINDOW_S:g} s while faster than {MIN_TRACK_SPEED:g} m/s, held while stopped; planar"
)


@dataclass(frozen=True)
class PoseTrack:
    """base_link poses in the map: strictly increasing times, positions (n, 3), rotations."""

    time_ns: np.ndarray
    position: np.ndarray
    rotation: Rotation
    speed_mps: np.ndarray
    source: str
    origin: tuple[float, float, float]
    """(lat_deg, lon_deg, alt_m) of the map origin."""
    origin_source: str
    estimator: str
    dropped: int = 0
    """Source poses that were invalid (NaN) or repeated a time and were left out."""

    def __len__(self) -> int:
        return len(self.time_ns)

    @property
    def yaw(self) -> np.ndarray:
        m = self.rotation.as_matrix()
        return np.arctan2(m[:, 1, 0], m[:, 0, 0])

    def at(self, t_ns: np.ndarray, limit_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions (m, 3) and (x, y, z, w) quaternions (m, 4) at `t_ns`, and how far each
        time lies outside the track (0 inside). Inside, positions are linear and rotations
        slerped; up to `limit_ns` outside, the end pose is held; beyond it the pose is NaN —
        reported by the caller, never silently clamped."""
        t_ns = np.asarray(t_ns, dtype=np.int64)
        if len(self) == 0:
            nan = np.full((len(t_ns), 3), np.nan)
            return nan, np.full((len(t_ns), 4), np.nan), np.full(len(t_ns), np.iinfo(np.int64).max)
        t0, t1 = self.time_ns[0], self.time_ns[-1]
        outside = np.maximum(np.maximum(t0 - t_ns, t_ns - t1), 0)
        q = np.clip(t_ns, t0, t1)
        rel_q = (q - t0).astype(np.float64)
        rel = (self.time_ns - t0).astype(np.float64)
        position = np.stack([np.interp(rel_q, rel, self.position[:, i]) for i in range(3)], -1)
        if len(self) == 1:
            quat = np.repeat(self.rotation.as_quat().reshape(1, 4), len(t_ns), axis=0)
        else:
            quat = slerp(self.time_ns, self.rotation.as_quat(), q)
        far = outside > limit_ns
        position[far] = np.nan
        quat[far] = np.nan
        return position, quat, outside


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)


def _valid_unique(time_ns: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, int]:
    """Indices of valid rows in time order with unique times (the first of equal times)."""
    idx = np.flatnonzero(valid)
    idx = idx[np.argsort(time_ns[idx], kind="stable")]
    keep = np.ones(len(idx), dtype=bool)
    keep[1:] = np.diff(time_ns[idx]) > 0
    return idx[keep], len(time_ns) - int(keep.sum())


def _speed(time_ns: np.ndarray, position: np.ndarray) -> np.ndarray:
    if len(time_ns) < 2:
        return np.zeros(len(time_ns))
    t = (time_ns - time_ns[0]) / NS_PER_S
    vx, vy = np.gradient(position[:, 0], t), np.gradient(position[:, 1], t)
    return np.hypot(vx, vy)


def poses_from_ground_truth(ground_truth: pa.Table, rig: Rig) -> PoseTrack:
    """Ground-truth rows (normalized/ground_truth: time_ns, x_m..yaw_rad of the rig's
    ground_truth.body_frame in its world frame) → base_link poses in the ENU map."""
    gt = rig.ground_truth
    if gt is None:
        raise BridgeLakeError(f"{rig.path}: the rig has no ground_truth section")
    time_ns = ground_truth.column("time_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    cols = {c: _column(ground_truth, c) for c in ("x_m", "y_m", "z_m", "roll_rad", "pitch_rad")}
    cols["yaw_rad"] = _column(ground_truth, "yaw_rad")
    valid = np.logical_and.reduce([np.isfinite(v) for v in cols.values()])
    idx, dropped = _valid_unique(time_ns, valid)
    world_body = Rotation.from_euler(
        "xyz", np.stack([cols["roll_rad"][idx], cols["pitch_rad"][idx], cols["yaw_rad"][idx]], -1)
    )
    p_world = np.stack([cols["x_m"][idx], cols["y_m"][idx], cols["z_m"][idx]], -1)
    map_world = Rotation.from_matrix(NED_TO_ENU if gt.axes == "ned" else np.eye(3))
    body_base = rig.to_base(gt.body_frame).inverse()
    rotation = map_world * world_body * body_base.rotation
    position = map_world.apply(p_world + world_body.apply(body_base.translation))
    times = time_ns[idx]
    return PoseTrack(
        times,
        position,
        rotation,
        _speed(times, position),
        "ground_truth",
        (gt.lat_deg, gt.lon_deg, gt.alt_m),
        "rig ground_truth origin",
        ESTIMATOR_GT,
        dropped,
    )


def _window_mean(t: np.ndarray, v: np.ndarray, half_window: float) -> np.ndarray:
    """Mean of v over samples within ±half_window of each t (t sorted): cumulative sums."""
    csum = np.concatenate([[0.0], np.cumsum(v)])
    lo = np.searchsorted(t, t - half_window, side="left")
    hi = np.searchsorted(t, t + half_window, side="right")
    return (csum[hi] - csum[lo]) / (hi - lo)


def _cumtrapz(t: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros(len(t))
    if len(t) > 1:
        out[1:] = np.cumsum((v[1:] + v[:-1]) * np.diff(t) / 2.0)
    return out


def _best_stream(table: pa.Table, valid: np.ndarray) -> np.ndarray:
    """Rows of the stream with the most valid rows (a drive may hold several receivers)."""
    streams = np.asarray(table.column("stream").to_pylist(), dtype=object)
    names, counts = np.unique(streams[valid], return_counts=True)
    if len(names) == 0:
        return np.zeros(len(streams), dtype=bool)
    return valid & (streams == names[np.argmax(counts)])


def poses_from_gnss_imu(
    gnss: pa.Table, imu: pa.Table, rig: Rig, wheels: pa.Table | None = None
) -> PoseTrack:
    """Fuse GNSS fixes and IMU yaw rates (module docstring) into base_link poses at the IMU
    rate, over the time span the fixes cover (no extrapolation)."""
    g_time = gnss.column("time_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    lat, lon, alt = (_column(gnss, c) for c in ("lat_deg", "lon_deg", "alt_m"))
    g_rows = _best_stream(gnss, np.isfinite(lat) & np.isfinite(lon))
    gi, _ = _valid_unique(g_time, g_rows)
    if len(gi) < 2:
        raise BridgeLakeError("poses: fewer than two GNSS fixes, nothing to fuse")
    w_time = imu.column("time_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    gyro = np.stack([_column(imu, f"angular_velocity_{a}") for a in "xyz"], -1)
    i_rows = _best_stream(imu, np.isfinite(gyro).all(axis=1))
    ii, _ = _valid_unique(w_time, i_rows)
    if len(ii) < 2:
        raise BridgeLakeError("poses: no IMU angular rates, cannot fuse a heading")
    gnss_frame = gnss.column("frame_id")[int(gi[0])].as_py()
    imu_frame = imu.column("frame_id")[int(ii[0])].as_py()
    lever = rig.to_base(gnss_frame).translation
    imu_rotation = rig.to_base(imu_frame).rotation

    t0 = max(g_time[gi[0]], w_time[ii[0]])
    t_end = g_time[gi[-1]]
    ii = ii[(w_time[ii] >= t0) & (w_time[ii] <= t_end)]
    times = w_time[ii]
    t = (times - t0) / NS_PER_S
    tg = (g_time[gi] - t0) / NS_PER_S

    alt_g = np.where(np.isfinite(alt[gi]), alt[gi], np.nan)
    origin = (float(lat[gi[0]]), float(lon[gi[0]]), float(np.nan_to_num(alt_g[0], nan=0.0)))
    enu = geodetic_to_enu(lat[gi], lon[gi], np.nan_to_num(alt_g, nan=origin[2]), *origin)

    # heading: integrated yaw rate + the averaged offset to the GNSS course
    yaw_rate = imu_rotation.apply(gyro[ii])[:, 2]
    yaw_gyro = _cumtrapz(t, yaw_rate)
    speed_g = _column(gnss, "speed_mps")[gi]
    course = _column(gnss, "track_rad")[gi]
    ref_ok = np.isfinite(course) & (speed_g > MIN_COURSE_SPEED)
    if ref_ok.sum() < 2:
        raise BridgeLakeError(
            f"poses: the GNSS course never exceeds {MIN_COURSE_SPEED} m/s with a valid track; "
            "cannot fix the heading"
        )
    yaw_ref = np.pi / 2 - course[ref_ok]  # course: clockwise from north; yaw: from east, CCW
    offset = np.unwrap(wrap_angle(yaw_ref - np.interp(tg[ref_ok], t, yaw_gyro)))
    offset = _window_mean(tg[ref_ok], offset, YAW_WINDOW_S / 2)
    yaw = yaw_gyro + np.interp(t, tg[ref_ok], offset)

    # speed: wheels if present, else GNSS speed (or speed from the fixes)
    speed = _wheel_speed(wheels, times) if wheels is not None else None
    if speed is None:
        good = np.isfinite(speed_g)
        if good.sum() >= 2:
            speed = np.interp(t, tg[good], speed_g[good])
        else:
            speed = np.interp(t, tg, _speed(g_time[gi], enu))

    # position: dead reckoning + averaged offset to the fixes (lever arm removed)
    dr = np.stack([_cumtrapz(t, speed * np.cos(yaw)), _cumtrapz(t, speed * np.sin(yaw))], -1)
    yaw_at_fix = np.interp(tg, t, yaw)
    c, s = np.cos(yaw_at_fix), np.sin(yaw_at_fix)
    base_xy = enu[:, :2] - np.stack([c * lever[0] - s * lever[1], s * lever[0] + c * lever[1]], -1)
    err = base_xy - np.stack([np.interp(tg, t, dr[:, k]) for k in range(2)], -1)
    err = np.stack([_window_mean(tg, err[:, k], POSITION_WINDOW_S / 2) for k in range(2)], -1)
    xy = dr + np.stack([np.interp(t, tg, err[:, k]) for k in range(2)], -1)
    up = enu[:, 2] - lever[2]
    z = np.interp(t, tg, _window_mean(tg, up, POSITION_WINDOW_S / 2))
    position = np.column_stack([xy, z])
    # the map's origin is base_link at the first pose (on the ground, not at the antenna)
    base_origin = tuple(float(v) for v in enu_to_geodetic(position[0], *origin))
    return PoseTrack(
        times,
        position - position[0],
        Rotation.from_euler("z", yaw[:, None]),
        np.abs(speed),
        "gnss_imu",
        base_origin,
        "base_link at the first pose (from the first GNSS fix and the antenna lever arm)",
        ESTIMATOR_FUSED,
        len(gnss) - len(gi),
    )


def poses_from_gnss(gnss: pa.Table, rig: Rig) -> PoseTrack:
    """GNSS fixes alone (module docstring) → base_link poses at the fixes' times."""
    g_time = gnss.column("time_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    lat, lon, alt = (_column(gnss, c) for c in ("lat_deg", "lon_deg", "alt_m"))
    gi, dropped = _valid_unique(g_time, _best_stream(gnss, np.isfinite(lat) & np.isfinite(lon)))
    # a fix reported twice (NCLT: a mode-2 and a mode-3 row of one position, ms apart) is one
    # fix: its repeat would be a standstill and then a jump at hundreds of m/s
    same = np.zeros(len(gi), dtype=bool)
    same[1:] = (lat[gi][1:] == lat[gi][:-1]) & (lon[gi][1:] == lon[gi][:-1])
    gi, dropped = gi[~same], dropped + int(same.sum())
    if len(gi) < 2:
        raise BridgeLakeError("poses: fewer than two GNSS fixes, no track")
    times = g_time[gi]
    t = (times - times[0]) / NS_PER_S
    up = alt[gi]
    known = np.isfinite(up)
    up = np.interp(t, t[known], up[known]) if known.any() else np.zeros(len(t))
    up = median_filter(up, size=MEDIAN_FIXES, mode="nearest")
    origin = (float(lat[gi[0]]), float(lon[gi[0]]), float(up[0]))
    enu = geodetic_to_enu(lat[gi], lon[gi], up, *origin)
    # the track: displacement over the fixes within ±TRACK_WINDOW_S/2 (no interpolation
    # across an outage: a window holds the fixes there are)
    lo = np.searchsorted(t, t - TRACK_WINDOW_S / 2, side="left")
    hi = np.searchsorted(t, t + TRACK_WINDOW_S / 2, side="right") - 1
    span = t[hi] - t[lo]
    d = enu[hi, :2] - enu[lo, :2]
    with np.errstate(invalid="ignore", divide="ignore"):
        speed = np.where(span > 0, np.hypot(d[:, 0], d[:, 1]) / span, 0.0)
    moving = speed > MIN_TRACK_SPEED
    if not moving.any():
        raise BridgeLakeError(
            f"poses: the GNSS track never moves faster than {MIN_TRACK_SPEED} m/s, no heading"
        )
    last = np.maximum.accumulate(np.where(moving, np.arange(len(t)), -1))
    last[last < 0] = np.flatnonzero(moving)[0]  # before the first motion: its heading
    yaw = np.arctan2(d[last, 1], d[last, 0])
    frame = gnss.column("frame_id")[int(gi[0])].as_py()
    lever = rig.to_base(frame).translation if frame in rig.frames else np.zeros(3)
    c, s = np.cos(yaw), np.sin(yaw)
    # fix noise averaged over the same window that gives the heading (symmetric: no lag)
    east, north = (_window_mean(t, enu[:, k], TRACK_WINDOW_S / 2) for k in range(2))
    position = np.column_stack(
        [
            east - (c * lever[0] - s * lever[1]),
            north - (s * lever[0] + c * lever[1]),
            enu[:, 2] - lever[2],
        ]
    )
    base_origin = tuple(float(v) for v in enu_to_geodetic(position[0], *origin))
    return PoseTrack(
        times,
        position - position[0],
        Rotation.from_euler("z", yaw[:, None]),
        speed,
        "gnss",
        base_origin,
        "base_link at the first pose (from the first GNSS fix and the antenna lever arm)",
        ESTIMATOR_GNSS,
        dropped,
    )


def _wheel_speed(wheels: pa.Table, times: np.ndarray) -> np.ndarray | None:
    """Mean of left and right wheel speeds at `times`, or None without usable rows."""
    w_time = wheels.column("time_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    v = (_column(wheels, "v_left_mps") + _column(wheels, "v_right_mps")) / 2
    idx, _ = _valid_unique(w_time, np.isfinite(v))
    if len(idx) < 2:
        return None
    return np.interp((times - times[0]) / NS_PER_S, (w_time[idx] - times[0]) / NS_PER_S, v[idx])

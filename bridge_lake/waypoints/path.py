"""From a recorded pose track to a waypoint path, the way people prepare a replay route.

A recorded track is not a route yet: it starts and ends standing (and stands at lights in
between, where positioning noise piles up zig-zags), its samples are spaced by time, not
distance, and its speed is what the driver did, not what a controller can follow. The steps,
all vectorized with numpy:

1. clean: finite samples in time order, one per time stamp; speed from the track, or (where
   missing) from positions over a 0.5 s window, which keeps noise out of slow speeds;
2. trim: drop the stationary start and end (speed ≤ `stop_speed_mps`), keeping the last
   standing sample, so the path starts where the vehicle stood;
3. stops: a stationary run inside the drive becomes one point (its mean position); runs of at
   least `min_stop_s` are stops. Moving samples are thinned to about a quarter spacing of
   travelled distance (integrated speed) so jitter at walking pace cannot zig-zag the path;
4. resample at a quarter spacing, smooth with a cubic Savitzky-Golay filter over
   `smooth_window_m` (a cubic follows arcs, so corners are not cut as a moving average
   would), and resample again at exactly `spacing_m` (n = round(length / spacing) intervals,
   every one of the same arc length);
5. yaw from the resampled path (central differences, unwrapped while processing, wrapped to
   (-π, π] in `Waypoints.yaw`), curvature = d(yaw)/ds;
6. velocity: the recorded speed, at most `v_max_mps` and sqrt(lateral_accel / |curvature|),
   zero at stops, at the end and at a standing start; then forward (`accel_mps2`) and backward
   (`decel_mps2`) acceleration limits, v_i² ≤ v_j² + 2·a·(s_i - s_j), as running minima;
7. flags: `change_flag` 1 at the first waypoint, and at stops and the end together with the
   waypoints up to `stop_lead_m` before them; 0 elsewhere.

Every length is in metres and every speed here in m/s; the CSV writer converts to the km/h
Autoware's waypoint_loader expects (see bridge_lake.waypoints.csv).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.signal import savgol_filter

from bridge_lake.errors import BridgeLakeError
from bridge_lake.geometry import wrap_angle

SPEED_WINDOW_S = 0.5
"""Window of the position-derived speed: long enough to average GNSS noise at a standstill."""
FINE_FRACTION = 4
"""Intermediate resampling at spacing / 4, so the final linear resample does not cut arcs."""
SMOOTH_ORDER = 3
"""Savitzky-Golay polynomial order: a cubic reproduces arcs and clothoid entries."""
MIN_CURVATURE = 1e-6
"""Below this (radius 1000 km) the curvature speed limit does not apply."""


class WaypointError(BridgeLakeError):
    """A pose track that cannot become waypoints (too short, never moving, bad parameters)."""


@dataclass(frozen=True)
class WaypointParams:
    """Processing parameters; metres, seconds, m/s and m/s² throughout."""

    spacing_m: float = 1.0
    """Arc length between waypoints (waypoint_saver's `interval` default is 1 m too)."""
    smooth_window_m: float = 5.0
    """Savitzky-Golay window along the path; 0 disables smoothing."""
    stop_speed_mps: float = 0.3
    """At or below this the vehicle counts as standing."""
    min_stop_s: float = 2.0
    """A standstill inside the drive at least this long is a stop."""
    lateral_accel_mps2: float = 2.0
    """Curvature speed limit: v ≤ sqrt(a_lat / |κ|); 2 m/s² is comfortable."""
    accel_mps2: float = 1.0
    """Forward limit: how fast the profile may speed up along the path."""
    decel_mps2: float = 1.0
    """Backward limit: how early it slows down before a stop, the end or a curve."""
    v_max_mps: float = 60.0 / 3.6
    """Speed cap (60 km/h)."""
    stop_lead_m: float = 5.0
    """change_flag 1 also on the waypoints up to this distance before a stop and the end."""
    max_yaw_step_rad: float = 0.2
    """Checklist: the largest yaw change between neighbouring waypoints."""

    def __post_init__(self) -> None:
        positive = ("spacing_m", "lateral_accel_mps2", "accel_mps2", "decel_mps2", "v_max_mps")
        for name in (*positive, "max_yaw_step_rad"):
            value = getattr(self, name)
            if not value > 0:
                raise WaypointError(f"waypoint parameter {name} must be > 0, not {value}")
        for name in ("smooth_window_m", "stop_speed_mps", "min_stop_s", "stop_lead_m"):
            value = getattr(self, name)
            if not value >= 0:
                raise WaypointError(f"waypoint parameter {name} must be ≥ 0, not {value}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class PoseTrack:
    """Positions of the vehicle (base_link) in a map frame over time."""

    time_ns: np.ndarray
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    speed_mps: np.ndarray | None = None
    """Recorded horizontal speed; None or NaN where unknown (then derived from positions)."""
    source: str = ""
    """Where the poses came from, for messages and reports."""


@dataclass(frozen=True)
class Waypoints:
    """The waypoint path: one entry per waypoint, spacing `spacing_m` along the path."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    yaw: np.ndarray
    """Heading of the path, radians counter-clockwise from the map x axis, in (-π, π]."""
    velocity_mps: np.ndarray
    change_flag: np.ndarray
    s: np.ndarray
    """Arc length from the first waypoint [m]."""
    curvature: np.ndarray
    """Signed curvature [1/m], positive turning left."""
    recorded_speed_mps: np.ndarray
    """The recorded speed at each waypoint, before any limit."""
    stops: np.ndarray
    """Indices of the waypoints where the vehicle stood inside the drive."""
    spacing_m: float
    """Actual spacing: length / round(length / params.spacing_m)."""
    params: WaypointParams
    source: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.x)

    @property
    def length_m(self) -> float:
        return float(self.s[-1])


def build_waypoints(track: PoseTrack, params: WaypointParams | None = None) -> Waypoints:
    """The waypoint path of a pose track (see the module docstring for the steps)."""
    params = params or WaypointParams()
    t, x, y, z, speed = _clean(track)
    speed = _fill_speed(t, x, y, speed)
    moving = speed > params.stop_speed_mps
    if not moving.any():
        raise WaypointError(
            f"{track.source or 'pose track'}: the vehicle never moves "
            f"(every speed ≤ {params.stop_speed_mps} m/s over {len(t)} poses)"
        )
    first = int(np.argmax(moving))
    last = len(moving) - 1 - int(np.argmax(moving[::-1]))
    lo, hi = max(first - 1, 0), min(last + 1, len(t) - 1)
    stats: dict[str, Any] = {
        "poses": len(track.time_ns),
        "poses_used": int(hi - lo + 1),
        "trimmed_start_s": round(float(t[lo] - t[0]) / 1e9, 3),
        "trimmed_end_s": round(float(t[-1] - t[hi]) / 1e9, 3),
        "started_standing": bool(first > 0),
        "ended_standing": bool(last < len(t) - 1),
    }
    sl = slice(lo, hi + 1)
    geo = _geometry(t[sl], x[sl], y[sl], z[sl], speed[sl], moving[sl], params)
    u = np.concatenate([[0.0], np.cumsum(np.hypot(np.diff(geo["x"]), np.diff(geo["y"])))])
    stop_u = u[geo["stop"]]
    stats["stop_durations_s"] = [round(float(d), 1) for d in geo["stop_s"]]
    keep = np.concatenate([[True], np.diff(u) > 1e-9])
    u = u[keep]
    raw_length = float(u[-1])
    if raw_length < params.spacing_m:
        raise WaypointError(
            f"{track.source or 'pose track'}: the path is {raw_length:.2f} m long, shorter "
            f"than one waypoint spacing ({params.spacing_m} m)"
        )
    fine = _resample_fine(u, {k: geo[k][keep] for k in ("x", "y", "z", "speed")}, params)
    out = _resample_final(fine, params)
    s = out["s"]
    edge = 2 if len(s) > 2 else 1  # second-order ends: a chord is the tangent of its middle
    yaw_u = np.unwrap(
        np.arctan2(np.gradient(out["y"], edge_order=edge), np.gradient(out["x"], edge_order=edge))
    )
    curvature = np.gradient(yaw_u, s, edge_order=edge) if len(s) > 2 else np.zeros_like(s)
    stops = _stop_indices(out["u"], stop_u)
    velocity = velocity_profile(
        s,
        out["speed"],
        curvature,
        params,
        zero_at=np.concatenate([stops, [len(s) - 1], [0] if stats["started_standing"] else []]),
    )
    flags = change_flags(s, stops, params.stop_lead_m)
    stats.update(raw_length_m=round(raw_length, 3), length_m=round(float(s[-1]), 3))
    return Waypoints(
        x=out["x"],
        y=out["y"],
        z=out["z"],
        yaw=wrap_angle(yaw_u),
        velocity_mps=velocity,
        change_flag=flags,
        s=s,
        curvature=curvature,
        recorded_speed_mps=out["speed"],
        stops=stops,
        spacing_m=float(s[-1] / (len(s) - 1)),
        params=params,
        source=track.source,
        stats=stats,
    )


def velocity_profile(
    s: np.ndarray,
    recorded: np.ndarray,
    curvature: np.ndarray,
    params: WaypointParams,
    zero_at: np.ndarray | None = None,
) -> np.ndarray:
    """Recorded speed limited by v_max and the lateral acceleration, zero at `zero_at`, then
    acceleration-limited both ways.

    The forward limit v_i² ≤ min_{j≤i} (v_j² + 2a(s_i - s_j)) = 2a·s_i + min_{j≤i}(v_j² - 2a·s_j)
    is a running minimum, and the backward one the same from the end: exact, no loop. The
    backward pass only lowers speeds ahead of slower points, so the forward limit still holds.
    """
    v = np.minimum(np.nan_to_num(recorded, nan=0.0), params.v_max_mps)
    kappa = np.maximum(np.abs(curvature), MIN_CURVATURE)
    v = np.minimum(v, np.sqrt(params.lateral_accel_mps2 / kappa))
    if zero_at is not None and len(zero_at):
        v[np.asarray(zero_at, dtype=np.int64)] = 0.0
    v2 = np.maximum(v, 0.0) ** 2
    a, d = params.accel_mps2, params.decel_mps2
    v2 = np.minimum(v2, 2 * a * s + np.minimum.accumulate(v2 - 2 * a * s))
    back = np.minimum.accumulate((v2 + 2 * d * s)[::-1])[::-1]
    v2 = np.minimum(v2, back - 2 * d * s)
    return np.sqrt(np.maximum(v2, 0.0))


def change_flags(s: np.ndarray, stops: np.ndarray, lead_m: float) -> np.ndarray:
    """1 on the first waypoint, and on stops and the last waypoint with the `lead_m` before
    them; 0 elsewhere."""
    flags = np.zeros(len(s), dtype=np.int8)
    flags[0] = 1
    marks = s[np.concatenate([np.asarray(stops, dtype=np.int64), [len(s) - 1]])]
    lo = np.searchsorted(s, marks - lead_m - 1e-9, side="left")
    hi = np.searchsorted(s, marks + 1e-9, side="right")
    cover = np.zeros(len(s) + 1, dtype=np.int64)
    np.add.at(cover, lo, 1)
    np.add.at(cover, hi, -1)
    flags[np.cumsum(cover)[:-1] > 0] = 1
    return flags


# --- steps ----------------------------------------------------------------------------------


def _clean(track: PoseTrack) -> tuple[np.ndarray, ...]:
    t = np.asarray(track.time_ns, dtype=np.int64)
    x, y, z = (np.asarray(a, dtype=np.float64) for a in (track.x, track.y, track.z))
    speed = (
        np.full(len(t), np.nan)
        if track.speed_mps is None
        else np.asarray(track.speed_mps, dtype=np.float64)
    )
    ok = np.isfinite(x) & np.isfinite(y)
    z = np.where(np.isfinite(z), z, 0.0)
    order = np.argsort(t[ok], kind="stable")
    t, x, y, z, speed = (a[ok][order] for a in (t, x, y, z, speed))
    first = np.concatenate([[True], np.diff(t) > 0])
    t, x, y, z, speed = (a[first] for a in (t, x, y, z, speed))
    if len(t) < 2:
        raise WaypointError(f"{track.source or 'pose track'}: {len(t)} usable poses; need ≥ 2")
    return t, x, y, z, speed


def _fill_speed(t: np.ndarray, x: np.ndarray, y: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """Recorded speed where finite, else distance over a SPEED_WINDOW_S window centred on the
    sample (a windowed difference, not neighbour steps: GNSS noise between two samples 10 ms
    apart would read as metres per second)."""
    missing = ~np.isfinite(speed)
    if not missing.any():
        return np.abs(speed)
    half = int(SPEED_WINDOW_S / 2 * 1e9)
    hi = np.searchsorted(t, t + half, side="right") - 1
    lo = np.searchsorted(t, t - half, side="left")
    dt = (t[hi] - t[lo]) / 1e9
    with np.errstate(invalid="ignore", divide="ignore"):
        derived = np.where(dt > 0, np.hypot(x[hi] - x[lo], y[hi] - y[lo]) / dt, 0.0)
    return np.where(missing, derived, np.abs(speed))


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of the runs of True in `mask`."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _run_means(values: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    return (cumulative[end] - cumulative[start]) / np.maximum(end - start, 1)


def _geometry(
    t: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    z: np.ndarray,
    speed: np.ndarray,
    moving: np.ndarray,
    params: WaypointParams,
) -> dict[str, np.ndarray]:
    """Moving samples thinned by travelled distance, plus one point per standstill (its mean
    position, speed 0), in time order; `stop` marks the standstills long enough to be stops."""
    travelled = np.concatenate([[0.0], np.cumsum((speed[1:] + speed[:-1]) / 2 * np.diff(t) / 1e9)])
    bucket = np.floor(travelled / (params.spacing_m / FINE_FRACTION))
    keep = moving & np.concatenate([[True], np.diff(bucket) > 0])
    keep[[0, -1]] = moving[[0, -1]]  # a drive that starts or ends moving keeps its ends
    start, end = _runs(~moving)
    rep = {k: _run_means(v, start, end) for k, v in (("x", x), ("y", y), ("z", z))}
    duration = (t[end - 1] - t[start]) / 1e9 if len(start) else np.empty(0)
    inner = (start > 0) & (end < len(t))
    is_stop = inner & (duration >= params.min_stop_s)
    idx = np.flatnonzero(keep)
    times = np.concatenate([t[idx], t[start]])
    order = np.argsort(times, kind="stable")
    geo = {
        "x": np.concatenate([x[idx], rep["x"]])[order],
        "y": np.concatenate([y[idx], rep["y"]])[order],
        "z": np.concatenate([z[idx], rep["z"]])[order],
        "speed": np.concatenate([speed[idx], np.zeros(len(start))])[order],
        "stop": np.concatenate([np.zeros(len(idx), bool), is_stop])[order],
    }
    geo["stop_s"] = duration[is_stop]
    return geo


def _resample_fine(
    u: np.ndarray, geo: dict[str, np.ndarray], params: WaypointParams
) -> dict[str, np.ndarray]:
    """Uniform resampling at spacing / FINE_FRACTION along the raw arc length `u`, then the
    Savitzky-Golay smoothing of x, y, z. `u` is kept so stops can be found again later."""
    step = params.spacing_m / FINE_FRACTION
    uf = np.linspace(0.0, u[-1], max(int(np.ceil(u[-1] / step)), 1) + 1)
    out = {k: np.interp(uf, u, geo[k]) for k in ("x", "y", "z", "speed")}
    out["u"] = uf
    window = round(params.smooth_window_m / step) | 1
    window = min(window, len(uf) if len(uf) % 2 else len(uf) - 1)
    if window > SMOOTH_ORDER + 1:
        for k in ("x", "y", "z"):
            out[k] = savgol_filter(out[k], window, SMOOTH_ORDER, mode="interp")
    return out


def _resample_final(fine: dict[str, np.ndarray], params: WaypointParams) -> dict[str, np.ndarray]:
    """Equal arc-length intervals of about `spacing_m` over the smoothed path."""
    sf = np.concatenate([[0.0], np.cumsum(np.hypot(np.diff(fine["x"]), np.diff(fine["y"])))])
    length = float(sf[-1])
    n = max(round(length / params.spacing_m), 1)
    s = np.linspace(0.0, length, n + 1)
    out = {k: np.interp(s, sf, fine[k]) for k in ("x", "y", "z", "speed", "u")}
    out["s"] = s
    return out


def _stop_indices(u_waypoints: np.ndarray, stop_u: np.ndarray) -> np.ndarray:
    """The waypoint nearest each stop, found by the raw arc length (not by position, which
    would confuse two passes of the same place)."""
    if not len(stop_u):
        return np.empty(0, dtype=np.int64)
    i = np.clip(np.searchsorted(u_waypoints, stop_u), 1, len(u_waypoints) - 1)
    nearer_left = (stop_u - u_waypoints[i - 1]) < (u_waypoints[i] - stop_u)
    return np.unique(np.where(nearer_left, i - 1, i)).astype(np.int64)

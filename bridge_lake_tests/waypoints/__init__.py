"""Analytic drives for the waypoint tests: a path given by arc length, driven with a
trapezoidal speed profile, standing at the ends and at stops, sampled at a fixed rate."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from bridge_lake.waypoints import PoseTrack

PathFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def line(heading: float) -> PathFn:
    return lambda s: (s * np.cos(heading), s * np.sin(heading))


def arc(radius: float) -> PathFn:
    """Counter-clockwise circle through the origin, heading +x at s = 0, centre (0, R)."""
    return lambda s: (radius * np.sin(s / radius), radius * (1 - np.cos(s / radius)))


def u_turn(straight: float, radius: float) -> PathFn:
    """`straight` m east, a half circle of `radius` to the left, `straight` m back west."""

    def f(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        bend = np.clip(s - straight, 0, np.pi * radius)
        back = np.clip(s - straight - np.pi * radius, 0, None)
        x = np.minimum(s, straight) + radius * np.sin(bend / radius) - back
        y = radius * (1 - np.cos(bend / radius))
        return x, y

    return f


def speed_along(
    length: float, v: float, accel: float, stops: list[float]
) -> tuple[np.ndarray, np.ndarray]:
    """(time, arc length) of legs between the stop positions, each a trapezoid: accelerate,
    cruise at v, brake to 0 (so the car stands at every stop)."""
    marks = [0.0, *stops, length]
    ts, ss, t0 = [], [], 0.0
    for a, b in itertools.pairwise(marks):
        d = b - a
        vp = min(v, np.sqrt(accel * d))
        ta = vp / accel
        tc = (d - vp * ta) / vp
        t = np.linspace(0, 2 * ta + tc, 2001)
        s = np.where(
            t < ta,
            0.5 * accel * t**2,
            np.where(
                t < ta + tc,
                0.5 * vp * ta + vp * (t - ta),
                d - 0.5 * accel * np.clip(2 * ta + tc - t, 0, None) ** 2,
            ),
        )
        ts.append(t0 + t)
        ss.append(a + s)
        t0 += t[-1]
    return np.concatenate(ts), np.concatenate(ss)


def drive(
    path: PathFn,
    length: float,
    *,
    v: float = 10.0,
    accel: float = 2.0,
    rate_hz: float = 20.0,
    stand_start_s: float = 0.0,
    stand_end_s: float = 0.0,
    stops: tuple[tuple[float, float], ...] = (),
    noise_m: float = 0.0,
    with_speed: bool = True,
    moving_start: bool = False,
    seed: int = 0,
) -> PoseTrack:
    """Sampled drive along `path`. `stops`: (arc length, seconds standing). With
    `moving_start` the car passes the start at speed v and keeps it to the end."""
    if moving_start:
        t_leg = np.linspace(0, length / v, 2001)
        s_leg = v * t_leg
    else:
        t_leg, s_leg = speed_along(length, v, accel, [s for s, _ in stops])
    # standing: shift every sample after a stop by its standing time
    shift = np.zeros_like(t_leg)
    for s_stop, seconds in stops:
        shift += np.where(s_leg >= s_stop - 1e-9, seconds, 0.0)
    t_cont = stand_start_s + t_leg + shift
    end = t_cont[-1] + stand_end_s
    t = np.arange(0.0, end, 1.0 / rate_hz)
    # arc length at time t: flat while standing (interp over the monotone time grid)
    knots_t = np.concatenate([[0.0], t_cont, [end + 1.0]])
    knots_s = np.concatenate([[0.0], s_leg, [length]])
    order = np.argsort(knots_t, kind="stable")
    s = np.interp(t, knots_t[order], knots_s[order])
    speed = np.abs(np.gradient(s, t))
    x, y = path(s)
    rng = np.random.default_rng(seed)
    if noise_m:
        x = x + rng.normal(0, noise_m, len(x))
        y = y + rng.normal(0, noise_m, len(y))
    return PoseTrack(
        (t * 1e9).astype(np.int64),
        x,
        y,
        np.zeros_like(x),
        speed if with_speed else None,
        "analytic",
    )

"""body_twist against motions whose velocity is known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from bridge_lake.geometry import body_twist, rpy_to_matrix

NS = 1_000_000_000


def circle(n: int = 400, rate_hz: float = 100.0, v: float = 1.5, radius: float = 4.0):
    """A right turn in NED (heading grows) at speed v around a circle; heading is wrapped to
    (-π, π] as NCLT writes it, the body pitched and rolled by constant angles."""
    t = np.arange(n) / rate_hz
    w = v / radius
    heading = w * t + 3.0  # passes ±π early on
    x = radius * np.sin(heading) + 1.0
    y = -radius * np.cos(heading) - 2.0
    z = np.full(n, 0.5)
    return (
        (t * 1e9).astype(np.int64) + 1_325_000_000 * NS,
        np.stack([x, y, z], -1),
        np.angle(np.exp(1j * heading)),
        v,
        w,
    )


def test_level_circle_is_forward_speed_and_yaw_rate():
    t, pos, heading, v, w = circle()
    zero = np.zeros(len(t))
    lin, ang = body_twist(t, pos, zero, zero, heading)
    # central differences of a circle: chord / time, off by (w dt)^2 / 6 relative
    np.testing.assert_allclose(lin[1:-1], np.tile([v, 0, 0], (len(t) - 2, 1)), atol=2e-5)
    np.testing.assert_allclose(ang, np.tile([0, 0, w], (len(t), 1)), atol=1e-9)
    # one-sided at the ends: still the speed, the lateral part half a step off
    assert lin[0, 0] == pytest.approx(v, rel=1e-4) and lin[-1, 0] == pytest.approx(v, rel=1e-4)


def test_tilted_body_velocity_in_its_own_axes():
    """A constant roll and pitch: the world velocity (v along the heading, horizontal) seen in
    the tilted body's axes is Rᵀ v_world, the yaw rate likewise Rᵀ (0, 0, w)."""
    t, pos, heading, v, w = circle()
    roll, pitch = np.full(len(t), 0.1), np.full(len(t), -0.05)
    lin, ang = body_twist(t, pos, roll, pitch, heading)
    rot = rpy_to_matrix(roll, pitch, heading)
    world_v = np.stack([v * np.cos(heading), v * np.sin(heading), np.zeros(len(t))], -1)
    expected_lin = np.einsum("nji,nj->ni", rot, world_v)
    expected_ang = np.einsum("nji,j->ni", rot, np.array([0, 0, w]))
    np.testing.assert_allclose(lin[1:-1], expected_lin[1:-1], atol=2e-5)
    np.testing.assert_allclose(ang, expected_ang, atol=1e-9)
    # the tilt really shows in the body axes: pitch in the velocity, roll in the yaw rate
    assert abs(lin[:, 2]).min() > 0.07 and abs(ang[:, 1]).min() > 0.03


def test_invalid_rows_gaps_and_repeats():
    t, pos, heading, v, _ = circle(n=50)
    zero = np.zeros(len(t))
    pos[10] = np.nan  # an invalid ground-truth row: NaN itself, neighbours bridge it
    t[30:] += 5 * NS  # a 5 s logging gap between rows 29 and 30
    t[40], pos[40] = t[41], pos[41]  # a repeated row
    lin, ang = body_twist(t, pos, zero, zero, heading)
    assert np.isnan(lin[10]).all() and np.isnan(ang[10]).all()
    assert lin[9, 0] == pytest.approx(v, rel=1e-3) and lin[11, 0] == pytest.approx(v, rel=1e-3)
    # rows 29 and 30 are differenced one-sidedly, not across the gap (which would read ~0)
    assert lin[29, 0] == pytest.approx(v, rel=1e-3) and lin[30, 0] == pytest.approx(v, rel=1e-3)
    assert np.isfinite(lin[40]).all() and np.isfinite(lin[41]).all()
    assert lin[40, 0] == pytest.approx(v, rel=1e-3)
    # a lone valid pose has no neighbour: unknown, not zero
    lone, _ = body_twist(t[:1], pos[:1], zero[:1], zero[:1], heading[:1])
    assert np.isnan(lone).all()
    with pytest.raises(ValueError, match="one row each"):
        body_twist(t, pos[:-1], zero, zero, heading)

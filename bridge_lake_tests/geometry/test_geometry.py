"""geometry: known vectors, REP-103 frame changes, and geodesy against pymap3d."""

from __future__ import annotations

import math

import numpy as np
import pymap3d
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge_lake.geometry import (
    FRD_TO_FLU,
    NED_TO_ENU,
    OPTICAL_IN_BODY,
    LinearizedNed,
    Transform,
    enu_to_geodetic,
    geodetic_to_enu,
    is_rotation_matrix,
    matrix_to_quaternion,
    quaternion_to_matrix,
    quaternion_to_rpy,
    rpy_to_matrix,
    rpy_to_quaternion,
    slerp,
    transform_points,
    wrap_angle,
)
from bridge_lake.geometry.geodesy import ecef_to_geodetic, geodetic_to_ecef

H = math.sqrt(0.5)


@pytest.mark.parametrize(
    ("rpy", "vector", "expected"),
    [
        ((0, 0, math.pi / 2), (1, 0, 0), (0, 1, 0)),  # yaw +90°: x → y (left)
        ((0, math.pi / 2, 0), (1, 0, 0), (0, 0, -1)),  # pitch +90°: x → -z (nose down)
        ((math.pi / 2, 0, 0), (0, 1, 0), (0, 0, 1)),  # roll +90°: y → z
        # Rz(90°) Ry(90°) Rx(0): first pitch x → -z, then yaw leaves -z alone
        ((0, math.pi / 2, math.pi / 2), (1, 0, 0), (0, 0, -1)),
        # order check: Rz(90) Ry(0) Rx(90) applied to y: roll y → z, yaw keeps z
        ((math.pi / 2, 0, math.pi / 2), (0, 1, 0), (0, 0, 1)),
        # ... and to z: roll z → -y, yaw -y → x
        ((math.pi / 2, 0, math.pi / 2), (0, 0, 1), (1, 0, 0)),
    ],
)
def test_rpy_is_rz_ry_rx_on_known_vectors(rpy, vector, expected):
    np.testing.assert_allclose(rpy_to_matrix(*rpy) @ vector, expected, atol=1e-15)


def test_rpy_quaternion_known_values_and_round_trips():
    np.testing.assert_allclose(rpy_to_quaternion(0, 0, math.pi / 2), [0, 0, H, H], atol=1e-15)
    np.testing.assert_allclose(rpy_to_quaternion(math.pi, 0, 0), [1, 0, 0, 0], atol=1e-15)
    rng = np.random.default_rng(1)
    rpy = rng.uniform([-3, -1.5, -3], [3, 1.5, 3], size=(50, 3))
    q = rpy_to_quaternion(rpy[:, 0], rpy[:, 1], rpy[:, 2])
    assert q.shape == (50, 4)
    np.testing.assert_allclose(quaternion_to_rpy(q), rpy, atol=1e-12)
    np.testing.assert_allclose(quaternion_to_matrix(q), rpy_to_matrix(*rpy.T), atol=1e-12)
    m = rpy_to_matrix(*rpy.T)
    np.testing.assert_allclose(np.abs(np.sum(matrix_to_quaternion(m) * q, axis=1)), 1, atol=1e-12)


def test_non_rotations_are_refused_not_projected():
    assert is_rotation_matrix(np.eye(3))
    assert not is_rotation_matrix(np.diag([1.0, 1.0, -1.0]))  # a reflection
    assert not is_rotation_matrix(np.eye(3) * 1.01)
    assert not is_rotation_matrix(np.array([[1, 0, 0], [0, 1, 0.01], [0, 0, 1.0]]))
    with pytest.raises(ValueError, match="not a rotation"):
        matrix_to_quaternion(np.diag([1.0, -1.0, 1.0]))


def test_frame_constants_are_the_rep103_changes():
    # FRD body → FLU base_link: forward stays, right becomes -left, down becomes -up
    np.testing.assert_array_equal(FRD_TO_FLU @ [1, 0, 0], [1, 0, 0])
    np.testing.assert_array_equal(FRD_TO_FLU @ [0, 1, 0], [0, -1, 0])
    np.testing.assert_array_equal(FRD_TO_FLU @ [0, 0, 1], [0, 0, -1])
    # NED → ENU: north (x_ned) is y_enu, east is x_enu, down is -up
    np.testing.assert_array_equal(NED_TO_ENU @ [1, 0, 0], [0, 1, 0])
    np.testing.assert_array_equal(NED_TO_ENU @ [0, 1, 0], [1, 0, 0])
    np.testing.assert_array_equal(NED_TO_ENU @ [0, 0, 1], [0, 0, -1])
    for m in (FRD_TO_FLU, NED_TO_ENU, OPTICAL_IN_BODY):
        assert is_rotation_matrix(m)
    # optical: z forward = body x; x right = body -y; y down = body -z (REP-103 `_optical`)
    np.testing.assert_array_equal(OPTICAL_IN_BODY @ [0, 0, 1], [1, 0, 0])
    np.testing.assert_array_equal(OPTICAL_IN_BODY @ [1, 0, 0], [0, -1, 0])
    np.testing.assert_array_equal(OPTICAL_IN_BODY @ [0, 1, 0], [0, 0, -1])
    np.testing.assert_allclose(
        rpy_to_matrix(-math.pi / 2, 0, -math.pi / 2), OPTICAL_IN_BODY, atol=1e-15
    )


def test_transform_composition_inverse_and_points():
    a = Transform.from_rpy([1, 2, 3], [0, 0, 90], degrees=True)
    b = Transform.from_rpy([1, 0, 0], [0, 90, 0], degrees=True)
    # b maps (0,0,1) (its z) to x: (1,0,0) then +t → (2,0,0); a: yaw 90 → (0,2,0) + (1,2,3)
    np.testing.assert_allclose((a @ b).apply([0, 0, 1]), [1, 4, 3], atol=1e-12)
    np.testing.assert_allclose(a.inverse().apply(a.apply([0.3, -2, 5])), [0.3, -2, 5], atol=1e-12)
    np.testing.assert_allclose((a @ a.inverse()).matrix, np.eye(3), atol=1e-15)
    assert a.quaternion[3] >= 0 and (-1 * a.quaternion)[3] <= 0


def test_transform_points_matches_float64_reference():
    rng = np.random.default_rng(3)
    pts = rng.uniform(-80, 80, size=(10_000, 3)).astype(np.float32)
    t = Transform.from_rpy([1.2, -0.3, 1.9], [0.5, -1.0, 90.0], degrees=True)
    got = transform_points(t.matrix, t.translation, *pts.T)
    assert got.dtype == np.float32 and got.shape == (3, 10_000)
    np.testing.assert_allclose(got.T, t.apply(pts.astype(np.float64)), atol=2e-5)


def test_wrap_angle_into_half_open_interval():
    np.testing.assert_allclose(
        wrap_angle([math.pi, -math.pi, 3 * math.pi, 0.1, -3.2, 2 * math.pi]),
        [math.pi, math.pi, math.pi, 0.1, -3.2 + 2 * math.pi, 0.0],
        atol=1e-15,
    )


def test_slerp_midpoint_and_int64_times():
    t = np.array([1_700_000_000_000_000_000, 1_700_000_000_100_000_000])
    q = rpy_to_quaternion([0, 0], [0, 0], [0, math.pi / 2])
    mid = slerp(t, q, np.array([1_700_000_000_050_000_000]))
    np.testing.assert_allclose(quaternion_to_rpy(mid)[0], [0, 0, math.pi / 4], atol=1e-12)


# --- geodesy -----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    lat=st.floats(-89.9, 89.9),
    lon=st.floats(-180, 180),
    alt=st.floats(-500, 9000),
)
def test_ecef_round_trip_and_against_pymap3d(lat, lon, alt):
    ecef = geodetic_to_ecef(lat, lon, alt)
    np.testing.assert_allclose(ecef, pymap3d.geodetic2ecef(lat, lon, alt), atol=1e-6)
    back = ecef_to_geodetic(ecef)
    assert abs(back[0] - lat) < 1e-9 and abs(back[2] - alt) < 1e-4
    assert abs(wrap_angle(math.radians(back[1] - lon))) < 1e-9


def test_enu_against_pymap3d_and_inverse():
    rng = np.random.default_rng(5)
    lat0, lon0, alt0 = 48.7758, 11.4320, 371.2
    lat = lat0 + rng.uniform(-0.05, 0.05, 100)
    lon = lon0 + rng.uniform(-0.05, 0.05, 100)
    alt = alt0 + rng.uniform(-50, 50, 100)
    enu = geodetic_to_enu(lat, lon, alt, lat0, lon0, alt0)
    ref = np.stack(pymap3d.geodetic2enu(lat, lon, alt, lat0, lon0, alt0), -1)
    np.testing.assert_allclose(enu, ref, atol=1e-6)  # micrometres
    back = enu_to_geodetic(enu, lat0, lon0, alt0)
    np.testing.assert_allclose(back[0], lat, atol=1e-10)
    np.testing.assert_allclose(back[1], lon, atol=1e-10)
    np.testing.assert_allclose(back[2], alt, atol=1e-5)


def test_nclt_linearization_against_a_true_tangent_plane():
    """The NCLT ground-truth linearization (sphere-like, its own radii) vs WGS-84 NED from
    pymap3d: within 1 km of the origin they agree to 0.1 m horizontally; vertically the
    linearization ignores the Earth's curvature (d²/2R below the tangent plane)."""
    lin = LinearizedNed(42.293227, -83.709657, 270.0, 6378135.0, 6356750.0)
    rng = np.random.default_rng(7)
    north, east = rng.uniform(-700, 700, (2, 200))
    lat, lon, alt = pymap3d.ned2geodetic(north, east, 0.0, 42.293227, -83.709657, 270.0)
    ned = lin.to_ned(lat, lon, alt)
    horizontal = np.hypot(ned[:, 0] - north, ned[:, 1] - east)
    assert horizontal.max() < 0.1
    curvature = (north**2 + east**2) / (2 * 6.371e6)
    np.testing.assert_allclose(ned[:, 2], -curvature, atol=0.01)
    back = lin.to_geodetic(*ned.T)
    np.testing.assert_allclose(back[0], lat, atol=1e-11)
    np.testing.assert_allclose(back[1], lon, atol=1e-11)
    np.testing.assert_allclose(back[2], alt, atol=1e-9)
    # the radii formula of calibration.yaml, independently: meridional M and normal N radius
    a, b = 6378135.0, 6356750.0
    e2 = 1 - (b / a) ** 2
    s = math.sin(math.radians(42.293227))
    m = a * (1 - e2) / (1 - e2 * s * s) ** 1.5
    n = a / math.sqrt(1 - e2 * s * s)
    assert lin.radii == pytest.approx((m, n), rel=1e-12)

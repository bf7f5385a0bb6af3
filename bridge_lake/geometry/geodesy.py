"""Geodesy: WGS-84 geodetic ↔ ECEF ↔ local ENU tangent planes, and the NCLT linearization.

Vectorized numpy, degrees for latitude/longitude at the interfaces (as NavSatFix and the
lake's gnss table carry them), metres elsewhere. Tested against pymap3d.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Ellipsoid:
    a: float
    """equatorial radius [m]"""
    b: float
    """polar radius [m]"""

    @property
    def e2(self) -> float:
        return 1.0 - (self.b / self.a) ** 2


WGS84 = Ellipsoid(6378137.0, 6378137.0 * (1.0 - 1.0 / 298.257223563))


def geodetic_to_ecef(lat_deg, lon_deg, alt_m, ell: Ellipsoid = WGS84) -> np.ndarray:
    """Earth-centred, earth-fixed x, y, z [m], shape (..., 3)."""
    lat, lon = np.radians(lat_deg), np.radians(lon_deg)
    alt = np.asarray(alt_m, dtype=np.float64)
    n = ell.a / np.sqrt(1.0 - ell.e2 * np.sin(lat) ** 2)
    return np.stack(
        [
            (n + alt) * np.cos(lat) * np.cos(lon),
            (n + alt) * np.cos(lat) * np.sin(lon),
            (n * (1.0 - ell.e2) + alt) * np.sin(lat),
        ],
        axis=-1,
    )


def ecef_to_geodetic(ecef: np.ndarray, ell: Ellipsoid = WGS84) -> tuple[np.ndarray, ...]:
    """Latitude, longitude [deg] and height [m] of ECEF points (Heikkinen's closed form,
    sub-millimetre near the Earth's surface, no iteration)."""
    x, y, z = (np.asarray(ecef, dtype=np.float64)[..., i] for i in range(3))
    a, b, e2 = ell.a, ell.b, ell.e2
    ep2 = (a * a - b * b) / (b * b)
    p = np.hypot(x, y)
    f = 54.0 * b * b * z * z
    g = p * p + (1.0 - e2) * z * z - e2 * (a * a - b * b)
    c = e2 * e2 * f * p * p / g**3
    s = np.cbrt(1.0 + c + np.sqrt(c * c + 2.0 * c))
    k = s + 1.0 + 1.0 / s
    pp = f / (3.0 * k * k * g * g)
    q = np.sqrt(1.0 + 2.0 * e2 * e2 * pp)
    r0 = -pp * e2 * p / (1.0 + q) + np.sqrt(
        0.5 * a * a * (1.0 + 1.0 / q) - pp * (1.0 - e2) * z * z / (q * (1.0 + q)) - 0.5 * pp * p * p
    )
    u = np.hypot(p - e2 * r0, z)
    v = np.sqrt((p - e2 * r0) ** 2 + (1.0 - e2) * z * z)
    z0 = b * b * z / (a * v)
    height = u * (1.0 - b * b / (a * v))
    lat = np.degrees(np.arctan2(z + ep2 * z0, p))
    lon = np.degrees(np.arctan2(y, x))
    return lat, lon, height


def _enu_basis(lat0_deg: float, lon0_deg: float) -> np.ndarray:
    """Rows: east, north, up unit vectors at the origin, in ECEF."""
    lat, lon = np.radians(lat0_deg), np.radians(lon0_deg)
    return np.array(
        [
            [-np.sin(lon), np.cos(lon), 0.0],
            [-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)],
            [np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)],
        ]
    )


def geodetic_to_enu(
    lat_deg, lon_deg, alt_m, lat0_deg: float, lon0_deg: float, alt0_m: float
) -> np.ndarray:
    """East, north, up [m] (shape (..., 3)) in the tangent plane at the origin (WGS-84)."""
    d = geodetic_to_ecef(lat_deg, lon_deg, alt_m) - geodetic_to_ecef(lat0_deg, lon0_deg, alt0_m)
    return d @ _enu_basis(lat0_deg, lon0_deg).T


def enu_to_geodetic(
    enu: np.ndarray, lat0_deg: float, lon0_deg: float, alt0_m: float
) -> tuple[np.ndarray, ...]:
    """Inverse of `geodetic_to_enu`: latitude, longitude [deg], altitude [m]."""
    ecef = np.asarray(enu, dtype=np.float64) @ _enu_basis(lat0_deg, lon0_deg)
    return ecef_to_geodetic(ecef + geodetic_to_ecef(lat0_deg, lon0_deg, alt0_m))


@dataclass(frozen=True)
class LinearizedNed:
    """A local NED frame linearized at a geodetic origin on an ellipsoid of radii a, b, as the
    NCLT ground truth defines it (its paper's Eq. 2/3; calibration.yaml):

        x = sin(lat - lat0) r_ns,  y = sin(lon - lon0) r_ew cos(lat0),  z = alt0 - alt
        r_ns = (a b)² / ((a cos lat0)² + (b sin lat0)²)^1.5,  r_ew = a² / √(...)

    Not a true tangent plane: 1 km from the origin it is within 0.1 m of WGS-84 ENU
    horizontally, and its z ignores the Earth's curvature (d² / 2R: 8 cm at 1 km; tested).
    """

    lat0_deg: float
    lon0_deg: float
    alt0_m: float
    a: float
    b: float

    @cached_property
    def radii(self) -> tuple[float, float]:
        """(r_ns, r_ew): the meridional and prime-vertical radii at the origin."""
        lat0 = np.radians(self.lat0_deg)
        den = (self.a * np.cos(lat0)) ** 2 + (self.b * np.sin(lat0)) ** 2
        return float((self.a * self.b) ** 2 / den**1.5), float(self.a**2 / np.sqrt(den))

    def to_ned(self, lat_deg, lon_deg, alt_m) -> np.ndarray:
        r_ns, r_ew = self.radii
        lat0 = np.radians(self.lat0_deg)
        return np.stack(
            [
                np.sin(np.radians(lat_deg) - lat0) * r_ns,
                np.sin(np.radians(lon_deg) - np.radians(self.lon0_deg)) * r_ew * np.cos(lat0),
                self.alt0_m - np.asarray(alt_m, dtype=np.float64),
            ],
            axis=-1,
        )

    def to_geodetic(self, x, y, z) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Latitude, longitude [deg], altitude [m] of NED points (the inverse of `to_ned`)."""
        r_ns, r_ew = self.radii
        lat0 = np.radians(self.lat0_deg)
        return (
            np.degrees(lat0 + np.arcsin(np.asarray(x) / r_ns)),
            np.degrees(
                np.radians(self.lon0_deg) + np.arcsin(np.asarray(y) / (r_ew * np.cos(lat0)))
            ),
            self.alt0_m - np.asarray(z, dtype=np.float64),
        )

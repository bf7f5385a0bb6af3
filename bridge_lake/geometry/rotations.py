"""Rotations: Euler angles, quaternions, matrices, rigid transforms and interpolation.

Built on scipy's `Rotation` and `Slerp` (well kept, vectorized, tested by thousands of users)
rather than hand-written quaternion algebra. The one hot loop written here is
`transform_points`, which moves millions of float32 lidar points per call with a handful of
in-place numpy passes (no (n, 3) temporaries, no per-scan Python).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

ORTHONORMAL_TOL = 1e-6
"""Largest |R Rᵀ - I| entry accepted as a rotation (rig files are typed by hand: 1e-6 allows
the 6-7 significant digits people copy, rejects a wrong sign or a swapped row)."""


def _stack(*angles: np.ndarray | float) -> tuple[np.ndarray, tuple[int, ...]]:
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in angles))
    shape = arrays[0].shape
    return np.stack([a.reshape(-1) for a in arrays], axis=-1), shape


def rpy_to_matrix(roll, pitch, yaw) -> np.ndarray:
    """R = Rz(yaw) @ Ry(pitch) @ Rx(roll) (radians), shape (..., 3, 3) for array inputs."""
    angles, shape = _stack(roll, pitch, yaw)
    return Rotation.from_euler("xyz", angles).as_matrix().reshape(*shape, 3, 3)


def rpy_to_quaternion(roll, pitch, yaw) -> np.ndarray:
    """The (x, y, z, w) quaternion of R = Rz(yaw) Ry(pitch) Rx(roll), shape (..., 4)."""
    angles, shape = _stack(roll, pitch, yaw)
    return Rotation.from_euler("xyz", angles).as_quat().reshape(*shape, 4)


def quaternion_to_rpy(q: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw (radians, shape (..., 3)) of (x, y, z, w) quaternions."""
    q = np.asarray(q, dtype=np.float64)
    return Rotation.from_quat(q.reshape(-1, 4)).as_euler("xyz").reshape(*q.shape[:-1], 3)


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices of (x, y, z, w) quaternions (normalized first), shape (..., 3, 3)."""
    q = np.asarray(q, dtype=np.float64)
    return Rotation.from_quat(q.reshape(-1, 4)).as_matrix().reshape(*q.shape[:-1], 3, 3)


def is_rotation_matrix(m: np.ndarray, tol: float = ORTHONORMAL_TOL) -> bool:
    """True if every (3, 3) matrix is orthonormal within `tol` and right-handed (det +1)."""
    m = np.asarray(m, dtype=np.float64)
    if m.shape[-2:] != (3, 3) or not np.isfinite(m).all():
        return False
    gram = m @ np.swapaxes(m, -1, -2)
    return bool(np.abs(gram - np.eye(3)).max(initial=0.0) <= tol and (np.linalg.det(m) > 0).all())


def matrix_to_quaternion(m: np.ndarray, tol: float = ORTHONORMAL_TOL) -> np.ndarray:
    """(x, y, z, w) of rotation matrices; raises ValueError if one is not a rotation, so a
    mistyped matrix is never silently projected onto the nearest rotation."""
    m = np.asarray(m, dtype=np.float64)
    if not is_rotation_matrix(m, tol):
        raise ValueError(f"not a rotation matrix (orthonormal within {tol}, det +1): {m.tolist()}")
    return Rotation.from_matrix(m.reshape(-1, 3, 3)).as_quat().reshape(*m.shape[:-2], 4)


def wrap_angle(a) -> np.ndarray:
    """Angles wrapped into (-π, π]."""
    w = np.pi - np.mod(np.pi - np.asarray(a, dtype=np.float64), 2 * np.pi)
    return w


def slerp(times: np.ndarray, quaternions: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Spherical interpolation of (x, y, z, w) quaternions sampled at strictly increasing
    `times` (any unit, float or int), at `query` times inside [times[0], times[-1]].

    Times are shifted to the first sample before converting to float, so int64 nanoseconds
    since the epoch keep their precision.
    """
    times = np.asarray(times)
    query = np.asarray(query)
    t0 = times[0]
    return (
        Slerp((times - t0).astype(np.float64), Rotation.from_quat(quaternions))(
            (query - t0).astype(np.float64)
        )
        .as_quat()
        .reshape(*query.shape, 4)
    )


def transform_points(
    rotation: np.ndarray,
    translation: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    z: np.ndarray,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """p' = R p + t for float32 point columns, returned as a (3, n) float32 array.

    Nine multiply-adds over the columns in place, in float32 (the precision the points are
    stored in): memory-bound, tens of millions of points per second on one core.
    """
    r = np.asarray(rotation, dtype=np.float32)
    t = np.asarray(translation, dtype=np.float32)
    n = len(x)
    if out is None:
        out = np.empty((3, n), dtype=np.float32)
    tmp = np.empty(n, dtype=np.float32)
    for i in range(3):
        row = out[i]
        np.multiply(x, r[i, 0], out=row)
        np.multiply(y, r[i, 1], out=tmp)
        row += tmp
        np.multiply(z, r[i, 2], out=tmp)
        row += tmp
        row += t[i]
    return out


@dataclass(frozen=True)
class Transform:
    """A rigid transform T_a_b: maps points of frame b into frame a (p_a = R p_b + t), the
    pose of frame b in frame a, as ROS's TransformStamped(parent a, child b) means it."""

    translation: np.ndarray
    rotation: Rotation

    @classmethod
    def identity(cls) -> Transform:
        return cls(np.zeros(3), Rotation.identity())

    @classmethod
    def from_rpy(cls, translation, rpy, *, degrees: bool = False) -> Transform:
        r, p, y = np.radians(rpy) if degrees else np.asarray(rpy, dtype=np.float64)
        return cls(np.asarray(translation, dtype=np.float64), Rotation.from_euler("xyz", [r, p, y]))

    @classmethod
    def from_quaternion(cls, translation, quaternion) -> Transform:
        return cls(np.asarray(translation, dtype=np.float64), Rotation.from_quat(quaternion))

    @classmethod
    def from_matrix(cls, translation, matrix) -> Transform:
        return cls.from_quaternion(translation, matrix_to_quaternion(matrix))

    @property
    def quaternion(self) -> np.ndarray:
        """(x, y, z, w) with w ≥ 0 (one canonical sign, so files are reproducible)."""
        return self.rotation.as_quat(canonical=True)

    @property
    def matrix(self) -> np.ndarray:
        return self.rotation.as_matrix()

    @property
    def matrix4(self) -> np.ndarray:
        """The 4x4 homogeneous matrix [[R, t], [0, 1]]."""
        m = np.eye(4)
        m[:3, :3] = self.matrix
        m[:3, 3] = self.translation
        return m

    def __matmul__(self, other: Transform) -> Transform:
        """T_a_b @ T_b_c = T_a_c."""
        return Transform(
            self.rotation.apply(other.translation) + self.translation,
            self.rotation * other.rotation,
        )

    def inverse(self) -> Transform:
        inv = self.rotation.inv()
        return Transform(-inv.apply(self.translation), inv)

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Points (..., 3) of frame b in frame a, float64."""
        return self.rotation.apply(np.asarray(points, dtype=np.float64)) + self.translation

"""The twist of a pose track: the body's velocity in its own axes, from the poses themselves.

nav_msgs/Odometry carries the twist of child_frame_id expressed in child_frame_id, so a
consumer integrating it must get the pose back. Differentiating the very poses it travels
with guarantees that, needs no rig numbers (a wheel track, a gyro mount) and works for any
pose source (NCLT odometry and ground truth alike, ADTF poses).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.transform import Rotation

from bridge_lake.clock import NS_PER_S

TWIST_MAX_GAP_NS = NS_PER_S
"""Neighbours further apart than this (a logging gap, a long run of invalid rows) are not
differenced across: the motion in between is unknown. NCLT's slowest pose stream (odometry_mu,
5 Hz) is 0.2 s apart."""


def body_twist(
    time_ns: ArrayLike,
    position: ArrayLike,
    roll: ArrayLike,
    pitch: ArrayLike,
    yaw: ArrayLike,
    *,
    max_gap_ns: int = TWIST_MAX_GAP_NS,
) -> tuple[np.ndarray, np.ndarray]:
    """Linear (m/s) and angular (rad/s) velocity, (n, 3) each, of a body whose poses are
    sampled in time order: position (n, 3) in a world frame, orientation R = Rz(yaw) Ry(pitch)
    Rx(roll) of the body in that world. Both are expressed in the body's axes at each sample.

    Central differences over the neighbouring valid poses (one-sided at an end, a gap longer
    than `max_gap_ns` or a repeated time); the angular velocity is the rotation vector of
    R_prev⁻¹ R_next over the time between them, so headings wrapping at ±π need no unwrap.
    NaN rows where the pose is invalid (any NaN) or has no usable neighbour.
    """
    t = np.asarray(time_ns, dtype=np.int64).reshape(-1)
    pos = np.asarray(position, dtype=np.float64).reshape(-1, 3)
    angles = np.stack(
        [np.asarray(a, dtype=np.float64).reshape(-1) for a in (roll, pitch, yaw)], axis=-1
    )
    n = t.size
    if pos.shape[0] != n or angles.shape[0] != n:
        raise ValueError(f"time_ns ({n}), position {pos.shape} and angles must have one row each")
    linear, angular = np.full((n, 3), np.nan), np.full((n, 3), np.nan)
    rows = np.flatnonzero(np.isfinite(pos).all(axis=1) & np.isfinite(angles).all(axis=1))
    if rows.size < 2:
        return linear, angular
    tv = t[rows]
    gap = np.diff(tv)
    near = (gap > 0) & (gap <= max_gap_ns)  # near[k]: samples k and k + 1 may be differenced
    k = np.arange(rows.size)
    lo = np.where(np.concatenate([[False], near]), k - 1, k)
    hi = np.where(np.concatenate([near, [False]]), k + 1, k)
    usable = hi > lo
    k, lo, hi = k[usable], lo[usable], hi[usable]
    dt = (tv[hi] - tv[lo]).astype(np.float64)[:, None] / NS_PER_S
    rot = Rotation.from_euler("xyz", angles[rows])
    here = rot[k].inv()
    linear[rows[k]] = here.apply((pos[rows[hi]] - pos[rows[lo]]) / dt)
    turn = (rot[lo].inv() * rot[hi]).as_rotvec() / dt  # in the axes of sample lo
    angular[rows[k]] = (here * rot[lo]).apply(turn)
    return linear, angular

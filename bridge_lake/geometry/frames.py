"""Frame conventions: REP-103 body axes, NED and ENU worlds, camera optical frames.

REP-103: base_link is x forward, y left, z up (FLU); the world is ENU (x east, y north,
z up). Many vehicles and datasets (NCLT, aviation, most INS) use a body frame x forward,
y right, z down (FRD) and a NED world. Cameras have an optical frame beside their body
frame: z forward along the optical axis, x right, y down (image u, v), REP-103/105 `*_optical`.
"""

from __future__ import annotations

import numpy as np

FRD_TO_FLU = np.diag([1.0, -1.0, -1.0])
"""p_flu = FRD_TO_FLU @ p_frd: body (x fwd, y right, z down) → REP-103 base_link. A rotation
of π about x; its own inverse."""

NED_TO_ENU = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
"""p_enu = NED_TO_ENU @ p_ned: (e, n, u) = (y_ned, x_ned, -z_ned). Its own inverse, and a
proper rotation (det +1)."""

OPTICAL_IN_BODY = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
"""Rotation of a camera's optical frame in its body frame: p_body = OPTICAL_IN_BODY @ p_optical
(optical z forward = body x, optical x right = body -y, optical y down = body -z); the
quaternion of roll -π/2, pitch 0, yaw -π/2, as REP-103 publishes `*_optical`."""

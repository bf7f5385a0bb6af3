"""Rotations, frame conventions and geodesy: the one home of the package's geometry.

Every quaternion, rotation matrix, frame change (REP-103 body axes, NED/ENU worlds, camera
optical frames) and geodetic conversion in bridge_lake goes through here, so a convention is
decided once and tested once against known vectors and independent libraries.

Conventions: quaternions are (x, y, z, w), scalar last, as ROS messages and scipy store them;
Euler angles are roll, pitch, yaw with R = Rz(yaw) @ Ry(pitch) @ Rx(roll) (fixed axes x, y, z;
the NCLT devkit's ssc_to_homo and ROS's RPY); angles in radians unless a name says degrees.
"""

from bridge_lake.geometry.frames import (
    FRD_TO_FLU,
    NED_TO_ENU,
    OPTICAL_IN_BODY,
)
from bridge_lake.geometry.geodesy import (
    WGS84,
    Ellipsoid,
    LinearizedNed,
    enu_to_geodetic,
    geodetic_to_enu,
)
from bridge_lake.geometry.rotations import (
    Transform,
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
from bridge_lake.geometry.twist import TWIST_MAX_GAP_NS, body_twist

__all__ = [
    "FRD_TO_FLU",
    "NED_TO_ENU",
    "OPTICAL_IN_BODY",
    "TWIST_MAX_GAP_NS",
    "WGS84",
    "Ellipsoid",
    "LinearizedNed",
    "Transform",
    "body_twist",
    "enu_to_geodetic",
    "geodetic_to_enu",
    "is_rotation_matrix",
    "matrix_to_quaternion",
    "quaternion_to_matrix",
    "quaternion_to_rpy",
    "rpy_to_matrix",
    "rpy_to_quaternion",
    "slerp",
    "transform_points",
    "wrap_angle",
]

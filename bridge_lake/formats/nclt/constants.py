"""Every number of the NCLT file formats, in one place (shared/specs/nclt-format.md).

Readers, the synthetic writer and the tests all import from here, so a wrong constant is
wrong once and visibly. Rig calibration (extrinsics, intrinsics, the ground-truth origin)
lives in the rig file calibrate/rigs/nclt-segway.yaml; only the laser elevation table and
the Velodyne's yaw are copied here, because the ring order and the scan seam are part of
decoding a scan.
"""

from __future__ import annotations

import numpy as np

CODE_SCALE = 0.005
"""metres = code * CODE_SCALE + CODE_OFFSET, code read as uint16 (spec §5, §8)."""
CODE_OFFSET = -100.0

HIT_DTYPE = np.dtype(
    [("x", "<u2"), ("y", "<u2"), ("z", "<u2"), ("intensity", "u1"), ("laser_id", "u1")]
)
"""One 8-byte hit of velodyne_hits.bin packets and velodyne_sync files."""
HIT_BYTES = HIT_DTYPE.itemsize

PACKET_MAGIC = b"\x9c\xad" * 4
"""Four little-endian uint16 44444 words opening every velodyne_hits.bin packet."""
PACKET_MAGIC_U64 = int.from_bytes(PACKET_MAGIC, "little")
PACKET_HEADER_BYTES = 24
"""magic (8) + num_hits uint32 (4) + utime uint64 (8) + padding (4)."""
SENSOR_MAX_HITS = 384
"""12 firing blocks x 32 lasers: what one HDL-32E UDP packet can hold."""
MAX_HITS_PER_PACKET = 4096
"""Trust cap for num_hits. Generous (the spec marks 384 as to-be-verified on real files), so a
real file with larger packets still decodes; packets above SENSOR_MAX_HITS are counted."""
MAX_RESYNC_JUMP_US = 10_000_000
"""A header found while resynchronizing must be within this of the last good packet."""

LASER_COUNT = 32
LASER_VERTICAL_DEG = np.array(
    [-30.67, -9.33, -29.33, -8.00, -28.00, -6.66, -26.66, -5.33,
     -25.33, -4.00, -24.00, -2.67, -22.67, -1.33, -21.33, 0.00,
     -20.00, 1.33, -18.67, 2.67, -17.33, 4.00, -16.00, 5.33,
     -14.67, 6.67, -13.33, 8.00, -12.00, 9.33, -10.67, 10.67],
)  # fmt: skip
"""HDL-32E elevation of each laser_id (firing order), degrees; calibration.yaml lidar table."""
RING_OF_LASER = np.argsort(np.argsort(LASER_VERTICAL_DEG, kind="stable"), kind="stable").astype(
    np.uint8
)
"""ring (0 = lowest ... 31 = highest) of each laser_id: elevation order, not firing order."""

REVOLUTION_GAP_US = 500_000
"""A packet gap longer than this ends a scan (logging dropout), spec §7."""

HOKUYO = {
    "hokuyo_30m": {
        "ranges": 1081,
        "angle_min": -135 * np.pi / 180,
        "angle_inc": 0.25 * np.pi / 180,
    },
    "hokuyo_4m": {"ranges": 726, "angle_min": -2.0862138, "angle_inc": 0.0061359233},
}
"""Per planar lidar: ranges per record and the angle of range i = angle_min + i * angle_inc."""

LB3_CAMERAS = 6
LB3_STORED_SIZE = (1616, 1232)
"""(width, height) of a stored Ladybug3 image; stored sideways."""
LB3_UPRIGHT_ROTATION = "rotate_90_clockwise"
"""What makes a stored image upright (calibration.yaml cameras.upright_rotation)."""


def code_to_metres(codes: np.ndarray) -> np.ndarray:
    """Decode unsigned codes exactly as the spec asks: in float64, then float32."""
    return (codes.astype(np.float64) * CODE_SCALE + CODE_OFFSET).astype(np.float32)


CODE_LUT = code_to_metres(np.arange(65536, dtype=np.uint16))
"""float32 metres of every uint16 code: decoding becomes one gather, identical to the formula."""


VELODYNE_IN_BODY = (0.002, -0.004, -0.957, 0.807, 0.166, -90.703)
"""x_body_vel: [x, y, z] m and [roll, pitch, yaw] degrees. The rig (calibrate/rigs/nclt-segway.yaml)
is the source; the reader keeps this copy for where scans are cut, and a test holds the two
equal."""
REAR_AZIMUTH = float(np.angle(np.exp(1j * (np.pi - np.radians(VELODYNE_IN_BODY[5])))))
"""Azimuth atan2(y, x) of the body's rear (-x) seen in the Velodyne frame: where scans are cut,
so the seam falls behind the robot (≈ -89.3°)."""

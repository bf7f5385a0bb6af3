"""Synchronized key frames: every lidar scan with its pose and the nearest sample of every
camera, IMU and GNSS stream.

Matching is a nearest-sample search (clock.nearest) per stream over its offset-corrected
times, vectorized over all scans. The tolerance of a stream is MATCH_PERIODS of its period:
the nearest sample of a stream that runs without gaps is never further than half a period
away, so a larger distance means a gap or a dead sensor there. Frames are marked, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bridge_lake.calibrate.poses import PoseTrack
from bridge_lake.calibrate.transforms import POSE_LIMIT_NS
from bridge_lake.clock import NS_PER_S, nearest
from bridge_lake.lake.schemas.calibrated import FRAMES, MATCH

MATCH_PERIODS = 0.75
"""Tolerance = 0.75 periods: half a period plus room for the jitter of logging hosts."""
MATCH_TABLES = ("camera_frames", "imu", "gnss")


@dataclass(frozen=True)
class StreamTimes:
    """One stream's sample times on the master clock (sorted), as a match candidate."""

    sensor: str
    table: str
    time_ns: np.ndarray
    rate_hz: float | None

    @property
    def tolerance_ns(self) -> int:
        if self.rate_hz:
            return int(MATCH_PERIODS * NS_PER_S / self.rate_hz)
        if len(self.time_ns) > 1:  # no nominal rate: the median step
            return int(MATCH_PERIODS * np.median(np.diff(self.time_ns)))
        return 0


@dataclass(frozen=True)
class PairStats:
    """Time differences of one (lidar stream, sensor) pair over the drive's frames."""

    lidar: str
    sensor: str
    table: str
    frames: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    tolerance_ms: float
    outside: int
    """frames whose nearest sample of this sensor is beyond the tolerance."""


@dataclass(frozen=True)
class FramesResult:
    table: pa.Table
    pairs: list[PairStats]
    extrapolated: int
    """frames whose time lies beyond the pose limit (pose null)."""
    held: int
    """frames outside the pose track but within the limit (end pose held)."""


def build_frames(
    scans: pa.Table,
    candidates: list[StreamTimes],
    track: PoseTrack | None,
    deskewed: set[int],
) -> FramesResult:
    """calibrated/frames rows for normalized/lidar_scans `scans` (see module docstring)."""
    order = np.lexsort((scans.column("scan_id").to_numpy(), scans.column("time_ns").to_numpy()))
    scans = scans.take(order)
    n = scans.num_rows
    t = scans.column("time_ns").to_numpy()
    stream = np.asarray(scans.column("stream").to_pylist(), dtype=object)
    if track is not None and len(track):
        pos, quat, outside = track.at(t, POSE_LIMIT_NS)
    else:
        pos, quat = np.full((n, 3), np.nan), np.full((n, 4), np.nan)
        outside = np.full(n, np.iinfo(np.int64).max)
    k = len(candidates)
    m_time = np.zeros((n, k), dtype=np.int64)
    m_dt = np.zeros((n, k), dtype=np.int64)
    m_has = np.zeros((n, k), dtype=bool)
    m_ok = np.zeros((n, k), dtype=bool)
    tolerance = np.array([c.tolerance_ns for c in candidates], dtype=np.int64)
    for j, c in enumerate(candidates):
        if len(c.time_ns) == 0:
            continue
        pick = nearest(c.time_ns, t)
        m_time[:, j] = c.time_ns[pick]
        m_dt[:, j] = c.time_ns[pick] - t
        m_has[:, j] = True
        m_ok[:, j] = np.abs(m_dt[:, j]) <= tolerance[j]
    matches = _matches_column(candidates, m_time, m_dt, m_has, m_ok, tolerance)
    finite = np.isfinite(quat).all(axis=1)
    scan_ids = scans.column("scan_id").to_numpy()
    table = pa.table(
        {
            "scan_id": scan_ids,
            "stream": scans.column("stream"),
            "time_ns": t,
            "end_time_ns": scans.column("end_time_ns"),
            "point_count": scans.column("point_count"),
            **{
                name: pa.array(values, mask=~finite)
                for name, values in (
                    ("x_m", pos[:, 0]),
                    ("y_m", pos[:, 1]),
                    ("z_m", pos[:, 2]),
                    ("qx", quat[:, 0]),
                    ("qy", quat[:, 1]),
                    ("qz", quat[:, 2]),
                    ("qw", quat[:, 3]),
                )
            },
            "pose_extrapolated_ns": outside,
            "deskewed": np.isin(scan_ids, np.fromiter(deskewed, np.int64, len(deskewed))),
            "matches": matches,
            "all_ok": m_ok.all(axis=1) if k else np.ones(n, dtype=bool),
        },
        schema=FRAMES.schema,
    )
    pairs = []
    for lidar in sorted(set(stream.tolist())):
        sel = stream == lidar
        for j, c in enumerate(candidates):
            if not m_has[sel, j].any():
                continue
            dt = np.abs(m_dt[sel, j]) / 1e6
            pairs.append(
                PairStats(
                    lidar,
                    c.sensor,
                    c.table,
                    int(sel.sum()),
                    float(np.percentile(dt, 50)),
                    float(np.percentile(dt, 99)),
                    float(dt.max()),
                    tolerance[j] / 1e6,
                    int((~m_ok[sel, j]).sum()),
                )
            )
    far = outside > POSE_LIMIT_NS
    return FramesResult(table, pairs, int(far.sum()), int(((outside > 0) & ~far).sum()))


def _matches_column(
    candidates: list[StreamTimes],
    m_time: np.ndarray,
    m_dt: np.ndarray,
    m_has: np.ndarray,
    m_ok: np.ndarray,
    tolerance: np.ndarray,
) -> pa.Array:
    """list<struct> per frame, one entry per candidate stream, built from flat arrays."""
    n, k = m_time.shape
    flat_has = m_has.reshape(-1)
    struct = pa.StructArray.from_arrays(
        [
            pa.array(np.tile([c.sensor for c in candidates], n) if k else [], pa.string()),
            pa.array(np.tile([c.table for c in candidates], n) if k else [], pa.string()),
            pa.array(m_time.reshape(-1), mask=~flat_has),
            pa.array(m_dt.reshape(-1), mask=~flat_has),
            pa.array(np.tile(tolerance, n)),
            pa.array(m_ok.reshape(-1)),
        ],
        fields=list(MATCH),
    )
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * k)
    return pa.ListArray.from_arrays(offsets, struct, type=pa.list_(MATCH))

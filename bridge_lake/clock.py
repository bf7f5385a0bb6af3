"""The master clock: integer nanoseconds, exact conversions, and device-clock fits.

Every time in the lake is int64 ns on one master clock per drive (the recorder's chunk time
for ADTF, `utime` for NCLT). Conversions are integer arithmetic only: a float64 holds an
epoch in ns only to ~0.2 µs, so floats appear only in the clock fit, and there only on
small, centred differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bridge_lake.errors import BridgeLakeError

NS_PER_US = 1_000
NS_PER_S = 1_000_000_000
TIME_UNITS_NS = {"ns": 1, "us": NS_PER_US, "ms": 1_000_000, "s": NS_PER_S}
"""Time units by their SI symbol (µs written `us`) → nanoseconds: the one table of them."""
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min
MAX_ABS_US = INT64_MAX // NS_PER_US
"""Largest |µs| whose ns value fits int64 (about ±292 years around 1970)."""


class ClockError(BridgeLakeError, ValueError):
    """A time value that cannot be represented on the master clock."""


def us_to_ns(us: np.ndarray | int) -> np.ndarray:
    """µs → ns, exactly; raises ClockError instead of wrapping around on overflow."""
    a = np.asarray(us)
    if a.dtype.kind not in "iu":
        raise ClockError(f"µs times must be integers, got dtype {a.dtype}")
    if a.size and (a.max() > MAX_ABS_US or (a.dtype.kind == "i" and a.min() < -MAX_ABS_US)):
        raise ClockError(f"µs time out of the int64 ns range (±{MAX_ABS_US} µs)")
    return a.astype(np.int64) * NS_PER_US


def ns_to_us(ns: np.ndarray | int) -> np.ndarray:
    """ns → µs rounding toward minus infinity (floor), so ordering is preserved."""
    return np.floor_divide(np.asarray(ns, dtype=np.int64), NS_PER_US)


def ns_to_ros(ns: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """ns → (sec, nsec) with 0 ≤ nsec < 1e9, as ROS 1 and ROS 2 stamps require."""
    sec, nsec = np.divmod(np.asarray(ns, dtype=np.int64), NS_PER_S)
    return sec, nsec


def ros_to_ns(sec: np.ndarray | int, nsec: np.ndarray | int) -> np.ndarray:
    """(sec, nsec) → ns exactly; nsec may be outside [0, 1e9) (it is carried)."""
    s = np.asarray(sec, dtype=np.int64)
    n = np.asarray(nsec, dtype=np.int64)
    limit = (INT64_MAX - NS_PER_S) // NS_PER_S
    if s.size and (np.abs(s).max() > limit):
        raise ClockError(f"ROS seconds out of the int64 ns range (±{limit} s)")
    return s * NS_PER_S + n


def nearest(sorted_ns: np.ndarray, query_ns: np.ndarray) -> np.ndarray:
    """Index of the sample nearest to each query time in non-decreasing `sorted_ns` (the
    earlier one on a tie); `sorted_ns` must not be empty."""
    t = np.asarray(sorted_ns, dtype=np.int64)
    q = np.asarray(query_ns, dtype=np.int64)
    after = np.clip(np.searchsorted(t, q), 0, len(t) - 1)
    before = np.clip(after - 1, 0, len(t) - 1)
    return np.where(np.abs(t[after] - q) < np.abs(q - t[before]), after, before)


def ros1_stamp(ns: int) -> tuple[int, int]:
    """A ROS 1 `time` (uint32 sec, uint32 nsec); raises for times ROS 1 cannot hold."""
    sec, nsec = (int(v) for v in ns_to_ros(ns))
    if not 0 <= sec <= 0xFFFFFFFF:
        raise ClockError(f"{ns} ns is outside the ROS 1 time range (1970 … 2106)")
    return sec, nsec


@dataclass(frozen=True)
class ClockFit:
    """master ≈ sensor + offset_ns + drift · (sensor - sensor_ref_ns).

    `drift_ppm` > 0 means the device clock runs slow against the master clock. Residuals are
    master - fitted, over the inliers; `outliers` were excluded by the robust fit.
    """

    sensor_ref_ns: int
    offset_ns: int
    """master - sensor at `sensor_ref_ns`, integer ns (device clocks may count from boot)."""
    drift_ppm: float
    residual_rms_ns: float
    residual_max_ns: float
    n: int
    outliers: int

    def to_master(self, sensor_ns: np.ndarray) -> np.ndarray:
        """Device time stamps mapped onto the master clock (int64 ns)."""
        s = np.asarray(sensor_ns, dtype=np.int64)
        dx = (s - self.sensor_ref_ns).astype(np.float64)
        corr = np.rint(self.drift_ppm * 1e-6 * dx).astype(np.int64)
        return s + self.offset_ns + corr


def fit_clock(sensor_ns: np.ndarray, master_ns: np.ndarray, *, iterations: int = 4) -> ClockFit:
    """Robust linear fit of a device clock against the master clock.

    Least squares on master - sensor against centred sensor time, then repeatedly drops
    points further than 5 robust standard deviations (MAD) from the line and refits, so a
    few late deliveries or clock jumps do not bend the fit. Needs ≥ 2 distinct sensor times.
    """
    s = np.asarray(sensor_ns, dtype=np.int64)
    m = np.asarray(master_ns, dtype=np.int64)
    if s.shape != m.shape or s.ndim != 1:
        raise ClockError("sensor and master times must be 1-D arrays of the same length")
    if s.size < 2 or s.min() == s.max():
        raise ClockError("a clock fit needs at least two distinct sensor times")
    ref = int(s[0])
    x = (s - ref).astype(np.float64)
    # device clocks may count from boot (master - sensor ≈ 1.7e18): take an integer base
    # out first so the float part is small and exact
    base = int(m[0] - s[0])
    d = ((m - s) - base).astype(np.float64)
    keep = np.ones(s.size, dtype=bool)
    for _ in range(iterations):
        slope, intercept = np.polyfit(x[keep], d[keep], 1)
        res = d - (intercept + slope * x)
        center = np.median(res[keep])
        mad = np.median(np.abs(res[keep] - center))
        bound = max(5 * 1.4826 * mad, 1.0)
        new_keep = np.abs(res - center) <= bound
        if new_keep.sum() < 2 or np.array_equal(new_keep, keep):
            break
        keep = new_keep
    slope, intercept = np.polyfit(x[keep], d[keep], 1)
    res = d[keep] - (intercept + slope * x[keep])
    return ClockFit(
        sensor_ref_ns=ref,
        offset_ns=base + round(float(intercept)),
        drift_ppm=float(slope * 1e6),
        residual_rms_ns=float(np.sqrt(np.mean(res**2))),
        residual_max_ns=float(np.abs(res).max()),
        n=int(s.size),
        outliers=int((~keep).sum()),
    )


@dataclass(frozen=True)
class TimeOrder:
    """What a stream's time stamps look like in file order."""

    count: int
    backward: int
    """records whose time is earlier than the one before (each needs a reorder)."""
    duplicates: int
    """records with the same time as another record (after sorting)."""
    median_period_ns: int | None
    gap_threshold_ns: int | None
    gaps: int
    longest_gap_ns: int
    longest_gap_at_ns: int | None = None
    """time of the record the longest step starts from (where to look for it)."""


GAP_FACTOR = 5
"""A gap is a step longer than 5 median periods: rate-derived, so it suits 1 Hz and 1 kHz."""


def time_order(times_ns: np.ndarray, *, gap_threshold_ns: int | None = None) -> TimeOrder:
    t = np.asarray(times_ns, dtype=np.int64)
    if t.size < 2:
        return TimeOrder(int(t.size), 0, 0, None, gap_threshold_ns, 0, 0)
    backward = int(np.count_nonzero(np.diff(t) < 0))
    steps = np.diff(np.sort(t, kind="stable"))
    duplicates = int(np.count_nonzero(steps == 0))
    positive = steps[steps > 0]
    median = int(np.median(positive)) if positive.size else None
    threshold = gap_threshold_ns
    if threshold is None and median is not None:
        threshold = GAP_FACTOR * median
    gap_steps = steps[steps > threshold] if threshold is not None else steps[:0]
    longest = int(np.argmax(steps))
    return TimeOrder(
        count=int(t.size),
        backward=backward,
        duplicates=duplicates,
        median_period_ns=median,
        gap_threshold_ns=threshold,
        gaps=int(gap_steps.size),
        longest_gap_ns=int(steps[longest]),
        longest_gap_at_ns=int(np.sort(t, kind="stable")[longest]),
    )


def reorder_count(times_ns: np.ndarray) -> int:
    """Records that a stable sort moves back: those earlier than some record before them."""
    t = np.asarray(times_ns, dtype=np.int64)
    if t.size < 2:
        return 0
    running = np.maximum.accumulate(t)
    return int(np.count_nonzero(t[1:] < running[:-1]))


def stable_order(times_ns: np.ndarray) -> np.ndarray | None:
    """The permutation that sorts by time keeping file order among equal times, or None if
    the stream is already in order (the common case costs one pass and no copy)."""
    t = np.asarray(times_ns, dtype=np.int64)
    if t.size < 2 or not np.any(np.diff(t) < 0):
        return None
    return np.argsort(t, kind="stable")

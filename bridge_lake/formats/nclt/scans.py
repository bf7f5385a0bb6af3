"""Full revolutions from velodyne_hits.bin, with `ring` and per-point time (spec §7).

No NCLT file marks revolutions, and the common converters publish packets or use laser_id as
ring; consumers (LIO, deskewing) need whole sweeps in elevation order with a time per point.
Here each packet's first-hit azimuth is unwrapped in the spin direction (taken from the
median step) and each hit gets that unwrapped angle plus its own small offset from the
packet's first hit (clipped to ±0.2 rad, so a stray point cannot jump a revolution); a scan
ends where that angle passes the next multiple of 2π counted from the cut azimuth (default:
the robot's rear), so packets straddling the seam are split hit by hit, or where packet
utimes jump by more than REVOLUTION_GAP_US. Scan membership is kept monotone in file order.

`time_offset_ns` is (packet utime - scan start utime) x 1000 — exact integers, good to one
packet (≈ 0.55 ms). `ring` comes from the HDL-32E elevation table; the first batch is checked
against it (per-laser median elevation must rise with ring) and, if the data disagree, the
order derived from the data is used and reported in `ScanReport.ring_order`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from bridge_lake.formats.nclt import constants as C
from bridge_lake.formats.nclt.velodyne import (
    DEFAULT_BATCH_HITS,
    HIT_FIELDS,
    HitsReport,
    PacketBatch,
    iter_velodyne_packets,
)

POINT_SCHEMA = pa.schema(
    [
        *HIT_FIELDS,
        pa.field("ring", pa.uint8()),
        pa.field("utime", pa.int64()),
        pa.field("time_offset_ns", pa.int64()),
    ]
)
RING_INVALID = 255
"""ring of a hit whose laser_id is outside 0..31."""
MAX_HIT_SPREAD = 0.2
"""Largest azimuth offset (rad) a hit may have from its packet's first hit."""
TWO_PI = 2 * np.pi


@dataclass(frozen=True)
class Scan:
    scan_id: int
    start_utime: int
    end_utime: int
    """utime of the last packet in the scan."""
    cut: str
    """Why the scan ended: azimuth | gap | end."""
    points: pa.RecordBatch


@dataclass
class ScanReport:
    hits: HitsReport = field(default_factory=HitsReport)
    ring_order: str = "unchecked"
    """table (the HDL-32E table holds) | derived (data disagreed; order taken from the data)."""
    invalid_laser_ids: int = 0
    spin: int = 0
    """+1 when azimuth atan2(y, x) increases with time, -1 otherwise."""


def check_ring_order(
    x: np.ndarray, y: np.ndarray, z: np.ndarray, laser: np.ndarray
) -> np.ndarray | None:
    """None if per-laser median elevation rises with RING_OF_LASER, else the ring per laser_id
    derived from the data (lasers without hits keep their table ring)."""
    elev = np.arctan2(-z.astype(np.float64), np.hypot(x, y))
    medians = np.full(C.LASER_COUNT, np.nan)
    for laser_id in np.unique(laser[laser < C.LASER_COUNT]):
        medians[laser_id] = np.median(elev[laser == laser_id])
    seen = ~np.isnan(medians)
    by_table = np.argsort(C.RING_OF_LASER[seen], kind="stable")
    if np.all(np.diff(medians[seen][by_table]) > 0):
        return None
    ring = C.RING_OF_LASER.copy()
    ring[seen] = np.sort(C.RING_OF_LASER[seen])[
        np.argsort(np.argsort(medians[seen], kind="stable"))
    ]
    return ring


def iter_scans(
    path: str | os.PathLike,
    *,
    cut_azimuth: float = C.REAR_AZIMUTH,
    batch_hits: int = DEFAULT_BATCH_HITS,
    report: ScanReport | None = None,
) -> Iterator[Scan]:
    """Revolutions of a velodyne_hits.bin, streaming; the first and last may be partial."""
    path = Path(path)
    report = report if report is not None else ScanReport()
    builder = _Builder(cut_azimuth, report)
    for batch in iter_velodyne_packets(path, batch_hits=batch_hits, report=report.hits):
        yield from builder.add(batch)
    yield from builder.finish()


def _wrap(angle: np.ndarray) -> np.ndarray:
    """Angles folded into (-pi, pi]: what np.angle(np.exp(1j * a)) gives, without a complex
    exponential per hit (the costliest step of cutting revolutions)."""
    return np.pi - np.remainder(np.pi - angle, TWO_PI)


class _Builder:
    """Carries the unwrapped angle, the open scan and the ring table across batches."""

    def __init__(self, cut: float, report: ScanReport) -> None:
        self.cut = cut
        self.report = report
        self.ring_lut: np.ndarray | None = None
        self.theta = 0.0
        """Unwrapped spin angle of the last packet, from the cut, radians."""
        self.last_az: float | None = None
        self.last_utime: int | None = None
        self.rev = 0
        self.open: list[pa.RecordBatch] = []
        self.open_start: int | None = None
        self.open_end: int | None = None
        self.next_id = 0

    def add(self, batch: PacketBatch) -> Iterator[Scan]:
        hits = batch.hits
        if hits.num_rows == 0:
            return
        x, y, z = (hits.column(k).to_numpy() for k in ("x", "y", "z"))
        laser = hits.column("laser_id").to_numpy()
        if self.ring_lut is None:
            self._ring_table(x, y, z, laser)
        az = np.arctan2(y, x).astype(np.float64)
        counts = batch.counts[batch.counts > 0]
        p_utime = batch.utimes[batch.counts > 0]
        first = np.cumsum(counts) - counts
        az_p = az[first]
        if self.report.spin == 0:
            step = _wrap(np.diff(az_p))
            self.report.spin = 1 if len(step) == 0 or np.median(step) >= 0 else -1
        s = self.report.spin
        prev_az = az_p[0] if self.last_az is None else self.last_az
        if self.last_az is None:
            self.theta = float((s * (az_p[0] - self.cut)) % TWO_PI)
        steps = _wrap(s * np.diff(np.concatenate([[prev_az], az_p])))
        theta_p = self.theta + np.cumsum(steps)
        spread = np.clip(
            _wrap(s * (az - np.repeat(az_p, counts))),
            -MAX_HIT_SPREAD,
            MAX_HIT_SPREAD,
        )
        rev = np.floor((np.repeat(theta_p, counts) + spread) / TWO_PI).astype(np.int64)
        rev = np.maximum.accumulate(np.maximum(rev, self.rev))
        prev_t = p_utime[0] if self.last_utime is None else self.last_utime
        gap = np.abs(np.diff(np.concatenate([[prev_t], p_utime]))) > C.REVOLUTION_GAP_US
        gap_h = np.zeros(hits.num_rows, dtype=bool)
        gap_h[first[gap]] = True
        new = gap_h.copy()
        new[1:] |= rev[1:] != rev[:-1]
        new[0] |= rev[0] != self.rev
        utime = hits.column("utime").to_numpy()
        bounds = np.unique(np.concatenate([[0], np.flatnonzero(new), [len(rev)]]))
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if new[a] and self.open:
                yield self._close("gap" if gap_h[a] else "azimuth")
            self._extend(hits.slice(a, b - a), int(utime[a]), int(utime[b - 1]))
        self.theta, self.last_az, self.last_utime = (
            float(theta_p[-1]),
            float(az_p[-1]),
            int(p_utime[-1]),
        )
        self.rev = int(rev[-1])

    def finish(self) -> Iterator[Scan]:
        if self.open:
            yield self._close("end")

    def _ring_table(self, x: np.ndarray, y: np.ndarray, z: np.ndarray, laser: np.ndarray) -> None:
        derived = check_ring_order(x, y, z, laser)
        self.report.ring_order = "table" if derived is None else "derived"
        lut = np.full(256, RING_INVALID, dtype=np.uint8)
        lut[: C.LASER_COUNT] = C.RING_OF_LASER if derived is None else derived
        self.ring_lut = lut

    def _extend(self, piece: pa.RecordBatch, start: int, end: int) -> None:
        self.open.append(piece)
        self.open_start = start if self.open_start is None else self.open_start
        self.open_end = end

    def _close(self, cut: str) -> Scan:
        assert (
            self.ring_lut is not None and self.open_start is not None and self.open_end is not None
        )
        hits = pa.Table.from_batches(self.open).combine_chunks().to_batches()[0]
        laser = hits.column("laser_id").to_numpy()
        ring = self.ring_lut[laser]
        self.report.invalid_laser_ids += int(np.count_nonzero(ring == RING_INVALID))
        utime = hits.column("utime").to_numpy()
        offset = (utime - self.open_start) * 1000
        cols = [hits.column(k) for k in ("x", "y", "z", "intensity", "laser_id")]
        points = pa.RecordBatch.from_arrays(
            [*cols, pa.array(ring), hits.column("utime"), pa.array(offset)], schema=POINT_SCHEMA
        )
        scan = Scan(self.next_id, self.open_start, self.open_end, cut, points)
        self.next_id += 1
        self.open, self.open_start, self.open_end = [], None, None
        return scan

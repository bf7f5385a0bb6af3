"""A rig as static transforms, and lidar points moved into base_link (optionally deskewed).

`tf_static_table` is the single source of /tf_static: one row per rig frame, parent → child.
`PointTransformer` gives each lidar scan its sensor → base_link transform (the rows of
calibrated/lidar_transforms: base_link points are computed from them where they are read,
never stored twice) and moves normalized lidar points into base_link batch by batch to check
them: one rotation per lidar stream, applied with `geometry.transform_points` (float32, in
place, no per-scan Python), so a drive's points stream through with bounded memory. Only a
deskewed drive's points are kept (calibrated/deskewed_points): its motion per point is no
per-scan transform.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from scipy.spatial.transform import Rotation

from bridge_lake.calibrate.poses import PoseTrack
from bridge_lake.calibrate.rig import Rig
from bridge_lake.geometry import transform_points
from bridge_lake.lake.schemas.calibrated import DESKEWED_POINTS, LIDAR_TRANSFORMS, TF_STATIC

DESKEW_CHUNK = 1 << 18
"""Points deskewed per step: bounds the (n, 3, 3) rotation gather to ~20 MB."""
POSE_LIMIT_NS = 100_000_000
"""Poses are held (not extrapolated) at most this far beyond the pose track's ends."""


def tf_static_table(rig: Rig) -> pa.Table:
    """One row per rig frame (camera optical frames included), in the rig file's order."""
    rows: dict[str, list] = {c.name: [] for c in TF_STATIC.columns}
    for f in rig.frames.values():
        q = f.transform.quaternion
        cam = f.camera
        values = {
            "parent_frame": f.parent,
            "child_frame": f.name,
            "x_m": f.transform.translation[0],
            "y_m": f.transform.translation[1],
            "z_m": f.transform.translation[2],
            "qx": q[0],
            "qy": q[1],
            "qz": q[2],
            "qw": q[3],
            "kind": f.kind,
            "time_offset_ns": f.time_offset_ns,
            "width": cam.width if cam else None,
            "height": cam.height if cam else None,
            "k": list(cam.k) if cam else None,
            "distortion_model": cam.distortion_model if cam else None,
            "d": list(cam.d) if cam else None,
            "rig_file": rig.path,
            "rig_valid_from": rig.valid_from,
        }
        for k, v in values.items():
            rows[k].append(v)
    return pa.table(rows, schema=TF_STATIC.schema)


@dataclass
class PointStats:
    points: int = 0
    non_finite: int = 0
    beyond_range: int = 0
    max_range_m: float = 0.0
    deskewed_points: int = 0


class PointTransformer:
    """Moves lidar point batches into base_link.

    `scans` is normalized/lidar_scans (scan_id, frame_id, time_ns): each point finds its
    scan's sensor frame, hence its extrinsic. With a pose track, `deskew` moves every point
    to where it would have been seen at its scan's start time: p_ref = T_ref⁻¹ T(t) p, the
    poses slerped at each distinct point time (points of one firing share it).
    """

    def __init__(
        self,
        rig: Rig,
        scans: pa.Table,
        *,
        track: PoseTrack | None = None,
        deskew: bool = False,
        max_range_m: float = 250.0,
    ) -> None:
        order = np.argsort(scans.column("scan_id").to_numpy(), kind="stable")
        self._scan_ids = scans.column("scan_id").to_numpy()[order]
        frames = np.asarray(scans.column("frame_id").to_pylist(), dtype=object)[order]
        self._names, self._frame_of_scan = np.unique(frames.astype(str), return_inverse=True)
        self._scan_time = scans.column("time_ns").to_numpy()[order]
        self._extrinsics = [rig.to_base(str(name)) for name in self._names]
        self._track = track if deskew else None
        self._max_range = max_range_m
        self.stats = PointStats()
        self.deskewed_scans: set[int] = set()

    def transforms_table(self) -> pa.Table:
        """calibrated/lidar_transforms: one row per scan, its frame's extrinsic in float32
        (the precision points are transformed in); `stored` when the drive is deskewed."""
        if not self._extrinsics:  # a drive without lidar scans
            return LIDAR_TRANSFORMS.schema.empty_table()
        rot = np.stack([np.asarray(e.matrix, np.float32) for e in self._extrinsics])
        tra = np.stack([np.asarray(e.translation, np.float32) for e in self._extrinsics])
        k = self._frame_of_scan
        cols: dict[str, pa.Array | np.ndarray] = {
            "scan_id": self._scan_ids,
            "frame_id": pa.array(self._names[k].tolist(), pa.string()),
        }
        for i in range(3):
            for j in range(3):
                cols[f"r{i}{j}"] = rot[k, i, j]
        for i, axis in enumerate("xyz"):
            cols[f"t{axis}"] = tra[k, i]
        cols["stored"] = np.full(len(k), self._track is not None)
        return pa.table(cols, schema=LIDAR_TRANSFORMS.schema)

    def __call__(self, batch: pa.RecordBatch) -> np.ndarray:
        """The batch's points in base_link as a (3, n) float32 array (deskewed when the drive
        is), counted for the checks; the batch needs scan_id, x, y, z (and time_offset_ns to
        deskew)."""
        scan_id = batch.column("scan_id").to_numpy()
        pos = np.searchsorted(self._scan_ids, scan_id)
        frame = self._frame_of_scan[pos]
        x, y, z = (
            batch.column(c).to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
            for c in "xyz"
        )
        out = np.empty((3, len(scan_id)), dtype=np.float32)
        for k, ext in enumerate(self._extrinsics):
            sel = frame == k
            if sel.all():
                transform_points(ext.matrix, ext.translation, x, y, z, out=out)
            elif sel.any():
                out[:, sel] = transform_points(ext.matrix, ext.translation, x[sel], y[sel], z[sel])
        if self._track is not None:
            self._deskew(out, batch, pos)
        self._count(out)
        return out

    @staticmethod
    def rows(batch: pa.RecordBatch, xyz: np.ndarray) -> pa.RecordBatch:
        """calibrated/deskewed_points rows: the batch with its points at `xyz`."""
        cols = {"scan_id": batch.column("scan_id")}
        cols |= {axis: pa.array(xyz[i]) for i, axis in enumerate("xyz")}
        for name in ("intensity", "ring", "time_offset_ns"):
            cols[name] = batch.column(name)
        return pa.RecordBatch.from_pydict(cols, schema=DESKEWED_POINTS.schema)

    def _deskew(self, xyz: np.ndarray, batch: pa.RecordBatch, pos: np.ndarray) -> None:
        assert self._track is not None
        offset = batch.column("time_offset_ns")
        off = np.asarray(offset.to_numpy(zero_copy_only=False), dtype=np.float64)
        has_time = ~np.isnan(off)
        ref_time = self._scan_time[pos]
        point_time = ref_time + np.where(has_time, off, 0).astype(np.int64)
        for lo in range(0, len(pos), DESKEW_CHUNK):
            hi = min(lo + DESKEW_CHUNK, len(pos))
            sl = slice(lo, hi)
            ref_u, ref_inv = np.unique(ref_time[sl], return_inverse=True)
            pt_u, pt_inv = np.unique(point_time[sl], return_inverse=True)
            p_ref, q_ref, _ = self._track.at(ref_u, POSE_LIMIT_NS)
            p_pt, q_pt, _ = self._track.at(pt_u, POSE_LIMIT_NS)
            ok = np.isfinite(q_ref).all(axis=1)[ref_inv] & np.isfinite(q_pt).all(axis=1)[pt_inv]
            ok &= has_time[sl]
            if not ok.any():
                continue
            m_pt = _matrices(q_pt)[pt_inv]
            m_ref_t = np.swapaxes(_matrices(q_ref), 1, 2)[ref_inv]
            pts = xyz[:, sl].T.astype(np.float64)
            world = np.einsum("nij,nj->ni", m_pt, pts) + np.nan_to_num(p_pt)[pt_inv]
            local = np.einsum("nij,nj->ni", m_ref_t, world - np.nan_to_num(p_ref)[ref_inv])
            idx = np.flatnonzero(ok) + lo
            xyz[:, idx] = local[ok].T.astype(np.float32)
            self.stats.deskewed_points += int(ok.sum())
            self.deskewed_scans.update(np.unique(self._scan_ids[pos[idx]]).tolist())

    def _count(self, xyz: np.ndarray) -> None:
        finite = np.isfinite(xyz).all(axis=0)
        r2 = np.einsum("ij,ij->j", xyz, xyz, dtype=np.float64)
        self.stats.points += xyz.shape[1]
        self.stats.non_finite += int((~finite).sum())
        self.stats.beyond_range += int((r2[finite] > self._max_range**2).sum())
        if finite.any():
            self.stats.max_range_m = max(self.stats.max_range_m, float(np.sqrt(r2[finite].max())))


def _matrices(quaternions: np.ndarray) -> np.ndarray:
    """Rotation matrices of (x, y, z, w) rows; rows without a pose (NaN) become identity
    (their points are left as they are and not counted as deskewed)."""
    q = np.where(np.isfinite(quaternions).all(axis=1, keepdims=True), quaternions, [0, 0, 0, 1])
    return Rotation.from_quat(q).as_matrix()

"""Calibrate one drive: rig → /tf_static rows, poses, per-scan lidar transforms, key frames.

Reads the normalized layer (never the raw files), stages every calibrated table, lets the
caller audit the figures (the checks) and publishes only if the audit agrees, like the
normalized layer: readers never see a calibrated drive that failed a blocking check.
Lidar points stream through in batches, so memory does not grow with the drive's length;
they are moved into base_link to be checked, and kept only when deskewed (otherwise the
per-scan transforms of calibrated/lidar_transforms make them from the normalized points).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake.calibrate.poses import (
    PoseTrack,
    poses_from_gnss,
    poses_from_gnss_imu,
    poses_from_ground_truth,
)
from bridge_lake.calibrate.rig import Rig, RigError, RigNotFoundError, find_rig, rig_dirs
from bridge_lake.calibrate.sync import MATCH_TABLES, FramesResult, StreamTimes, build_frames
from bridge_lake.calibrate.transforms import PointStats, PointTransformer, tf_static_table
from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import Lake, PartitionWriter
from bridge_lake.lake.schemas import RAW_DRIVES, STREAMS
from bridge_lake.lake.schemas.calibrated import (
    CALIBRATED,
    DESKEWED_POINTS,
    FRAMES,
    LIDAR_TRANSFORMS,
    MAP_ORIGIN,
    POSES,
    TF_STATIC,
)
from bridge_lake.memory import release_large_frees

FRAME_KINDS = {
    "imu": "imu",
    "gnss": "gnss",
    "heading": "heading",
    "lidar_scans": "lidar",
    "camera_frames": "camera",
    "laser_scans": "laser",
}
"""Normalized tables whose rows are measured in a sensor frame, with the rig `kind` of that
frame: each frame_id needs an extrinsic in the rig (CAN frames, wheel speeds and odometry
worlds do not)."""
SPATIAL_TABLES = tuple(FRAME_KINDS)
DESKEW_KEY = "deskew"
"""drive.yaml key (true/false) that switches lidar motion compensation on for a drive."""
ENCODE_THREADS = {DESKEWED_POINTS.name: 2}
POINT_COLUMNS = ["scan_id", "x", "y", "z"]
"""What checking a point in base_link reads; a deskewed drive reads the whole row."""


@dataclass
class CalibrateResult:
    drive: str
    rig: Rig | None = None
    rig_problem: str | None = None
    rigless: bool = False
    """No rig for the vehicle at the drive's date (not a broken rig file): the drive is
    calibrated without transforms, its rows stay in their sensor frames, and exports carry
    no /tf_static and no /tf."""
    drive_date: dt.date | None = None
    date_source: str = ""
    sensor_frames: dict[str, list[str]] = field(default_factory=dict)
    """frame_id → normalized tables whose rows use it."""
    missing_extrinsics: dict[str, list[str]] = field(default_factory=dict)
    track: PoseTrack | None = None
    pose_problem: str | None = None
    deskew: bool = False
    points_in: int = 0
    points: PointStats = field(default_factory=PointStats)
    frames: FramesResult | None = None
    scans_in: int = 0
    table_rows: dict[str, int] = field(default_factory=dict)
    table_files: dict[str, list[str]] = field(default_factory=dict)


def calibrate_drive(
    lake: Lake,
    drive_id: str,
    *,
    rig_folders: Iterable[Path] = (),
    deskew: bool | None = None,
    audit: Callable[[CalibrateResult], bool] | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> tuple[CalibrateResult, bool]:
    """Calibrate a drive into staging, let `audit` judge it, publish if it agrees.

    `deskew` overrides drive.yaml's `deskew` key; `progress` gets (points done, bytes, points
    in all) as lidar points stream through. Returns the result and whether it was
    published (a rejected drive keeps its previous calibrated partitions).
    """
    release_large_frees()
    result = CalibrateResult(drive_id)
    meta = lake.read_partition("raw", RAW_DRIVES.name, drive_id).to_pylist()[0]
    extra = json.loads(meta.get("extra_json") or "{}")
    result.deskew = bool(extra.get(DESKEW_KEY, False)) if deskew is None else deskew
    streams = lake.read_partition("normalized", STREAMS.name, drive_id)
    result.drive_date, result.date_source = drive_date(meta.get("recorded_at"), streams)
    result.sensor_frames = sensor_frames(lake, drive_id)
    try:
        if not meta.get("vehicle"):
            raise RigNotFoundError("drive.yaml names no vehicle")
        if result.drive_date is None:
            raise RigNotFoundError("the drive has no date (no recorded_at and no timed rows)")
        result.rig = find_rig(meta["vehicle"], result.drive_date, rig_dirs(rig_folders))
    except RigNotFoundError as exc:
        result.rig_problem, result.rigless = str(exc), True
    except RigError as exc:
        result.rig_problem = str(exc)
    writers = {
        name: lake.partition_writer(
            "calibrated", name, drive_id, spec.schema, encode_threads=ENCODE_THREADS.get(name, 1)
        )
        for name, spec in CALIBRATED.items()
    }
    try:
        if result.rig is not None:
            _calibrate(lake, drive_id, result, streams, writers, progress)
        elif result.rigless:
            _calibrate_without_rig(lake, drive_id, result, streams, writers)
        for w in writers.values():
            w.close()
        result.table_rows = {name: w.rows_written for name, w in writers.items()}
        if audit is not None and not audit(result):
            for w in writers.values():
                w.abort()
            return result, False
        result.table_files = {name: w.publish() for name, w in writers.items()}
        return result, True
    except BaseException:
        for w in writers.values():
            w.abort()
        raise


def _calibrate(
    lake: Lake,
    drive_id: str,
    result: CalibrateResult,
    streams: pa.Table,
    writers: dict[str, PartitionWriter],
    progress: Callable[[int, int, int], None] | None,
) -> None:
    rig = result.rig
    assert rig is not None
    result.missing_extrinsics = {
        frame: tables for frame, tables in result.sensor_frames.items() if frame not in rig.frames
    }
    writers[TF_STATIC.name].write(tf_static_table(rig))
    try:
        result.track = _poses(lake, drive_id, rig)
    except BridgeLakeError as exc:
        result.pose_problem = str(exc)
    if result.track is not None:
        writers[POSES.name].write(_poses_table(result.track))
        writers[MAP_ORIGIN.name].write(_origin_table(result.track))
    scans = _scans(lake, drive_id)
    result.scans_in = scans.num_rows
    lidar_frames = set(scans.column("frame_id").to_pylist())
    deskewed: set[int] = set()
    if not lidar_frames & set(result.missing_extrinsics):
        transformer = PointTransformer(rig, scans, track=result.track, deskew=result.deskew)
        writers[LIDAR_TRANSFORMS.name].write(transformer.transforms_table())
        total = int(pc.sum(scans.column("point_count")).as_py() or 0)
        nbytes = 0
        cols = None if result.deskew else POINT_COLUMNS
        for batch in lake.iter_batches("normalized", "lidar_points", drive_id, columns=cols):
            result.points_in += batch.num_rows
            nbytes += batch.nbytes
            moved = transformer(batch)
            if result.deskew:
                writers[DESKEWED_POINTS.name].write(transformer.rows(batch, moved))
            if progress is not None:
                progress(result.points_in, nbytes, total)
        result.points = transformer.stats
        deskewed = transformer.deskewed_scans
    candidates = _candidates(lake, drive_id, rig, streams)
    result.frames = build_frames(scans, candidates, result.track, deskewed)
    writers[FRAMES.name].write(result.frames.table)


def _calibrate_without_rig(
    lake: Lake,
    drive_id: str,
    result: CalibrateResult,
    streams: pa.Table,
    writers: dict[str, PartitionWriter],
) -> None:
    """A drive whose vehicle has no rig: no transforms (calibrated/lidar_transforms is empty:
    its points stay in normalized/lidar_points, in their sensor frames), no poses in
    base_link, but its key frames, so the layer is complete and exports run in sensor
    frames."""
    scans = _scans(lake, drive_id)
    result.scans_in = scans.num_rows
    result.points_in = int(pc.sum(scans.column("point_count")).as_py() or 0)
    result.frames = build_frames(scans, _candidates(lake, drive_id, None, streams), None, set())
    writers[FRAMES.name].write(result.frames.table)


def _scans(lake: Lake, drive_id: str) -> pa.Table:
    return lake.read_partition(
        "normalized",
        "lidar_scans",
        drive_id,
        columns=["scan_id", "stream", "frame_id", "time_ns", "end_time_ns", "point_count"],
    )


def drive_date(recorded_at: str | None, streams: pa.Table) -> tuple[dt.date | None, str]:
    """drive.yaml's recorded_at (its date part) or, without a usable one, the date of the
    first master time; with where it came from (shown in the rig_found check)."""
    note = "first master time"
    if recorded_at:
        try:
            return dt.date.fromisoformat(str(recorded_at)[:10]), "drive.yaml recorded_at"
        except ValueError:
            note = f"first master time (recorded_at {recorded_at!r} is not a date)"
    first = pc.min(streams.column("first_time_ns")).as_py() if streams.num_rows else None
    if first is None:
        return None, "no date: no recorded_at and no timed rows"
    return dt.datetime.fromtimestamp(first / 1e9, tz=dt.UTC).date(), note


def sensor_frames(lake: Lake, drive_id: str) -> dict[str, list[str]]:
    """frame_id → the normalized SPATIAL_TABLES whose rows of the drive use it."""
    frames: dict[str, list[str]] = {}
    for table in SPATIAL_TABLES:
        ids = lake.read_partition("normalized", table, drive_id, columns=["frame_id"])
        for frame in pc.unique(ids.column("frame_id")).to_pylist():
            frames.setdefault(frame, []).append(table)
    return dict(sorted(frames.items()))


def _poses(lake: Lake, drive_id: str, rig: Rig) -> PoseTrack:
    """Ground truth where the rig knows its world frame and rows exist; else GNSS + IMU;
    else GNSS alone."""
    if rig.ground_truth is not None:
        gt = lake.read_partition(
            "normalized",
            "ground_truth",
            drive_id,
            columns=[
                "time_ns",
                "frame_id",
                "x_m",
                "y_m",
                "z_m",
                "roll_rad",
                "pitch_rad",
                "yaw_rad",
            ],
        )
        gt = gt.filter(pc.equal(gt.column("frame_id"), rig.ground_truth.frame))
        if gt.num_rows and pc.sum(pc.is_finite(gt.column("x_m"))).as_py():
            return poses_from_ground_truth(gt, rig)
    gnss = lake.read_partition("normalized", "gnss", drive_id)
    imu = lake.read_partition("normalized", "imu", drive_id)
    if gnss.num_rows and not imu.num_rows:
        return poses_from_gnss(gnss, rig)  # a GNSS-only drive: its track gives the heading
    if not gnss.num_rows:
        raise BridgeLakeError("no poses: the drive has no ground truth and no GNSS rows")
    wheels = lake.read_partition("normalized", "wheel_odometry", drive_id)
    return poses_from_gnss_imu(gnss, imu, rig, wheels if wheels.num_rows else None)


def _poses_table(track: PoseTrack) -> pa.Table:
    q = track.rotation.as_quat(canonical=True)
    n = len(track)
    return pa.table(
        {
            "time_ns": track.time_ns,
            "frame_id": pa.repeat(pa.scalar("map"), n),
            "child_frame_id": pa.repeat(pa.scalar("base_link"), n),
            "x_m": track.position[:, 0],
            "y_m": track.position[:, 1],
            "z_m": track.position[:, 2],
            "qx": q[:, 0],
            "qy": q[:, 1],
            "qz": q[:, 2],
            "qw": q[:, 3],
            "speed_mps": track.speed_mps,
            "yaw_rad": track.yaw,
            "source": pa.repeat(pa.scalar(track.source), n),
        },
        schema=POSES.schema,
    )


def _origin_table(track: PoseTrack) -> pa.Table:
    lat, lon, alt = track.origin
    return pa.table(
        {
            "frame_id": ["map"],
            "lat_deg": [lat],
            "lon_deg": [lon],
            "alt_m": [alt],
            "origin_source": [track.origin_source],
            "estimator": [track.estimator],
            "pose_count": [len(track)],
            "dropped_poses": [track.dropped],
        },
        schema=MAP_ORIGIN.schema,
    )


def _candidates(lake: Lake, drive_id: str, rig: Rig | None, streams: pa.Table) -> list[StreamTimes]:
    """Every camera, IMU and GNSS stream's sorted times (rig time offsets applied, none
    without a rig)."""
    rates = {
        (r["stream"], r["table"]): r["expected_rate_hz"] or r["mean_rate_hz"]
        for r in streams.select(["stream", "table", "expected_rate_hz", "mean_rate_hz"]).to_pylist()
    }
    out = []
    for table in MATCH_TABLES:
        rows = lake.read_partition(
            "normalized", table, drive_id, columns=["time_ns", "stream", "frame_id"]
        )
        for stream in sorted(pc.unique(rows.column("stream")).to_pylist()):
            sel = rows.filter(pc.equal(rows.column("stream"), stream))
            frame = sel.column("frame_id")[0].as_py()
            offset = rig.frames[frame].time_offset_ns if rig and frame in rig.frames else 0
            times = np.sort(sel.column("time_ns").to_numpy() + offset)
            out.append(StreamTimes(stream, table, times, rates.get((stream, table))))
    return out

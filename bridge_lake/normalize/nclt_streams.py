"""The NCLT stream catalogue: which table, default topic and nominal rate each file kind gets.

Kept apart from the row builders so the mapping is one readable table (docs and exports read
the same topics from the `streams` table the sink writes). Rates are the spec's figures
(nclt-format.md §3, §5-§9); where the spec gives a range the value chosen is noted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bridge_lake.drive_meta import DRIVE_YAML, MAX_DRIVE_YAML_BYTES, parse_drive_yaml
from bridge_lake.errors import DriveMetadataError
from bridge_lake.formats.nclt import NcltSession
from bridge_lake.normalize.sink import StreamInfo

SOURCE_TYPE = "nclt"


@dataclass(frozen=True)
class StreamSpec:
    table: str
    topic: str
    rate_hz: float | None
    """Nominal rate; None where the file is not time-driven (SLAM nodes every ~8 m)."""


STREAMS: dict[str, StreamSpec] = {
    "ms25": StreamSpec("imu", "/sensor/imu/data", 47.5),  # "≈ 47-48 Hz"
    "ms25_euler": StreamSpec("imu", "/sensor/imu/data", None),  # joined onto ms25 rows
    "kvh": StreamSpec("heading", "/sensor/kvh/heading", 94.0),
    "gps": StreamSpec("gnss", "/sensor/gps/fix", 8.0),  # ≈ 4 fixes/s, two rows per fix
    "gps_rtk": StreamSpec("gnss", "/sensor/gps_rtk/fix", 2.5),
    "gps_rtk_err": StreamSpec("gnss", "/sensor/gps_rtk/fix", None),  # joined onto gps_rtk
    "wheels": StreamSpec("wheel_odometry", "/sensor/wheels/speed", 45.0),  # "≈ 40-50 Hz"
    "odometry_mu": StreamSpec("odometry", "/odom", 5.0),
    "odometry_mu_100hz": StreamSpec("odometry", "/odom_100hz", 100.0),  # "≈ 100-110 Hz"
    "odometry_cov": StreamSpec("odometry", "/odom", None),  # joined onto odometry_mu
    "odometry_cov_100hz": StreamSpec("odometry", "/odom_100hz", None),  # joined onto ..._100hz
    "groundtruth": StreamSpec("ground_truth", "/ground_truth", 125.0),  # "≈ 100-150 Hz"
    "cov": StreamSpec("ground_truth_nodes", "/ground_truth/nodes", None),
    "velodyne_hits": StreamSpec("lidar_scans", "/sensor/lidar/points", 10.0),
    "velodyne_sync": StreamSpec("lidar_scans", "/sensor/lidar/sync_points", 5.0),
    "hokuyo_30m": StreamSpec("laser_scans", "/sensor/laser/hokuyo_30m/scan", 40.0),
    "hokuyo_4m": StreamSpec("laser_scans", "/sensor/laser/hokuyo_4m/scan", 10.0),
    "lb3": StreamSpec("camera_frames", "/sensor/camera/lb3_cam{k}/image", 5.0),
}
"""Stream (= NCLT file kind; lb3 expands to lb3_cam<k>) → table, topic, nominal rate. A side
file (nclt.SIDE_FILES) writes no rows: it has its primary's topic and no rate of its own."""


VELODYNE_KEY = "nclt_velodyne"
"""drive.yaml key naming the Velodyne point stream(s) to read: `velodyne_sync`, or a list of
both names to keep both (each then stores and counts the same sensor's points)."""
VELODYNE_STREAMS = ("velodyne_hits", "velodyne_sync")
"""The two point streams of NCLT's one HDL-32E, the default first: velodyne_hits.bin holds
every revolution with per-packet times; velodyne_sync/ holds a subset of them (≈ 5 Hz, spec
§6) with no per-point time. Reading both would store and count one sensor's points twice."""


def velodyne_streams(drive_dir: Path, present: set[str]) -> tuple[list[str], dict[str, str]]:
    """(streams to read, {stream left out: why}) for the Velodyne streams `present` in the
    session. By default velodyne_hits, or velodyne_sync when the drive has no hits file;
    drive.yaml `nclt_velodyne` chooses otherwise. An unknown name is a DriveMetadataError."""
    asked = _asked_velodyne(drive_dir)
    if asked is None:
        default = next((s for s in VELODYNE_STREAMS if s in present), None)
        read = [default] if default else []
        why = f"{VELODYNE_STREAMS[0]} holds the same lidar; set {VELODYNE_KEY} in {DRIVE_YAML}"
    else:
        read = [s for s in VELODYNE_STREAMS if s in asked and s in present]
        why = f"{DRIVE_YAML} {VELODYNE_KEY} names {', '.join(asked)}"
    return read, {s: why for s in VELODYNE_STREAMS if s in present and s not in read}


def _asked_velodyne(drive_dir: Path) -> list[str] | None:
    path = Path(drive_dir) / DRIVE_YAML
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        meta = parse_drive_yaml(f.read(MAX_DRIVE_YAML_BYTES + 1), where=str(path))
    value = meta.extra.get(VELODYNE_KEY)
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(n not in VELODYNE_STREAMS for n in names):
        raise DriveMetadataError(
            f"{path}: {VELODYNE_KEY} must be one of {', '.join(VELODYNE_STREAMS)} or a list "
            f"of them, got {value!r}"
        )
    return names


def source_file(session: NcltSession, path: Path) -> str:
    """Drive-relative POSIX path, as the raw manifest names files (completeness check)."""
    return path.relative_to(session.root).as_posix()


def stream_info(
    kind: str,
    rel: str,
    *,
    table: str | None = None,
    stream: str | None = None,
    topic: str | None = None,
    points: bool = False,
    skipped: str | None = None,
) -> StreamInfo:
    """The StreamInfo of an NCLT kind, optionally under a derived name (lb3_cam<k>), or for the
    lidar_points half of a lidar stream (`points=True`: points have no rate of their own)."""
    spec = STREAMS[kind]
    return StreamInfo(
        stream or kind,
        "lidar_points" if points else (table or spec.table),
        rel,
        f"{SOURCE_TYPE}:{kind}",
        topic or spec.topic,
        None if points else spec.rate_hz,
        skipped=skipped,
    )

"""NCLT session → normalized tables (shared/specs/nclt-format.md, ARCHITECTURE "normalized").

One function, `normalize_nclt(drive_dir, sink)`, maps every file of a session onto the
normalized tables through the `DriveSink`; `normalize_nclt_session` does the same and also
returns what it joined and skipped (`NcltReport`), for tests and the benchmark.

Clock. NCLT has one logging host that stamps every record with `utime` (µs, spec §2), so the
master time is `utime x 1000` in int64 ns (`clock.us_to_ns`, never float seconds). There is no
separate device clock in any file, so `sensor_time_ns` is always **null** for NCLT: a copy of
the master time would only give the sink a trivial fit (offset 0, drift 0) to store.

Streams. One stream per raw file kind, named by the kind (`ms25`, `gps`, `odometry_mu_100hz`,
`cov`, `velodyne_hits`, `hokuyo_30m`, `lb3_cam<k>`, ...), and one row per measurement. Every
file of the session is the `source_file` of a stream, so completeness and conservation hold
per file. The side files that qualify another file's rows at the same instants write no rows:
their values go into the primary's row of exactly the same utime and their records count as
joined (records read = rows written + records joined + rows quarantined, `_account_side`):

- `ms25_euler` → the orientation quaternion (R = Rz·Ry·Rx) of the `ms25` row;
- `gps_rtk_err` → `error_m` of the `gps_rtk` row;
- `odometry_cov[_100hz]` → `covariance` of the `odometry_mu[_100hz]` row.

Joins are exact-utime and one-to-one: a side record whose utime occurs more than once in its
file is ambiguous, one without a primary row at its utime has nothing to qualify; both are
quarantined with their line (counts in `NcltReport.joins`). `cov_<date>` (SLAM nodes, about
every 8 m, at times the dense ground truth need not hold) is its own table,
`ground_truth_nodes`; a `groundtruth` row at exactly a node's utime has `is_node` true.

Lidar. The one HDL-32E is two files: velodyne_hits.bin (every revolution) and velodyne_sync/
(a ≈ 5 Hz subset, no per-point time). Only one is read: velodyne_hits by default, velodyne_sync
when the drive has no hits file or drive.yaml `nclt_velodyne` names it (a list of both keeps
both); the other is declared `skipped` with why (`nclt_streams.velodyne_streams`).

Units and frames (sensor frames as NCLT defines them; REP-103 is the calibrated layer's job):
ms25 in its body axes (x forward, y right, z down, `frame_id` "ms25"), magnetic field
Gauss x 1e-4 → tesla; gps lat/lon rad → deg, track deg → rad, NaN altitude → null,
num_sats 0 → null ("not reported", spec §4), both rows of the mode-2/mode-3 pairs kept;
odometry and ground truth poses in their own NED-like world frames (`odom_ned`, `world_ned`),
each pose row with its twist in the body axes (x forward, y right, z down) from the pose
derivative (`_with_twist`);
lidar points in the NCLT Velodyne frame (z down); Hokuyo ranges in each sensor's frame;
Ladybug3 images kept as TIFF bytes, `rotate_cw_deg` 90.

Order. Every CSV stream (and the Hokuyo and file-per-record streams) is stably sorted by
master time when it is not monotonic; the number of records that were earlier than a record
before them is reported through `sink.reordered`. velodyne_hits.bin is a stream of gigabytes:
points are sorted within each scan; scans stay in file order (a backward scan shows up as
`out_of_order` in `streams`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from bridge_lake import clock
from bridge_lake.formats.nclt import NcltSession, load_table, locate_session
from bridge_lake.formats.nclt.archives import unpacked
from bridge_lake.formats.nclt.csv_tables import COV, CsvTable
from bridge_lake.geometry import body_twist
from bridge_lake.normalize.nclt_sensors import (
    LidarCounts,
    normalize_hokuyo,
    normalize_lb3,
    normalize_velodyne_hits,
    normalize_velodyne_sync,
    sync_folder,
)
from bridge_lake.normalize.nclt_streams import (
    SOURCE_TYPE,
    STREAMS,
    source_file,
    stream_info,
    velodyne_streams,
)
from bridge_lake.normalize.sink import DriveSink

GAUSS_TO_TESLA = 1e-4
DEG_PER_RAD = 180.0 / math.pi
RAD_PER_DEG = math.pi / 180.0
NOT_REPORTED_SATS = 0
"""num_sats value the consumer GPS writes on every row: "not reported" (spec §4) → null."""


@dataclass(frozen=True)
class JoinCount:
    """An exact-utime join of a side file onto a primary file's rows."""

    primary_rows: int
    side_rows: int
    matched: int
    """primary rows that received the side value."""
    ambiguous: int
    """side rows whose utime occurs more than once in the side file (not joined)."""

    @property
    def unmatched_primary(self) -> int:
        return self.primary_rows - self.matched


@dataclass
class NcltReport:
    """What normalizing a session did besides writing rows (the sink holds the row counts)."""

    joins: dict[str, JoinCount] = field(default_factory=dict)
    """'ms25_euler→ms25', 'gps_rtk_err→gps_rtk', 'odometry_cov→odometry_mu', ..."""
    lidar: dict[str, LidarCounts] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    """NCLT kinds with no file in the drive (not an error, spec §1)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Streams present but not read, by choice → why (a second Velodyne stream)."""


def normalize_nclt(drive_dir: Path, sink: DriveSink) -> None:
    """Normalize every NCLT file found under `drive_dir` into `sink` (the NORMALIZERS entry);
    a session packed as the dataset ships it (`<date>_*.tar.gz`) is streamed out first."""
    with unpacked(drive_dir) as root:
        normalize_nclt_session(root, sink, meta_dir=drive_dir)


def normalize_nclt_session(
    drive_dir: Path, sink: DriveSink, *, meta_dir: Path | None = None
) -> NcltReport:
    """Like normalize_nclt, returning the joins, lidar figures and missing kinds. The drive's
    choices (drive.yaml, `velodyne_streams`) are read from `meta_dir`, else `drive_dir`."""
    session = locate_session(drive_dir)
    meta_dir = drive_dir if meta_dir is None else meta_dir
    report = NcltReport(missing=list(session.missing))
    for group in CSV_GROUPS:
        # A file and the side file joined onto it are loaded together and dropped together,
        # so at most one pair of CSV tables is in memory (typed rows, parsed block by block:
        # a fraction of the text's size).
        tables = {kind: _load(session, kind) for kind in group if kind in session.files}
        for table in tables.values():
            if table.kind in SIDE_FILES:
                _account_side(sink, session, table, tables.get(SIDE_FILES[table.kind]))
            else:
                _write_csv(sink, session, table, _CSV_BUILDERS[table.kind], tables, report)
        del tables
    files = session.files
    velodyne = {
        "velodyne_hits": source_file(session, files["velodyne_hits"])
        if "velodyne_hits" in files
        else None,
        "velodyne_sync": sync_folder(session) if session.scans else None,
    }
    read, skipped = velodyne_streams(meta_dir, {k for k, v in velodyne.items() if v})
    for stream, why in skipped.items():
        sink.declare(stream_info(stream, velodyne[stream] or "", skipped=why))
    report.skipped.update(skipped)
    if "velodyne_hits" in read:
        report.lidar["velodyne_hits"] = normalize_velodyne_hits(
            sink, files["velodyne_hits"], source_file(session, files["velodyne_hits"])
        )
    if "velodyne_sync" in read:
        report.lidar["velodyne_sync"] = normalize_velodyne_sync(sink, session)
    for kind in ("hokuyo_30m", "hokuyo_4m"):
        if kind in files:
            normalize_hokuyo(sink, kind, files[kind], source_file(session, files[kind]))
    for camera in sorted(session.images):
        normalize_lb3(sink, session, camera)
    return report


# --- CSV tables ------------------------------------------------------------------------------


def _load(session: NcltSession, kind: str) -> CsvTable:
    return load_table(kind, session.files[kind])


def _write_csv(
    sink: DriveSink,
    session: NcltSession,
    table: CsvTable,
    build: Callable[[pl.DataFrame, dict[str, CsvTable], NcltReport], pl.DataFrame],
    tables: dict[str, CsvTable],
    report: NcltReport,
) -> None:
    """One CSV file → one stream: count, quarantine malformed lines, sort, convert, write."""
    kind = table.kind
    spec = STREAMS[kind]
    _declare_csv(sink, session, table)
    frame = _time_sorted(sink, kind, spec.table, table.frame)
    out = build(frame, tables, report)
    sink.write(kind, spec.table, out.to_arrow())


def _declare_csv(sink: DriveSink, session: NcltSession, table: CsvTable) -> str:
    """Declare a CSV file's stream, count its lines and quarantine the malformed ones."""
    kind, target = table.kind, STREAMS[table.kind].table
    rel = source_file(session, table.path)
    sink.declare(stream_info(kind, rel))
    sink.read(kind, target, table.frame.height + table.quarantine.height)
    if table.quarantine.height:
        q = table.quarantine
        lines = q.get_column("line").to_list()
        sink.quarantine(
            kind,
            target,
            source_file=rel,
            reasons=q.get_column("reason").to_list(),
            record_index=[n - 1 for n in lines],
            line=lines,
            raw=[t.encode() for t in q.get_column("text").to_list()],
        )
    return rel


def _account_side(
    sink: DriveSink, session: NcltSession, side: CsvTable, primary: CsvTable | None
) -> None:
    """A side file has no rows of its own: each record whose utime is unique in the file and
    has a row of the primary file is joined onto that row (the primary's builder put its
    values there: `_exact_join`) and counted as joined. The others would be a measurement
    without the row it qualifies: quarantined, with their line and the line re-written from
    the parsed values (shortest round-trip text), under `ambiguous_utime` or
    `no_<primary>_row_at_utime`."""
    rel = _declare_csv(sink, session, side)
    target = STREAMS[side.kind].table
    utime = side.frame.get_column("utime")
    unique = ~utime.is_duplicated()
    if primary is None:
        present = pl.Series([False] * side.frame.height)
    else:
        present = utime.is_in(primary.frame.get_column("utime").implode())
    joined = unique & present
    sink.joined(side.kind, target, int(joined.sum()))
    left = (~joined).to_numpy()
    if not left.any():
        return
    bad = side.quarantine.get_column("line").to_numpy()
    lines = np.setdiff1d(np.arange(1, side.frame.height + bad.size + 1), bad)[left]
    text = side.frame.filter(~joined).select(
        pl.concat_str([pl.col(c).cast(pl.String) for c in side.frame.columns], separator=",")
    )
    sink.quarantine(
        side.kind,
        target,
        source_file=rel,
        reasons=np.where(
            unique.to_numpy()[left], f"no_{SIDE_FILES[side.kind]}_row_at_utime", "ambiguous_utime"
        ).tolist(),
        record_index=(lines - 1).tolist(),
        line=lines.tolist(),
        raw=[t.encode() for t in text.to_series().fill_null("nan").to_list()],
    )


def _time_sorted(sink: DriveSink, stream: str, table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with a `time_ns` column (utime x 1000, exact), stably sorted by it if needed."""
    utime = frame.get_column("utime").to_numpy()
    time_ns = clock.us_to_ns(utime)
    frame = frame.with_columns(pl.Series("time_ns", time_ns, dtype=pl.Int64))
    perm = clock.stable_order(time_ns)
    if perm is not None:
        sink.reordered(stream, table, clock.reorder_count(time_ns))
        frame = frame[perm]
    return frame


def _exact_join(
    frame: pl.DataFrame,
    side: CsvTable | None,
    value: pl.Expr,
    name: str,
    join_name: str,
    report: NcltReport,
) -> pl.DataFrame:
    """Left-join `value` (an expression over the side file's columns) onto `frame` by exact
    utime, one-to-one. Side utimes occurring more than once are ambiguous and left out."""
    if side is None:
        return frame.with_columns(pl.lit(None).alias(name))
    values = side.frame.select("utime", value.alias(name))
    unique = values.filter(pl.len().over("utime") == 1)
    joined = frame.join(unique, on="utime", how="left", maintain_order="left")
    matched = int(frame.get_column("utime").is_in(unique.get_column("utime").implode()).sum())
    report.joins[join_name] = JoinCount(
        frame.height, side.frame.height, matched, values.height - unique.height
    )
    return joined


def _covariance() -> pl.Expr:
    """The 21 upper-triangle values as one fixed-size list (nulls inside stay nulls)."""
    return pl.concat_list([pl.col(c) for c in COV]).list.to_array(len(COV))


def _base(frame_id: str) -> list[pl.Expr]:
    return [pl.col("time_ns"), pl.lit(frame_id).alias("frame_id")]


def _ms25(frame: pl.DataFrame, tables: dict, report: NcltReport) -> pl.DataFrame:
    """ms25 rows with the orientation of ms25_euler's row of the same utime (one measurement
    of the MS25, logged as two files): null where ms25_euler has none."""
    side = tables.get("ms25_euler")
    if side is None:
        orientation = [pl.lit(None, pl.Float64).alias(f"orientation_{a}") for a in "xyzw"]
    else:
        euler = quaternion_from_euler(pl.col("roll"), pl.col("pitch"), pl.col("heading"))
        frame = _exact_join(frame, side, pl.struct(euler), "q", "ms25_euler→ms25", report)
        orientation = [pl.col("q").struct.field(f"orientation_{a}") for a in "xyzw"]
    return frame.select(
        *_base("ms25"),
        *(pl.col(f"gyro_{a}").alias(f"angular_velocity_{a}") for a in "xyz"),
        *(pl.col(f"accel_{a}").alias(f"linear_acceleration_{a}") for a in "xyz"),
        *((pl.col(f"mag_{a}") * GAUSS_TO_TESLA).alias(f"magnetic_field_{a}") for a in "xyz"),
        *orientation,
    )


def quaternion_from_euler(roll: pl.Expr, pitch: pl.Expr, heading: pl.Expr) -> list[pl.Expr]:
    """(x, y, z, w) of R = Rz(heading)·Ry(pitch)·Rx(roll) (spec §3, devkit ssc_to_homo): the
    product qz·qy·qx of the three axis rotations, w kept as computed (not forced positive)."""
    cr, sr = (roll / 2).cos(), (roll / 2).sin()
    cp, sp = (pitch / 2).cos(), (pitch / 2).sin()
    cy, sy = (heading / 2).cos(), (heading / 2).sin()
    return [
        (sr * cp * cy - cr * sp * sy).alias("orientation_x"),
        (cr * sp * cy + sr * cp * sy).alias("orientation_y"),
        (cr * cp * sy - sr * sp * cy).alias("orientation_z"),
        (cr * cp * cy + sr * sp * sy).alias("orientation_w"),
    ]


def _kvh(frame: pl.DataFrame, tables: dict, report: NcltReport) -> pl.DataFrame:
    return frame.select(*_base("kvh"), pl.col("heading").alias("heading_rad"))


def _gnss(frame_id: str) -> Callable[[pl.DataFrame, dict, NcltReport], pl.DataFrame]:
    def build(frame: pl.DataFrame, tables: dict, report: NcltReport) -> pl.DataFrame:
        if frame_id == "gps_rtk":
            frame = _exact_join(
                frame,
                tables.get("gps_rtk_err"),
                pl.col("err"),
                "error_m",
                "gps_rtk_err→gps_rtk",
                report,
            )
        else:
            frame = frame.with_columns(pl.lit(None, pl.Float64).alias("error_m"))
        return frame.select(
            *_base(frame_id),
            (pl.col("lat") * DEG_PER_RAD).alias("lat_deg"),
            (pl.col("lon") * DEG_PER_RAD).alias("lon_deg"),
            pl.col("alt").alias("alt_m"),
            pl.col("mode").alias("fix_mode"),
            pl.when(pl.col("num_sats") == NOT_REPORTED_SATS)
            .then(None)
            .otherwise(pl.col("num_sats"))
            .alias("num_sats"),
            (pl.col("track") * RAD_PER_DEG).alias("track_rad"),
            pl.col("speed").alias("speed_mps"),
            pl.col("error_m"),
        )

    return build


def _wheels(frame: pl.DataFrame, tables: dict, report: NcltReport) -> pl.DataFrame:
    return frame.select(
        *_base("body"),
        pl.col("v_left").alias("v_left_mps"),
        pl.col("v_right").alias("v_right_mps"),
    )


def _pose() -> list[pl.Expr]:
    return [
        pl.col("x").alias("x_m"),
        pl.col("y").alias("y_m"),
        pl.col("z").alias("z_m"),
        pl.col("roll").alias("roll_rad"),
        pl.col("pitch").alias("pitch_rad"),
        pl.col("heading").alias("yaw_rad"),
    ]


ODOM_FRAME = "odom_ned"
"""World frame of odometry_mu*: NED-like, starting near the identity (spec §3)."""
GT_FRAME = "world_ned"
"""World frame of the ground truth: local NED at the calibration.yaml origin (spec §3)."""
BODY_FRAME = "body"


def _odometry(cov_kind: str) -> Callable[[pl.DataFrame, dict, NcltReport], pl.DataFrame]:
    def build(frame: pl.DataFrame, tables: dict, report: NcltReport) -> pl.DataFrame:
        mu_kind = cov_kind.replace("cov", "mu")
        frame = _exact_join(
            frame,
            tables.get(cov_kind),
            _covariance(),
            "covariance",
            f"{cov_kind}→{mu_kind}",
            report,
        )
        return _with_twist(
            frame.select(
                *_base(ODOM_FRAME),
                pl.lit(BODY_FRAME).alias("child_frame_id"),
                *_pose(),
                pl.col("covariance"),
            )
        )

    return build


def _with_twist(poses: pl.DataFrame) -> pl.DataFrame:
    """Pose rows (time-sorted) with the twist nav_msgs/Odometry carries: the body's velocity in
    its own axes, from the pose derivative. Not from wheels.csv: the derivative is the motion
    of the very pose it travels with (integrating it gives the pose back), exists for the
    ground truth too, and needs neither a time join with the 45 Hz wheel rows nor the wheel
    track (which a rig file does not hold). Null where a pose is invalid or isolated."""
    linear, angular = body_twist(
        poses.get_column("time_ns").to_numpy(),
        np.stack([poses.get_column(c).to_numpy() for c in ("x_m", "y_m", "z_m")], axis=-1),
        *(poses.get_column(c).to_numpy() for c in ("roll_rad", "pitch_rad", "yaw_rad")),
    )
    return poses.with_columns(
        *(
            pl.Series(f"{name}_{axis}", values[:, i], dtype=pl.Float64, nan_to_null=True)
            for name, values in (("linear_velocity", linear), ("angular_velocity", angular))
            for i, axis in enumerate("xyz")
        )
    )


def _groundtruth(frame: pl.DataFrame, tables: dict, report: NcltReport) -> pl.DataFrame:
    """Ground-truth poses; `is_node` where a SLAM node (cov_<date>.csv) has the same utime.
    The node covariances stay in ground_truth_nodes only (kept once)."""
    cov = tables.get("cov")
    nodes = cov.frame.get_column("utime") if cov is not None else pl.Series([], dtype=pl.Int64)
    return _with_twist(
        frame.select(
            *_base(GT_FRAME),
            pl.lit(BODY_FRAME).alias("child_frame_id"),
            *_pose(),
            pl.lit(None, pl.Array(pl.Float64, len(COV))).alias("covariance"),
            pl.col("utime").is_in(nodes.implode()).alias("is_node"),
        )
    )


def _cov(frame: pl.DataFrame, tables: dict, report: NcltReport) -> pl.DataFrame:
    """SLAM nodes: their time and pose covariance, one ground_truth_nodes row each."""
    return frame.select(*_base(GT_FRAME), _covariance().alias("covariance"))


_Builder = Callable[[pl.DataFrame, dict, NcltReport], pl.DataFrame]
_CSV_BUILDERS: dict[str, _Builder] = {
    "ms25": _ms25,
    "kvh": _kvh,
    "gps": _gnss("gps"),
    "gps_rtk": _gnss("gps_rtk"),
    "wheels": _wheels,
    "odometry_mu": _odometry("odometry_cov"),
    "odometry_mu_100hz": _odometry("odometry_cov_100hz"),
    "groundtruth": _groundtruth,
    "cov": _cov,
}
"""CSV kind (= stream name) → the builder of its rows; side files are joined inside."""
SIDE_FILES: dict[str, str] = {
    "ms25_euler": "ms25",
    "gps_rtk_err": "gps_rtk",
    "odometry_cov": "odometry_mu",
    "odometry_cov_100hz": "odometry_mu_100hz",
}
"""Side file → the file whose rows of the same utime it completes (one measurement, two
files): its values go into those rows, it writes none of its own (`_account_side`)."""
CSV_GROUPS: tuple[tuple[str, ...], ...] = (
    ("ms25", "ms25_euler"),
    ("kvh",),
    ("gps",),
    ("gps_rtk", "gps_rtk_err"),
    ("wheels",),
    ("odometry_mu", "odometry_cov"),
    ("odometry_mu_100hz", "odometry_cov_100hz"),
    ("groundtruth", "cov"),
)
"""Processing order of the CSV kinds: each primary file with the side file joined onto it."""
assert sorted(k for g in CSV_GROUPS for k in g) == sorted([*_CSV_BUILDERS, *SIDE_FILES])

__all__ = [
    "SOURCE_TYPE",
    "JoinCount",
    "NcltReport",
    "normalize_nclt",
    "normalize_nclt_session",
    "quaternion_from_euler",
]

"""Data-quality rules of the normalized layer, as pure functions over the sink's figures.

The Dagster layer turns each `Finding` into an asset check result; keeping the rules here
makes them testable without Dagster and the same for every source.

Value checks run per batch while the sink writes (`value_violations`), so they cost one
vectorized pass over data that is in memory anyway.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake.drive_meta import CATALOG_FROM_KEY
from bridge_lake.findings import Finding
from bridge_lake.formats.adtf.model import KIND_RAW
from bridge_lake.lake.schemas import SENSOR_TABLES

RATE_TOLERANCE = 0.3
"""Observed mean rate may differ from the nominal rate by 30% (logging hosts jitter)."""
DRIFT_LIMIT_PPM = 200.0
"""A device clock drifting more than 200 ppm (0.72 s/h) against the master is suspicious."""
QUARANTINE_LIMIT = 0.01
"""More than 1% of a stream's records quarantined is worth a look."""
MAX_ACCEL = 160.0
"""|specific force| above 16 g is not a vehicle."""
MAX_GYRO = 35.0
"""|angular velocity| above 2000 °/s is beyond automotive IMUs."""
QUAT_TOLERANCE = 1e-3
ALT_RANGE = (-500.0, 9000.0)


CHECKS: dict[str, tuple[str, bool]] = {
    "conservation": (
        "records read = rows written + records joined + rows quarantined, per stream",
        True,
    ),
    "monotonic": ("time_ns never decreases within a stream after repair", True),
    "rate": ("observed rate within 30% of the stream's nominal rate", False),
    "gaps": ("no step longer than 5 nominal periods", False),
    "values": ("values within physical ranges (lat/lon, |accel|, unit quaternions, finite)", False),
    "one_row_per_instant": (
        "one row per measurement: no two streams of one sensor frame share a time stamp (a "
        "measurement split over rows, or kept twice), so a count of rows is the sensor's rate",
        False,
    ),
}
"""Checks of every sensor table: name → (description, is ERROR and blocking)."""
NULL_POSE_CHECK = {
    "null_pose": (
        "a null pose marks an invalid row: such a row carries no covariance, twist or node flag",
        False,
    )
}
TABLE_CHECKS: dict[str, dict[str, tuple[str, bool]]] = {
    "lidar_scans": {
        "scan_end": ("every scan's end_time_ns is the time of its last point", False),
        "one_stream_per_lidar": (
            "one point stream per lidar (frame_id): a second stream of the same lidar stores "
            "and counts its points twice",
            False,
        ),
    },
    "odometry": NULL_POSE_CHECK,
    "ground_truth": NULL_POSE_CHECK,
}
"""Checks of one sensor table beside CHECKS."""
END_NOT_LAST_POINT = "end_time_not_last_point"
"""Violation of a lidar_scans stream (the sink counts it at stage): a scan whose end_time_ns is
not its last point's time, i.e. time_ns + the largest time_offset_ns of its points (a null
offset is 0, as in the lidar_points_timed view; time_ns for a scan without points)."""
NULL_POSE_WITH_DATA = "null_pose_with_data"
"""Violation of a pose table: a row with a null position carrying a covariance, a twist or
is_node = true (a partial record, not the invalid row a null pose stands for)."""
VIOLATION_CHECK = {END_NOT_LAST_POINT: "scan_end", NULL_POSE_WITH_DATA: "null_pose"}
"""Value violations reported by their own check rather than by `values`."""


def checks_of(table: str) -> dict[str, tuple[str, bool]]:
    """Every check of a sensor table: CHECKS plus its TABLE_CHECKS."""
    return {**CHECKS, **TABLE_CHECKS.get(table, {})}


COVERAGE_TOLERANCE = 0.1
"""A stream starting or ending more than 10 % of the drive's median span away from the other
streams' median start / end does not belong to the same recording session (e.g. files left
over from an earlier drive in the same folder)."""
SUGGEST = "bridge-lake mapping suggest {file} --out mapping.yaml"
"""How a user maps streams that went to generic tables (named in check messages)."""
CATALOG_FIX = (
    "put a finished recording of the same vehicle (drive.yaml `vehicle`) in the landing "
    f"zone, or name one in drive.yaml `{CATALOG_FROM_KEY}: DRIVE/FILE`, then re-run the drive"
)
"""How a user gives the streams of a recording cut short their names and types."""
TYPES_FIX = (
    "the recordings describe no stream type for them (`bridge-lake info FILE` lists the "
    "streams): land recordings whose streams are described"
)
"""What a user can do about intact recordings whose streams have no type at all."""
RECOVERED_TYPE = "file:recovered"
"""source_type of a recovered recording's quarantine row (normalize/adtf_recovery.py)."""
UNTYPED = f"adtf:{KIND_RAW}"
"""source_type of an ADTF stream with no stream type at all (adtf_jobs `source_type`): no
name or type survived (a recording cut short without catalog), so only bytes land. A typed
stream without DDL (`adtf/anonymous`, raw media) lands as payloads too, as recorded."""
CATALOG_CHECKS: dict[str, tuple[str, bool]] = {
    "completeness": (
        "every recording file of the drive was read into some stream, or left out by a stream "
        "the catalog names as skipped (with why)",
        True,
    ),
    "has_rows": ("the drive's recordings yield rows in some table", True),
    "decoded": (
        "some stream has a type: a drive whose rows are all raw payloads of streams without "
        "names or types (a recording cut short, no catalog) fails, naming the fix",
        True,
    ),
    "conservation": (
        "records read = rows written + rows quarantined for every stream outside the sensor "
        "tables (generic ADTF tables, payloads, unreadable files; sensor tables check their own)",
        True,
    ),
    "mapped": (
        "every stream feeds a sensor table (ADTF: none only in generic ddl_* / payload tables)",
        False,
    ),
    "clock_drift": (f"device clocks drift less than {DRIFT_LIMIT_PPM:g} ppm", False),
    "time_coverage": (
        "every stream starts and ends with the others (within 10% of the drive's span)",
        False,
    ),
    "files": (
        "every recording file was read whole: an empty, truncated, unreadable or damaged one "
        "is quarantined as a file and named here with its reason (the rest of the drive lands)",
        False,
    ),
}
QUARANTINE_CHECKS: dict[str, tuple[str, bool]] = {
    "quarantine_share": (f"at most {QUARANTINE_LIMIT:.0%} of any stream quarantined", False),
}


def _norm(batch: pa.RecordBatch | pa.Table, prefix: str) -> np.ndarray:
    """Euclidean norm of a vector column triple; null components count as unknown, not 0,
    unless another component is known (then the norm is at least that large)."""
    cols = np.stack(
        [
            np.asarray(batch.column(f"{prefix}_{a}").to_numpy(zero_copy_only=False), dtype=float)
            for a in "xyz"
        ]
    )
    known = ~np.isnan(cols).all(axis=0)
    norm = np.sqrt(np.nansum(cols**2, axis=0))
    return np.where(known, norm, np.nan)


def value_violations(table: str, batch: pa.RecordBatch | pa.Table) -> dict[str, int]:
    """Counts of out-of-range values in one batch of a normalized table (nulls are fine)."""
    out: dict[str, int] = {}

    def count(name: str, bad: np.ndarray) -> None:
        n = int(np.count_nonzero(bad))
        if n:
            out[name] = out.get(name, 0) + n

    if table == "gnss":
        lat = batch.column("lat_deg").to_numpy(zero_copy_only=False).astype(np.float64)
        lon = batch.column("lon_deg").to_numpy(zero_copy_only=False).astype(np.float64)
        alt = batch.column("alt_m").to_numpy(zero_copy_only=False).astype(np.float64)
        with np.errstate(invalid="ignore"):
            count("lat_out_of_range", ~(np.abs(lat) <= 90) & ~np.isnan(lat))  # ±inf too
            count("lon_out_of_range", ~(np.abs(lon) <= 180) & ~np.isnan(lon))
            count("alt_out_of_range", (alt < ALT_RANGE[0]) | (alt > ALT_RANGE[1]))
    elif table == "imu":
        with np.errstate(invalid="ignore"):
            count("accel_implausible", _norm(batch, "linear_acceleration") > MAX_ACCEL)
            count("gyro_implausible", _norm(batch, "angular_velocity") > MAX_GYRO)
            q = [
                batch.column(f"orientation_{a}").to_numpy(zero_copy_only=False).astype(float)
                for a in "xyzw"
            ]
            qn = np.sqrt(sum(c**2 for c in q))
            count("quaternion_not_unit", np.abs(qn - 1) > QUAT_TOLERANCE)
    elif table == "lidar_points":
        finite = [pc.is_finite(batch.column(a)) for a in "xyz"]
        bad = pc.invert(pc.and_(pc.and_(finite[0], finite[1]), finite[2]))
        count("non_finite_point", np.asarray(bad.to_numpy(zero_copy_only=False)))
    elif table in ("odometry", "ground_truth"):
        null = pc.is_null(batch.column("x_m"), nan_is_null=True)
        data = pc.or_(
            pc.is_valid(batch.column("covariance")),
            pc.is_valid(batch.column("linear_velocity_x")),
        )
        if "is_node" in batch.column_names:
            data = pc.or_(data, pc.fill_null(batch.column("is_node"), False))
        bad = pc.and_(null, data)
        count(NULL_POSE_WITH_DATA, np.asarray(bad.to_numpy(zero_copy_only=False)))
    elif table == "can_frames":
        dlc = batch.column("dlc").to_numpy(zero_copy_only=False)
        lengths = pc.binary_length(batch.column("data")).to_numpy(zero_copy_only=False)
        count("dlc_out_of_range", (dlc < 0) | (dlc > 64))
        count("dlc_payload_mismatch", (dlc <= 8) & (lengths != dlc))
    return out


def sensor_table_findings(table: str, streams: list) -> list[Finding]:
    """The CHECKS of one sensor table from its streams' StreamStats (sink figures)."""
    mine = [s for s in streams if s.info.table == table]
    names = [s.info.stream for s in mine]
    broken = {
        s.info.stream: {
            "read": s.records_read,
            "written": s.rows_written,
            "quarantined": s.rows_quarantined,
        }
        for s in mine
        if not s.conserved
    }
    findings = [
        Finding(
            table,
            "conservation",
            not broken,
            True,
            {
                "streams": names,
                "violations": broken,
                "records_read": sum(s.records_read for s in mine),
                "rows_written": sum(s.rows_written for s in mine),
                "rows_quarantined": sum(s.rows_quarantined for s in mine),
            },
            "; ".join(
                f"{stream}: {v['read']} records read, {v['written']} rows written, "
                f"{v['quarantined']} quarantined"
                for stream, v in broken.items()
            ),
        ),
    ]
    disorder = {s.info.stream: s.order.backward for s in mine if s.order and s.order.backward}
    findings.append(
        Finding(
            table,
            "monotonic",
            not disorder,
            True,
            {"out_of_order": disorder, "reordered": {s.info.stream: s.reordered for s in mine}},
            "; ".join(f"{n} records out of order in {stream}" for stream, n in disorder.items()),
        )
    )
    rates, off = {}, {}
    for s in mine:
        expected, observed = s.info.expected_rate_hz, s.mean_rate_hz
        if expected and observed:
            rates[s.info.stream] = {"expected_hz": expected, "observed_hz": round(observed, 3)}
            if abs(observed - expected) > RATE_TOLERANCE * expected:
                off[s.info.stream] = rates[s.info.stream]
    findings.append(
        Finding(table, "rate", not off, False, {"rates": rates, "off": off}, _rate_summary(off))
    )
    gapped = [s for s in mine if s.order and s.order.gaps]
    gaps = {
        s.info.stream: {
            "gaps": s.order.gaps,
            "longest_gap_s": s.order.longest_gap_ns / 1e9,
            "threshold_s": (s.order.gap_threshold_ns or 0) / 1e9,
            "longest_gap_at": _clock_time(s.order.longest_gap_at_ns),
        }
        for s in gapped
    }
    findings.append(
        Finding(table, "gaps", not gaps, False, {"streams_with_gaps": gaps}, _gaps_summary(gapped))
    )
    for check in (
        "values",
        *(c for c in TABLE_CHECKS.get(table, {}) if c in VIOLATION_CHECK.values()),
    ):
        findings.append(_violations_finding(table, check, mine))
    findings.append(instants_finding(table, mine))
    if table == "lidar_scans":
        findings.append(lidar_streams_finding(mine))
    return findings


def _violations_finding(table: str, check: str, mine: list) -> Finding:
    """The value violations of the streams of `table` that `check` reports (VIOLATION_CHECK;
    the rest are `values`)."""
    values = {
        s.info.stream: v
        for s in mine
        if (
            v := {
                k: n for k, n in s.violations.items() if VIOLATION_CHECK.get(k, "values") == check
            }
        )
    }
    summary = "; ".join(
        f"{stream}: " + ", ".join(f"{n} {what}" for what, n in v.items())
        for stream, v in values.items()
    )
    return Finding(table, check, not values, False, {"violations": values}, summary)


def instants_finding(table: str, mine: list) -> Finding:
    """`one_row_per_instant`: streams of one table sharing a frame_id whose time stamps are
    mostly the same (at least SPLIT_SHARE of the smaller stream's) are one measurement split
    over rows (NCLT ms25 and ms25_euler before they were joined) or kept twice. Two estimates
    of one frame at their own rates (odometry_mu at 5 Hz, odometry_mu_100hz) meet at a stamp
    now and then by chance: counted in the metadata, not flagged. Exact int64 times, one
    sorted intersection a pair of streams of the same frame."""
    timed = [s for s in mine if s.times and s.frames]
    shared: dict[str, int] = {}
    split: dict[str, int] = {}
    for i, a in enumerate(timed):
        for b in timed[i + 1 :]:
            if a.frames & b.frames:
                ta, tb = np.unique(np.concatenate(a.times)), np.unique(np.concatenate(b.times))
                n = int(np.intersect1d(ta, tb, assume_unique=True).size)
                if n:
                    shared[f"{a.info.stream} + {b.info.stream}"] = n
                if n and n >= SPLIT_SHARE * min(ta.size, tb.size):
                    split[f"{a.info.stream} + {b.info.stream}"] = n
    return Finding(
        table,
        "one_row_per_instant",
        not split,
        False,
        {"shared_instants": shared, "split": split},
        "; ".join(
            f"{pair} share {_count(n, 'time stamp')} of one frame" for pair, n in split.items()
        )
        if split
        else f"every instant is one row in {_count(len(timed), 'stream')}",
    )


SPLIT_SHARE = 0.5
"""Share of the smaller stream's time stamps two streams of one frame must have in common to
be one measurement split over rows (a split shares all of them)."""


def lidar_streams_finding(mine: list) -> Finding:
    """`one_stream_per_lidar`: lidar_scans streams with rows, by frame_id (one lidar)."""
    by_frame: dict[str, list[str]] = {}
    for s in mine:
        if s.rows_written:
            for frame in sorted(s.frames):
                by_frame.setdefault(frame, []).append(s.info.stream)
    twice = {frame: names for frame, names in by_frame.items() if len(names) > 1}
    return Finding(
        "lidar_scans",
        "one_stream_per_lidar",
        not twice,
        False,
        {"streams_by_frame": by_frame, "more_than_one": twice},
        "; ".join(f"lidar {f} has {len(n)} point streams: {', '.join(n)}" for f, n in twice.items())
        if twice
        else f"{_count(len(by_frame), 'lidar')}, one point stream each",
    )


def _clock_time(ns: int | None) -> str:
    """A master-clock time as the UTC time of day (ms), or seconds when it is not a date."""
    if ns is None:
        return "?"
    if 10**17 < ns < 4 * 10**18:
        return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%H:%M:%S.%f")[:-3]
    return f"{ns / 1e9:.3f} s"


def _gaps_summary(streams: list) -> str:
    """One line per gapped stream: '3 gaps over 0.5 s in gnss, the longest 4.2 s at 12:03:05'."""
    return "; ".join(
        f"{s.order.gaps} gap{'s' if s.order.gaps != 1 else ''} over "
        f"{(s.order.gap_threshold_ns or 0) / 1e9:.3g} s in {s.info.stream}, the longest "
        f"{s.order.longest_gap_ns / 1e9:.3g} s at {_clock_time(s.order.longest_gap_at_ns)}"
        for s in streams
    )


def _rate_summary(off: dict) -> str:
    return "; ".join(
        f"{stream} at {r['observed_hz']:g} Hz, expected {r['expected_hz']:g} Hz"
        for stream, r in off.items()
    )


def catalog_findings(streams: list, recordings: int, lost: list[str]) -> list[Finding]:
    """Checks of the streams catalog: completeness against the raw manifest, clock drift.

    `lost` are recording files of the drive (out of `recordings`) that no stream came from
    (nor a skipped stream names: those are listed, not lost).
    """
    skipped = {s.info.stream: s.info.skipped for s in streams if s.info.skipped}
    left_out = (
        "; left out by choice: " + _listed([f"{name} ({why})" for name, why in skipped.items()])
        if skipped
        else ""
    )
    drift = {
        s.info.stream: round(s.fit.drift_ppm, 3)
        for s in streams
        if s.fit and abs(s.fit.drift_ppm) > DRIFT_LIMIT_PPM
    }
    fits = {s.info.stream: round(s.fit.drift_ppm, 3) for s in streams if s.fit}
    return [
        Finding(
            "streams",
            "completeness",
            not lost,
            True,
            {"recordings": recordings, "without_stream": lost[:50], "skipped": skipped},
            (
                f"{len(lost)} of {recordings} recordings gave no stream: {_listed(lost)}"
                if lost
                else f"every one of {recordings} recordings gave streams"
            )
            + left_out,
        ),
        Finding(
            "streams",
            "clock_drift",
            not drift,
            False,
            {"drift_ppm": fits, "over_limit": drift},
            f"{_count(len(drift), 'device clock')} over {DRIFT_LIMIT_PPM:g} ppm of drift: "
            + _listed([f"{stream} {ppm:+g} ppm" for stream, ppm in drift.items()])
            if drift
            else f"{_count(len(fits), 'device clock')} within {DRIFT_LIMIT_PPM:g} ppm",
        ),
        coverage_finding(streams),
        *mapping_findings(streams),
        files_finding(streams),
    ]


def files_finding(streams: list) -> Finding:
    """`files` (warning): the files that were quarantined whole or read with damage (streams
    whose source_type starts with `file:`), each with its most frequent reason."""
    bad = [s for s in streams if s.info.source_type.startswith("file:")]
    problems = {
        s.info.source_file: {
            "kind": s.info.source_type.removeprefix("file:"),
            "quarantined": s.rows_quarantined,
            "reason": s.reasons.most_common(1)[0][0] if s.reasons else "",
        }
        for s in bad
    }
    listed = "; ".join(
        f"{f} ({p['reason']}"
        + (f", {p['quarantined']} records" if p["quarantined"] > 1 else "")
        + ")"
        for f, p in list(problems.items())[:5]
    )
    more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
    return Finding(
        "streams",
        "files",
        not bad,
        False,
        {"files": problems},
        f"{len(problems)} files quarantined or damaged: {listed}{more}"
        if bad
        else "every recording file was read whole",
    )


def mapping_findings(streams: list) -> list[Finding]:
    """`has_rows` (blocking): a drive whose recordings gave no row anywhere is not a drive in
    the lake; `mapped` (warning): streams that only reached a generic table. Both messages
    name the unmapped streams and the command that writes a mapping for their file."""
    unmapped = [s for s in streams if s.info.target in ("generic", "payload")]
    files = sorted({s.info.source_file for s in unmapped})
    mappable = sorted({s.info.source_file for s in unmapped if s.info.source_type != UNTYPED})
    how = (  # a stream without any type needs a catalog, not a mapping (`decoded`)
        "; map them with " + ", ".join(SUGGEST.format(file=f) for f in mappable[:3])
        if mappable
        else "; they have no stream type (see the decoded check)"
    )
    names = ", ".join(f"{s.info.stream} ({s.info.source_type})" for s in unmapped[:10])
    rows = sum(s.rows_written for s in streams if s.info.target != "quarantine")
    by_target: dict[str, int] = {}
    for s in streams:
        by_target[s.info.target] = by_target.get(s.info.target, 0) + s.rows_written
    has_rows = Finding(
        "streams",
        "has_rows",
        rows > 0,
        True,
        {"rows": rows, "streams": len(streams), "rows_by_target": by_target},
        f"{rows} rows from {len(streams)} streams"
        if rows
        else f"no rows in any table from {len(streams)} streams"
        + (f"; unmapped: {names}{how}" if unmapped else " (every record quarantined or empty)"),
    )
    mapped = Finding(
        "streams",
        "mapped",
        not unmapped,
        False,
        {"unmapped": {s.info.stream: s.info.table for s in unmapped}, "files": files},
        f"{len(unmapped)} streams only in generic tables: {names}{how}"
        if unmapped
        else "every stream feeds a sensor table",
    )
    others = [s for s in streams if s.info.table not in SENSOR_TABLE_NAMES]
    broken = {
        s.info.stream: [s.records_read, s.rows_written, s.rows_quarantined]
        for s in others
        if not s.conserved
    }
    read = sum(s.records_read for s in others)
    conservation = Finding(
        "streams",
        "conservation",
        not broken,
        True,
        {"records_read": read, "violations": broken},
        f"{len(broken)} streams lost records (read, written, quarantined): {broken}"
        if broken
        else f"all {read} records of {len(others)} streams outside the sensor tables are "
        "rows or quarantined",
    )
    return [has_rows, decoded_finding(streams), conservation, mapped]


def decoded_finding(streams: list) -> Finding:
    """`decoded` (blocking): a drive whose rows are all payloads of streams without any
    stream type holds bytes nobody can query or export as sensor data. The message names
    the fix, which depends on why: a recording cut short and recovered without a catalog,
    or recordings that describe no types."""
    landed = [s for s in streams if s.info.target != "quarantine" and s.rows_written]
    untyped = [s for s in landed if s.info.target == "payload" and s.info.source_type == UNTYPED]
    failed = bool(landed) and len(untyped) == len(landed)
    cut = sorted({s.info.source_file for s in streams if s.info.source_type == RECOVERED_TYPE})
    rows = sum(s.rows_written for s in untyped)
    if not failed:
        summary = (
            f"{_count(len(landed) - len(untyped), 'stream')} with a stream type"
            if landed
            else "no rows (has_rows says why)"
        )
    else:
        why = (
            f"cut short and recovered without a catalog: {_listed(cut)}; {CATALOG_FIX}"
            if cut
            else TYPES_FIX
        )
        summary = (
            f"all {_count(rows, 'row')} of {_count(len(untyped), 'stream')} landed only as raw "
            f"payloads (adtf_payloads), without stream names or types: {why}"
        )
    return Finding(
        "streams",
        "decoded",
        not failed,
        True,
        {"untyped_streams": len(untyped), "untyped_rows": rows, "cut_short": cut},
        summary,
    )


def coverage_finding(streams: list) -> Finding:
    """Streams whose time span does not match the drive's (see COVERAGE_TOLERANCE)."""
    spans = {
        s.info.stream: (s.first_time_ns, s.last_time_ns)
        for s in streams
        if s.rows_written >= 2 and s.first_time_ns is not None
    }
    if len(spans) < 2:
        return Finding("streams", "time_coverage", True, False, {"streams": len(spans)})
    first = float(np.median([a for a, _ in spans.values()]))
    last = float(np.median([b for _, b in spans.values()]))
    tol = COVERAGE_TOLERANCE * max(last - first, 1.0)
    off = {
        name: {"start_s": round((a - first) / 1e9, 3), "end_s": round((b - first) / 1e9, 3)}
        for name, (a, b) in spans.items()
        if abs(a - first) > tol or abs(b - last) > tol
    }
    return Finding(
        "streams",
        "time_coverage",
        not off,
        False,
        {"drive_span_s": round((last - first) / 1e9, 3), "off_span": off},
        f"{len(off)} streams outside the drive's span: {', '.join(sorted(off))}"
        if off
        else f"all {len(spans)} streams span the same {(last - first) / 1e9:.1f} s",
    )


def quarantine_findings(streams: list) -> list[Finding]:
    heavy = {
        s.info.stream: {"quarantined": s.rows_quarantined, "read": s.records_read}
        for s in streams
        if s.records_read
        and s.rows_quarantined / s.records_read > QUARANTINE_LIMIT
        and not s.info.source_type.startswith("file:")  # whole files: the `files` check
    }
    total = sum(s.rows_quarantined for s in streams)
    return [
        Finding(
            "quarantine",
            "quarantine_share",
            not heavy,
            False,
            {"quarantined": total, "over_limit": heavy},
            f"{_count(len(heavy), 'stream')} with over {QUARANTINE_LIMIT:.0%} of records "
            "quarantined: "
            + _listed([f"{n} {v['quarantined']} of {v['read']}" for n, v in heavy.items()])
            if heavy
            else f"{_count(total, 'record')} quarantined, no stream over {QUARANTINE_LIMIT:.0%}",
        )
    ]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _listed(items: list[str], most: int = 5) -> str:
    """The first `most` items, then how many more: a summary stays one readable line."""
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more


SENSOR_TABLE_NAMES = tuple(t.name for t in SENSOR_TABLES)

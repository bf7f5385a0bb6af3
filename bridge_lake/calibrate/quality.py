"""Checks of the calibrated layer, as pure functions over a CalibrateResult.

Blocking (ERROR) checks guard what later layers rely on: a rig valid for the drive, an
extrinsic for every sensor (never a silent identity), proper rotations, every point kept and
finite. Sync, pose jumps and extrapolation are WARN: they describe the data (a GNSS outage
indoors, a camera gap) rather than a broken calibration, with figures to look at.
"""

from __future__ import annotations

import numpy as np

from bridge_lake.calibrate.drive import CalibrateResult
from bridge_lake.calibrate.transforms import POSE_LIMIT_NS
from bridge_lake.findings import Finding
from bridge_lake.geometry import is_rotation_matrix

UNIT_TOL = 1e-9
JUMP_FACTOR = 2.0
JUMP_MARGIN_MPS = 2.0
"""A pose step faster than 2 x the drive's p99 speed + 2 m/s is a jump (a glitch, a reset)."""
MAX_POINT_RANGE_M = 250.0
POINT_OUTLIER_SHARE = 1e-3

CHECKS: dict[str, dict[str, tuple[str, bool]]] = {
    "tf_static": {
        "rig_found": ("a rig calibration of the drive's vehicle is valid at its date", True),
        "extrinsics_complete": (
            "every sensor frame of the drive has an extrinsic in the rig",
            True,
        ),
        "rotations_valid": ("every static rotation is orthonormal with a unit quaternion", True),
    },
    "poses": {
        "poses_available": ("the drive has a trajectory (ground truth or GNSS + IMU)", False),
        "quaternions_unit": ("every pose quaternion has norm 1", True),
        "pose_jumps": ("no pose step faster than 2 x the p99 speed + 2 m/s", False),
    },
    "lidar_transforms": {
        "points_conserved": (
            "every lidar scan has its transform into base_link, so every normalized point "
            "has its base_link place (stored too when deskewed)",
            True,
        ),
        "points_plausible": (
            f"points finite and within {MAX_POINT_RANGE_M:g} m of base_link "
            f"(at most {POINT_OUTLIER_SHARE:.1%} beyond)",
            True,
        ),
    },
    "frames": {
        "frames_complete": ("one key frame per lidar scan", True),
        "sync": ("p99 time difference to every matched stream within its tolerance", False),
        "pose_interpolation": (
            f"no key frame more than {POSE_LIMIT_NS / 1e6:g} ms outside the pose track",
            False,
        ),
    },
}
"""table → check → (description, is ERROR and blocking)."""


NO_RIG = "no rig: exports carry no transforms"
"""The warning of a drive with sensors whose vehicle has no rig at the drive's date."""
RIG_INIT = "bridge-lake rig init --drive {drive}"
"""How a user gets a rig template listing the drive's sensor frames (named in the warning)."""


def findings(r: CalibrateResult) -> list[Finding]:
    if r.rig is None and r.rigless:
        return _rigless_findings(r)
    out = [*_rig_findings(r)]
    if r.rig is None:  # nothing else was computed: report the rest as not run (failed)
        why = f"not run: {r.rig_problem}"
        out += [
            Finding(table, check, False, error, {"reason": why}, why)
            for table, checks in CHECKS.items()
            if table != "tf_static"
            for check, (_, error) in checks.items()
        ]
        return out
    return [*out, *_pose_findings(r), *_point_findings(r), *_frame_findings(r)]


def _f(table: str, check: str, passed: bool, summary: str, **metadata) -> Finding:
    return Finding(table, check, passed, CHECKS[table][check][1], metadata, summary)


def _rigless_findings(r: CalibrateResult) -> list[Finding]:
    """No rig for the vehicle (none at all, or none valid yet at the drive's date).

    Without spatial sensor rows nothing needs one: every check passes with that note. With
    sensors the drive is still calibrated, without transforms: rig_found fails as a WARN
    (`NO_RIG`, with the reason and the command that writes a template), the transform and
    point checks pass saying the rows stay in their sensor frames, poses_available warns."""
    frames = ", ".join(f"{k} ({', '.join(v)})" for k, v in r.sensor_frames.items())
    if r.sensor_frames:
        note = "no rig: rows stay in their sensor frames"
        rig = Finding(
            "tf_static",
            "rig_found",
            False,
            False,  # a WARN: exports run in sensor frames
            {"problem": r.rig_problem, "sensor_frames": sorted(r.sensor_frames)},
            f"{NO_RIG} ({r.rig_problem}); sensor frames {frames}; write a rig with "
            + RIG_INIT.format(drive=r.drive),
        )
    else:
        note = "no spatial sensor rows: no rig needed"
        rig = _f("tf_static", "rig_found", True, f"{note} ({r.rig_problem})", problem=r.rig_problem)
    out = [
        rig,
        _f("tf_static", "extrinsics_complete", True, f"{note}: {frames or 'none'}"),
        _f("tf_static", "rotations_valid", True, f"{note}: no rotation to check"),
        _f(
            "poses",
            "poses_available",
            not r.sensor_frames,  # nothing to locate: passes; sensors without a rig: a WARN
            f"{note}: no poses in a map",
            problem=note,
        ),
        _f("poses", "quaternions_unit", True, "no poses to check"),
        _f("poses", "pose_jumps", True, "no poses to check", pose_jumps=0),
        _f(
            "lidar_transforms",
            "points_conserved",
            r.table_rows.get("lidar_transforms", 0) == 0,
            f"{note}: {r.points_in} points stay in normalized/lidar_points "
            "(calibrated/lidar_transforms is empty)",
            points_in=r.points_in,
            transforms=r.table_rows.get("lidar_transforms", 0),
        ),
        _f("lidar_transforms", "points_plausible", True, f"{note}: no point moved to check"),
    ]
    frames = [
        _f("frames", f.check, True, "no poses without a rig: key frames carry none")
        if f.check == "pose_interpolation"
        else f
        for f in _frame_findings(r)
    ]
    return [*out, *frames]


def _rig_findings(r: CalibrateResult) -> list[Finding]:
    if r.rig is None:
        why = r.rig_problem or "no rig"
        return [
            _f("tf_static", "rig_found", False, why, problem=why),
            _f("tf_static", "extrinsics_complete", False, f"not run: {why}"),
            _f("tf_static", "rotations_valid", False, f"not run: {why}"),
        ]
    rig = r.rig
    missing = r.missing_extrinsics
    bad = [
        f.name
        for f in rig.frames.values()
        if not is_rotation_matrix(f.transform.matrix)
        or abs(np.linalg.norm(f.transform.quaternion) - 1) > UNIT_TOL
    ]
    missing_text = "; ".join(f"{k} (rows in {', '.join(v)})" for k, v in missing.items())
    return [
        _f(
            "tf_static",
            "rig_found",
            True,
            f"rig {rig.vehicle} valid from {rig.valid_from} ({rig.path}) for the drive of "
            f"{r.drive_date} (from its {r.date_source})",
            rig_file=rig.path,
            valid_from=str(rig.valid_from),
            drive_date=str(r.drive_date),
            date_source=r.date_source,
        ),
        _f(
            "tf_static",
            "extrinsics_complete",
            not missing,
            f"no extrinsic in {rig.path} for sensor frame(s): {missing_text}"
            if missing
            else f"all {len(r.sensor_frames)} sensor frames have an extrinsic",
            missing=sorted(missing),
            sensor_frames=sorted(r.sensor_frames),
        ),
        _f(
            "tf_static",
            "rotations_valid",
            not bad,
            f"invalid rotations: {', '.join(bad)}" if bad else f"{len(rig.frames)} rotations ok",
            invalid=bad,
        ),
    ]


def pose_jumps(track) -> tuple[int, float, float]:
    """(steps above the jump limit, the limit [m/s], the fastest step [m/s])."""
    if track is None or len(track) < 3:
        return 0, 0.0, 0.0
    dt = np.diff(track.time_ns) / 1e9
    step = np.linalg.norm(np.diff(track.position, axis=0), axis=1) / dt
    limit = JUMP_FACTOR * float(np.percentile(step, 99)) + JUMP_MARGIN_MPS
    return int((step > limit).sum()), limit, float(step.max())


def _pose_findings(r: CalibrateResult) -> list[Finding]:
    t = r.track
    if t is None:
        why = r.pose_problem or "no poses"
        return [
            _f("poses", "poses_available", False, why, problem=why),
            _f("poses", "quaternions_unit", True, "no poses to check"),
            _f("poses", "pose_jumps", True, "no poses to check", pose_jumps=0),
        ]
    norm_err = float(np.abs(np.linalg.norm(t.rotation.as_quat(), axis=1) - 1).max(initial=0))
    jumps, limit, fastest = pose_jumps(t)
    span = (t.time_ns[-1] - t.time_ns[0]) / 1e9 if len(t) else 0.0
    return [
        _f(
            "poses",
            "poses_available",
            len(t) > 0,
            f"{len(t)} poses over {span:.1f} s from {t.source} ({t.dropped} source rows dropped)",
            poses=len(t),
            source=t.source,
            estimator=t.estimator,
            dropped=t.dropped,
        ),
        _f(
            "poses",
            "quaternions_unit",
            norm_err <= UNIT_TOL,
            f"largest | |q| - 1 | = {norm_err:.2e}",
            max_norm_error=norm_err,
        ),
        _f(
            "poses",
            "pose_jumps",
            jumps == 0,
            f"{jumps} pose jumps (steps faster than {limit:.1f} m/s; fastest {fastest:.1f} m/s)",
            pose_jumps=jumps,
            limit_mps=limit,
            fastest_step_mps=fastest,
        ),
    ]


def _point_findings(r: CalibrateResult) -> list[Finding]:
    p = r.points
    share = p.beyond_range / p.points if p.points else 0.0
    transforms = r.table_rows.get("lidar_transforms", r.scans_in)
    stored = r.table_rows.get("deskewed_points", p.points if r.deskew else 0)
    kept = (
        p.points == r.points_in
        and transforms == r.scans_in
        and stored == (r.points_in if r.deskew else 0)
    )
    how = f", {stored} stored deskewed" if r.deskew else ""
    return [
        _f(
            "lidar_transforms",
            "points_conserved",
            kept,
            f"{p.points} of {r.points_in} normalized points moved into base_link by the "
            f"transforms of {transforms} of {r.scans_in} scans{how}",
            points_in=r.points_in,
            points_out=p.points,
            transforms=transforms,
            scans=r.scans_in,
            stored_points=stored,
        ),
        _f(
            "lidar_transforms",
            "points_plausible",
            p.non_finite == 0 and share <= POINT_OUTLIER_SHARE,
            f"{p.non_finite} non-finite, {p.beyond_range} beyond {MAX_POINT_RANGE_M:g} m "
            f"(farthest {p.max_range_m:.1f} m); {p.deskewed_points} deskewed",
            non_finite=p.non_finite,
            beyond_range=p.beyond_range,
            max_range_m=p.max_range_m,
            deskewed_points=p.deskewed_points,
        ),
    ]


def _frame_findings(r: CalibrateResult) -> list[Finding]:
    f = r.frames
    assert f is not None
    rows = f.table.num_rows
    late = [p for p in f.pairs if p.p99_ms > p.tolerance_ms]
    pairs = [
        {
            "lidar": p.lidar,
            "sensor": p.sensor,
            "table": p.table,
            "p50_ms": round(p.p50_ms, 3),
            "p99_ms": round(p.p99_ms, 3),
            "max_ms": round(p.max_ms, 3),
            "tolerance_ms": round(p.tolerance_ms, 3),
            "frames_outside": p.outside,
        }
        for p in f.pairs
    ]
    return [
        _f(
            "frames",
            "frames_complete",
            rows == r.scans_in,
            f"{rows} key frames for {r.scans_in} lidar scans",
            frames=rows,
            scans=r.scans_in,
        ),
        _f(
            "frames",
            "sync",
            not late,
            "p99 beyond tolerance: "
            + ", ".join(
                f"{p.lidar}→{p.sensor} {p.p99_ms:.1f} > {p.tolerance_ms:.1f} ms" for p in late
            )
            if late
            else f"{len(f.pairs)} sensor pairs within tolerance at p99",
            pairs=pairs,
        ),
        _f(
            "frames",
            "pose_interpolation",
            f.extrapolated == 0,
            f"{f.extrapolated} frames beyond the pose track by more than "
            f"{POSE_LIMIT_NS / 1e6:g} ms (pose null), {f.held} held at an end within it",
            extrapolated=f.extrapolated,
            held=f.held,
        ),
    ]

"""waypoints: the drive as an Autoware 1.x waypoint CSV, from its calibrated poses.

Writes `<lake>/exports/drive=<id>/waypoints.csv` (waypoint_saver's format, velocity in km/h),
the plot `waypoints.svg` beside it and `<lake>/reports/drive=<id>/waypoints.html`; the
checklist of bridge_lake.waypoints.checklist becomes the asset's checks. A drive without a
route (it never moves, or less than one spacing) materializes with no CSV and every check a
warning that says why; a missing calibrated/poses partition fails the step.
"""

from collections.abc import Iterator

import dagster as dg

from bridge_lake.defs.calibrated import asset_name as calibrated_asset
from bridge_lake.defs.checks import check_result, check_specs, report_link
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LakeResource
from bridge_lake.defs.versions import code_version
from bridge_lake.lake import Lake
from bridge_lake.waypoints import (
    CHECKS,
    KMH_PER_MPS,
    WaypointError,
    WaypointParams,
    lake_no_route,
    lake_waypoints,
)

ASSET = "waypoints"
_DEFAULT = WaypointParams()


class WaypointsConfig(dg.Config):
    """Processing parameters (bridge_lake.waypoints.path.WaypointParams); metres, m/s."""

    spacing_m: float = _DEFAULT.spacing_m
    """arc length between waypoints [m]"""
    smooth_window_m: float = _DEFAULT.smooth_window_m
    """Savitzky-Golay window along the path [m]; 0: no smoothing"""
    stop_speed_mps: float = _DEFAULT.stop_speed_mps
    """at or below this the vehicle stands [m/s]"""
    min_stop_s: float = _DEFAULT.min_stop_s
    """a standstill inside the drive this long is a stop [s]"""
    lateral_accel_mps2: float = _DEFAULT.lateral_accel_mps2
    """curvature speed limit sqrt(a / |curvature|) [m/s²]"""
    accel_mps2: float = _DEFAULT.accel_mps2
    """forward acceleration limit [m/s²]"""
    decel_mps2: float = _DEFAULT.decel_mps2
    """deceleration limit before stops, curves and the end [m/s²]"""
    v_max_mps: float = _DEFAULT.v_max_mps
    """speed cap [m/s]"""
    stop_lead_m: float = _DEFAULT.stop_lead_m
    """change_flag 1 on the waypoints this far before a stop and the end [m]"""
    max_yaw_step_rad: float = _DEFAULT.max_yaw_step_rad
    """checklist: largest yaw change between neighbouring waypoints [rad]"""

    def params(self) -> WaypointParams:
        return WaypointParams(**{name: getattr(self, name) for name in _DEFAULT.to_dict()})


@dg.asset(
    name=ASSET,
    partitions_def=drives,
    code_version=code_version(__name__),
    group_name="exports",
    kinds={"csv"},
    deps=[calibrated_asset("poses")],
    description="The drive as an Autoware 1.x waypoint CSV (x,y,z,yaw,velocity,change_flag; "
    "yaw rad, velocity km/h) from calibrated/poses, under <lake>/exports/drive=<id>/, with a "
    "plot beside it and reports/drive=<id>/waypoints.html.",
    check_specs=check_specs(ASSET, CHECKS),
)
def waypoints(
    context: dg.AssetExecutionContext, config: WaypointsConfig, lake: LakeResource
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    drive = context.partition_key
    store = lake.get()
    try:
        params = config.params()
    except WaypointError as exc:  # bad run config: fail, not "no route"
        raise dg.Failure(str(exc)) from None
    try:
        made = lake_waypoints(store, drive, params)
    except WaypointError as exc:  # a drive that never moves is a drive, not a broken run
        yield from _no_route(context, store, drive, str(exc))
        return
    wp = made.waypoints
    context.log.info(
        f"drive {drive}: {len(wp)} waypoints over {wp.length_m:.1f} m, {len(wp.stops)} stop(s); "
        f"{made.csv}"
    )
    yield dg.MaterializeResult(
        metadata={
            "dagster/uri": made.csv,
            "dagster/row_count": len(wp),
            "path": dg.MetadataValue.path(made.csv),
            "plot": dg.MetadataValue.path(made.svg),
            "report": dg.MetadataValue.path(made.report or ""),
            "length_m": round(wp.length_m, 2),
            "spacing_m": round(wp.spacing_m, 4),
            "stops": len(wp.stops),
            "max_velocity_kmh": round(float(wp.velocity_mps.max()) * KMH_PER_MPS, 2),
            "source": wp.source,
            "processing": dg.MetadataValue.json({**wp.stats, **wp.params.to_dict()}),
        }
    )
    for finding in made.findings:
        yield check_result(ASSET, finding)


def _no_route(
    context: dg.AssetExecutionContext, store: Lake, drive: str, reason: str
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """No CSV (and none left from an earlier run); every checklist item a warning that
    says why, so the drive shows up as 'no route' instead of failing the run."""
    report = lake_no_route(store, drive, reason)
    context.log.warning(f"drive {drive}: no waypoints: {reason}")
    yield dg.MaterializeResult(
        metadata={
            "dagster/row_count": 0,
            "no_route": reason,
            "report": dg.MetadataValue.path(report),
            "report_link": report_link(report),
        }
    )
    for name in CHECKS:
        yield dg.AssetCheckResult(
            asset_key=ASSET,
            check_name=name,
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"not evaluated: no route ({reason})",
        )

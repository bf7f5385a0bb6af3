"""calibrated_*: the drive in base_link and the map frame, with its rig and key frames.

One multi-asset because one pass (rig, poses, points, frames) feeds every table; each table
is its own asset with its own checks in the UI. Write-audit-publish like the normalized
layer: when a blocking check fails the previous partitions stay and the step fails.
"""

from collections.abc import Iterator

import dagster as dg

from bridge_lake.calibrate.drive import CalibrateResult, calibrate_drive
from bridge_lake.calibrate.quality import CHECKS, findings
from bridge_lake.calibrate.report import render_calibrated_report
from bridge_lake.defs.checks import (
    check_specs,
    column_schema,
    report_link,
)
from bridge_lake.defs.inputs import drive_rig
from bridge_lake.defs.normalized import asset_name as normalized_asset
from bridge_lake.defs.resources import LakeResource
from bridge_lake.defs.steps import Publication, layer_asset, layer_step
from bridge_lake.lake.paths import report_path
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.lake.schemas.calibrated import CALIBRATED
from bridge_lake.progress import Progress

LAYER = "calibrated"
TABLE_OF_ASSET = {"map_origin": "poses", "deskewed_points": "lidar_transforms"}
"""Tables written beside another asset's table (map_origin is part of calibrated_poses, the
points of a deskewed drive part of its lidar transforms)."""
ASSET_TABLES = [name for name in CALIBRATED if name not in TABLE_OF_ASSET]


def asset_name(table: str) -> str:
    return layer_asset(LAYER, table)


class CalibrateConfig(dg.Config):
    """Run-time options of the calibrated layer (the Launchpad's config editor)."""

    deskew: bool | None = None
    """Motion-compensate lidar points; None: drive.yaml's `deskew` key (default off)."""


def _specs() -> list[dg.AssetCheckSpec]:
    return [
        spec for table, checks in CHECKS.items() for spec in check_specs(asset_name(table), checks)
    ]


def _metadata(store, result: CalibrateResult, table: str, report: str) -> dict:
    files = result.table_files[table]
    spec = CALIBRATED[table]
    meta = {
        "dagster/row_count": result.table_rows[table],
        "dagster/uri": store.url(files[0]),
        "dagster/column_schema": column_schema(spec),
        "path": dg.MetadataValue.path(store.url(files[0])),
        "report": dg.MetadataValue.path(report),
        "report_link": report_link(report),
    }
    if table == "poses" and result.track is not None:
        lat, lon, alt = result.track.origin
        meta |= {
            "source": result.track.source,
            "estimator": result.track.estimator,
            "map_origin": dg.MetadataValue.json({"lat_deg": lat, "lon_deg": lon, "alt_m": alt}),
        }
    if table == "tf_static" and result.rig is not None:
        meta |= {"rig": dg.MetadataValue.path(result.rig.path), "vehicle": result.rig.vehicle}
    return meta


@layer_step(
    LAYER,
    {name: CALIBRATED[name].description for name in ASSET_TABLES},
    deps=[*(normalized_asset(t) for t in NORMALIZED), drive_rig.key],
    check_specs=_specs(),
)
def calibrated(
    context: dg.AssetExecutionContext,
    config: CalibrateConfig,
    lake: LakeResource,
    *,
    publication: Publication,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """The step: stage, audit, publish (`defs.steps`)."""
    drive = context.partition_key
    store = lake.get()
    progress = Progress(f"calibrate {drive} lidar points", context.log.info, unit="points")

    def points(done: int, nbytes: int, total: int) -> None:
        progress.total = total
        progress.update(done, nbytes)

    result, published = calibrate_drive(
        store, drive, deskew=config.deskew, audit=publication.audit(findings), progress=points
    )
    progress.done()
    html = render_calibrated_report(result, publication.found)
    report = store.url(store.write_bytes(report_path(drive, "calibrated"), html.encode()))
    context.log.info(
        f"drive {drive}: rig {result.rig.path if result.rig else result.rig_problem}; "
        f"{result.table_rows}; report {report}"
    )
    if not published:
        context.log.error(
            f"drive {drive}: blocking checks failed; calibrated tables not published, the "
            f"previous partitions stay. Report: {report}"
        )
    for name in ASSET_TABLES if published else ():
        yield dg.MaterializeResult(
            asset_key=asset_name(name), metadata=_metadata(store, result, name, report)
        )
    yield from publication.check_results(asset_name)

"""calibrated_*: the drive in base_link and the map frame, with its rig and key frames.

One multi-asset because one pass (rig, poses, points, frames) feeds every table; each table
is its own asset with its own checks in the UI. Write-audit-publish like the normalized
layer: when a blocking check fails the previous partitions stay and the step fails.
"""

from collections.abc import Iterator
from contextlib import ExitStack

import dagster as dg

from bridge_lake.calibrate.drive import CalibrateResult, calibrate_drive
from bridge_lake.calibrate.quality import CHECKS, findings
from bridge_lake.calibrate.report import render_calibrated_report
from bridge_lake.defs.checks import (
    check_result,
    check_specs,
    column_schema,
    report_link,
)
from bridge_lake.defs.interrupts import publishing
from bridge_lake.defs.normalized import asset_name as normalized_asset
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LakeResource
from bridge_lake.findings import Finding
from bridge_lake.lake.paths import report_path
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.lake.schemas.calibrated import CALIBRATED
from bridge_lake.progress import Progress

PREFIX = "calibrated_"
TABLE_OF_ASSET = {"map_origin": "poses"}
"""Tables written beside another asset's table (map_origin is part of calibrated_poses)."""
ASSET_TABLES = [name for name in CALIBRATED if name not in TABLE_OF_ASSET]


def asset_name(table: str) -> str:
    return f"{PREFIX}{table}"


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


@dg.multi_asset(
    name="calibrated",
    partitions_def=drives,
    group_name="calibrated",
    can_subset=False,
    specs=[
        dg.AssetSpec(
            asset_name(name),
            deps=[normalized_asset(t) for t in NORMALIZED],
            description=CALIBRATED[name].description,
            kinds={"parquet"},
            group_name="calibrated",
            skippable=True,
            metadata={"table": f"calibrated/{name}"},
        )
        for name in ASSET_TABLES
    ],
    check_specs=_specs(),
    op_tags={"bridge_lake/heavy": "true"},
)
def calibrated(
    context: dg.AssetExecutionContext, config: CalibrateConfig, lake: LakeResource
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    with ExitStack() as span:  # closed however the step ends
        yield from _calibrate(context, config, lake, span)


def _calibrate(
    context: dg.AssetExecutionContext, config: CalibrateConfig, lake: LakeResource, span: ExitStack
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """The step: stage, audit, publish; from the publish to the last check result recorded
    it is one `publishing()` span, which `bridge-lake ingest` never interrupts."""
    drive = context.partition_key
    store = lake.get()
    found: list[Finding] = []

    def audit(staged: CalibrateResult) -> bool:
        found.extend(findings(staged))
        passed = all(f.passed for f in found if f.error)
        if passed:
            span.enter_context(publishing())
        return passed

    progress = Progress(f"calibrate {drive} lidar points", context.log.info, unit="points")

    def points(done: int, nbytes: int, total: int) -> None:
        progress.total = total
        progress.update(done, nbytes)

    result, published = calibrate_drive(
        store, drive, deskew=config.deskew, audit=audit, progress=points
    )
    progress.done()
    html = render_calibrated_report(result, found)
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
    for f in found:
        yield check_result(asset_name(f.table), f)

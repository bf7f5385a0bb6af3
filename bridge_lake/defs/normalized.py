"""normalized_*: every sensor table of a drive on the master clock, with quality checks.

One multi-asset because one pass over a drive's raw files feeds every table (an ADTF file
holds all sensors); each table is still its own asset with its own checks in the UI.
"""

import json
from collections.abc import Callable, Iterator
from functools import partial

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake.calibrate.drive import drive_date
from bridge_lake.calibrate.rig import RigError, RigNotFoundError, find_rig
from bridge_lake.defs.checks import (
    check_specs,
    column_schema,
    report_link,
)
from bridge_lake.defs.inputs import stream_mapping
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.defs.steps import Publication, layer_asset, layer_step
from bridge_lake.detect import RECORDING_FORMATS
from bridge_lake.drive_meta import CATALOG_FROM_KEY
from bridge_lake.errors import BridgeLakeError
from bridge_lake.geometry.rotations import Transform
from bridge_lake.lake import Lake
from bridge_lake.lake.paths import report_path
from bridge_lake.lake.schemas import NORMALIZED, QUARANTINE, RAW_DRIVES, RAW_MANIFEST, STREAMS
from bridge_lake.landing import LandingZone
from bridge_lake.normalize import quality
from bridge_lake.normalize.adtf import normalize_adtf
from bridge_lake.normalize.adtf_catalogs import CatalogPlaces
from bridge_lake.normalize.drive import NORMALIZERS, covered, normalize_drive
from bridge_lake.normalize.previews import camera_preview, lidar_preview
from bridge_lake.normalize.report import render_report
from bridge_lake.normalize.sink import NormalizeResult
from bridge_lake.progress import Progress

LAYER = "normalized"


def asset_name(table: str) -> str:
    return layer_asset(LAYER, table)


REPORT_FACTS = ("vehicle", "source", "recorded_at", "operator", "route", "weather", "notes", "tags")
"""drive.yaml facts the report shows."""


def drive_findings(result: NormalizeResult, recordings: list[str]) -> list[quality.Finding]:
    """Every check of the normalized layer for one drive, from the sink's figures."""
    # a file is accounted for when its records were read (written or quarantined: the
    # quarantine_share check flags files that only produced quarantine) or a stream names it
    # as skipped by choice (the completeness check lists those with why)
    source_files = {s.info.source_file for s in result.streams if s.records_read or s.info.skipped}
    lost = sorted(f for f in recordings if not covered(f, source_files))
    return [
        *(
            f
            for t in quality.SENSOR_TABLE_NAMES
            for f in quality.sensor_table_findings(t, result.streams)
        ),
        *quality.catalog_findings(result.streams, len(recordings), lost),
        *quality.quarantine_findings(result.streams),
    ]


def write_report(
    store: Lake, drive: str, result: NormalizeResult, findings: list, published: bool
) -> str:
    """Render the drive's HTML report and store it in the lake; returns its URL."""
    track = [t for s in result.streams for t in s.track]
    lat = np.concatenate([t[0] for t in track]) if track else np.empty(0)
    lon = np.concatenate([t[1] for t in track]) if track else np.empty(0)
    meta = store.read_partition("raw", RAW_DRIVES.name, drive).to_pylist()[0]
    files = store.read_partition(
        "raw", RAW_MANIFEST.name, drive, columns=["path", "size_bytes", "format", "problem"]
    ).to_pylist()
    cameras = lidar = None
    if published:  # read back a few rows of what was just published (previews.py)
        cameras = camera_preview(store, drive)
        lidar = lidar_preview(store, drive, _lidar_to_base(store, drive, meta))
    html = render_report(
        drive,
        result.streams,
        lat_deg=lat,
        lon_deg=lon,
        findings=findings,
        meta={k: meta.get(k) for k in REPORT_FACTS},
        files=files,
        quarantine_reasons=result.quarantine_reasons,  # staged or published: the same rows
        cameras=cameras,
        lidar=lidar,
        published=published,
    )
    return store.url(store.write_bytes(report_path(drive, "normalized"), html.encode()))


def _lidar_to_base(store: Lake, drive: str, meta: dict) -> Callable[[str], Transform | None] | None:
    """A sensor frame's pose in base_link from the drive's rig, so the report shows its lidar
    scan from above; None without a rig (the calibrated layer's rig_found check says why)."""
    streams = store.read_partition("normalized", STREAMS.name, drive, columns=["first_time_ns"])
    date, _ = drive_date(meta.get("recorded_at"), streams)
    if not meta.get("vehicle") or date is None:
        return None
    try:
        rig = find_rig(meta["vehicle"], date)
    except (RigError, RigNotFoundError):
        return None
    return lambda frame: rig.to_base(frame) if frame in rig.frames else None


def catalog_places(meta: pa.Table, drive: str, landing: LandingZone, lake: Lake) -> CatalogPlaces:
    """Where the drive's cut recordings look for a catalog: drive.yaml's `catalog_from`,
    other drives of its vehicle in the landing zone and recovered copies in the lake."""
    row = meta.to_pylist()[0]
    extra = json.loads(row.get("extra_json") or "{}")
    return CatalogPlaces(
        drive,
        vehicle=row.get("vehicle"),
        named=extra.get(CATALOG_FROM_KEY),
        recorded_at=row.get("recorded_at"),
        landing=landing,
        lake=lake,
    )


def streams_markdown(result: NormalizeResult) -> str:
    """The stream catalog as a Markdown table for the asset's page in the UI."""
    lines = [
        "| target | table | stream | read | written | joined | quarantined | rate Hz | gaps "
        "| drift ppm |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in result.streams:
        rate = f"{s.mean_rate_hz:.2f}" if s.mean_rate_hz else ""
        drift = f"{s.fit.drift_ppm:.2f}" if s.fit else ""
        gaps = s.order.gaps if s.order else ""
        lines.append(
            f"| {s.info.target} | {s.info.table} | {s.info.stream} | {s.records_read} | "
            f"{s.rows_written} | {s.records_joined} | {s.rows_quarantined} | {rate} | {gaps} | "
            f"{drift} |"
        )
    return "\n".join(lines)


def _check_specs() -> list[dg.AssetCheckSpec]:
    specs = [
        spec
        for table in quality.SENSOR_TABLE_NAMES
        for spec in check_specs(asset_name(table), quality.checks_of(table))
    ]
    specs += check_specs(asset_name(STREAMS.name), quality.CATALOG_CHECKS)
    return specs + check_specs(asset_name(QUARANTINE.name), quality.QUARANTINE_CHECKS)


@layer_step(
    LAYER,
    {name: spec.description for name, spec in NORMALIZED.items()},
    deps=[raw_manifest.key, stream_mapping.key],
    check_specs=_check_specs(),
)
def normalized(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    landing: LandingZoneResource,
    *,
    publication: Publication,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """The step: stage, audit, publish (`defs.steps`)."""
    drive = context.partition_key
    store = lake.get()
    store.sweep_staging()
    meta = store.read_partition("raw", RAW_DRIVES.name, drive)
    source = meta.column("source")[0].as_py()
    if source is None:
        raise BridgeLakeError(f"drive {drive}: drive.yaml has no valid source")
    manifest = store.read_partition("raw", RAW_MANIFEST.name, drive)
    is_recording = pc.and_(
        pc.is_in(manifest.column("format"), value_set=pa.array(RECORDING_FORMATS)),
        pc.is_null(manifest.column("problem")),
    )
    recordings = manifest.filter(is_recording).column("path").to_pylist()
    damaged = {
        r["path"]: (r["problem"], r["size_bytes"])
        for r in manifest.filter(
            pc.and_(pc.invert(manifest.column("readable")), pc.is_valid(manifest.column("sha256")))
        ).to_pylist()
    }  # read from the landing zone, but not valid as the recording it claims to be
    progress = Progress(f"normalize {drive}", context.log.info, unit="rows")
    # ADTF streams take the drive's mapping, then the resource's (or the environment's); a
    # recording cut short takes its stream names from a finished one of the same vehicle
    user_mapping = partial(
        normalize_adtf,
        user_mapping=landing.adtf_mapping,
        catalogs=catalog_places(meta, drive, landing.get(), store),
    )
    result, published = normalize_drive(
        landing.get(),
        store,
        drive,
        source,
        normalizers={**NORMALIZERS, "adtf": user_mapping},
        audit=publication.audit(lambda staged: drive_findings(staged, recordings)),
        progress=progress.update,
        damaged=damaged,
    )
    progress.done()
    context.log.info(
        f"drive {drive}: {len(result.streams)} streams, "
        f"{sum(result.table_rows.values())} rows, {result.quarantined} quarantined"
    )
    report = write_report(store, drive, result, publication.found, published)
    if not published:
        context.log.error(
            f"drive {drive}: blocking checks failed; tables not published, the previous "
            f"partitions stay. Report: {report}"
        )
    for name, spec in NORMALIZED.items() if published else ():
        files = result.table_files[name]
        streams = [s.info.stream for s in result.streams if s.info.table == name]
        yield dg.MaterializeResult(
            asset_key=asset_name(name),
            metadata={
                "dagster/row_count": result.table_rows[name],
                "dagster/uri": store.url(files[0]),
                "dagster/column_schema": column_schema(spec),
                "path": dg.MetadataValue.path(store.url(files[0])),
                "parts": len(files),
                "streams": dg.MetadataValue.json(streams),
                "report": dg.MetadataValue.path(report),
                "report_link": report_link(report),
                **(
                    {"summary": dg.MetadataValue.md(streams_markdown(result))}
                    if name == STREAMS.name
                    else {}
                ),
            },
        )
    yield from publication.check_results(asset_name)

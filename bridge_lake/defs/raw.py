"""raw_manifest: register, checksum and identify every file of a drive, plus drive.yaml."""

import posixpath
from collections import Counter
from collections.abc import Iterator

import dagster as dg

from bridge_lake.defs.checks import check_specs, checked, column_schema
from bridge_lake.defs.landing import landing_drive
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.defs.versions import code_version
from bridge_lake.drive_meta import DRIVE_YAML
from bridge_lake.lake.schemas import RAW_DRIVES, RAW_EXPORT_MAPPING, RAW_MANIFEST
from bridge_lake.manifest import build_manifest

ASSET = "raw_manifest"
CHECKS = {
    "drive_yaml_valid": ("drive.yaml exists and is valid", True),
    "has_recording": (
        "at least one intact ADTF or NCLT recording, or one cut short (its complete chunks "
        "are recovered)",
        True,
    ),
    "no_unreadable_file": (
        "every file could be read from the landing zone (I/O; damaged recordings are "
        "formats_valid's)",
        True,
    ),
    "formats_valid": (
        "every recording is intact: a damaged, truncated, cut short or empty one (or an "
        "unknown IFHD version) is named with its reason and quarantined as a file (one cut "
        "short is recovered); the rest of the drive lands",
        False,
    ),
}
"""name → (description, blocking) of the asset's checks."""


@dg.asset(
    name=ASSET,
    partitions_def=drives,
    group_name="raw",
    kinds={"parquet"},
    deps=[landing_drive],
    code_version=code_version(__name__),
    description=(
        "Every file of the drive with relative path, size, sha256 and detected format "
        "(raw/manifest), and the drive's drive.yaml collection metadata (raw/drives)."
    ),
    check_specs=check_specs(ASSET, CHECKS),
)
def raw_manifest(
    context: dg.AssetExecutionContext, lake: LakeResource, landing: LandingZoneResource
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    drive = context.partition_key
    manifest = build_manifest(landing.get(), drive)
    store = lake.get()
    files = manifest.files_table()
    manifest_parts = store.write_partition("raw", RAW_MANIFEST.name, drive, files)
    drives_parts = store.write_partition("raw", RAW_DRIVES.name, drive, manifest.drive_table())
    mapping = manifest.export_mapping_table()  # exports read the drive's mapping from here
    store.write_partition("raw", RAW_EXPORT_MAPPING.name, drive, mapping)
    formats = Counter(e.detected.format for e in manifest.entries)
    context.log.info(
        f"drive {drive}: {len(manifest.entries)} files, {manifest.total_bytes} bytes, "
        f"{len(manifest.recordings)} recordings"
    )
    meta = manifest.meta
    yield dg.MaterializeResult(
        metadata={
            "dagster/row_count": files.num_rows,
            "dagster/uri": store.url(manifest_parts[0]),
            "dagster/column_schema": column_schema(RAW_MANIFEST),
            "path": dg.MetadataValue.path(store.url(manifest_parts[0])),
            "drives_table": dg.MetadataValue.path(store.url(drives_parts[0])),
            "total_bytes": manifest.total_bytes,
            "recordings": len(manifest.recordings),
            "formats": dg.MetadataValue.json(dict(sorted(formats.items()))),
            "vehicle": meta.vehicle if meta else "",
            "source": meta.source if meta else "",
        }
    )
    yield checked(
        ASSET,
        CHECKS,
        "drive_yaml_valid",
        manifest.meta is not None,
        drive_yaml_reason(landing.root, drive, manifest.meta_problem),
        {"problem": manifest.meta_problem or ""},
    )
    damaged = manifest.damaged
    cut = manifest.recoverable
    yield checked(
        ASSET,
        CHECKS,
        "has_recording",
        bool(manifest.recordings or cut),
        f"{len(manifest.recordings)} intact recordings"
        + (f", {len(cut)} cut short (their complete chunks are recovered)" if cut else "")
        if manifest.recordings or cut
        else "no intact recording" + (f": {_listed(damaged)}" if damaged else ""),
        {
            "recordings": len(manifest.recordings),
            "cut_short": len(cut),
            "files": len(manifest.entries),
        },
    )
    unreadable = manifest.unreadable
    yield checked(
        ASSET,
        CHECKS,
        "no_unreadable_file",
        not unreadable,
        f"{len(unreadable)} files could not be read: "
        + "; ".join(f"{e.file.path}: {e.error}" for e in unreadable[:5])
        if unreadable
        else f"all {len(manifest.entries)} files read",
        {
            "unreadable": len(unreadable),
            "files": {e.file.path: e.error for e in unreadable[:20]},
        },
    )
    yield checked(
        ASSET,
        CHECKS,
        "formats_valid",
        not damaged,
        f"{len(damaged)} damaged files, quarantined as files: {_listed(damaged)}"
        if damaged
        else "every recording is intact",
        {
            "invalid": len(damaged),
            "files": {e.file.path: e.detected.problem for e in damaged[:20]},
        },
    )


def _listed(entries: list) -> str:
    """`path (reason)` of the first few files, for a check's one-line description."""
    more = f" and {len(entries) - 5} more" if len(entries) > 5 else ""
    return "; ".join(f"{e.file.path} ({e.detected.problem})" for e in entries[:5]) + more


def drive_yaml_reason(landing_root: str, drive: str, problem: str | None) -> str | None:
    """A drive.yaml problem with the file's path as the user named the landing zone, e.g.
    "landing/d1/drive.yaml: required field 'vehicle' is missing"."""
    if problem is None:
        return None
    path = posixpath.join(landing_root, drive, DRIVE_YAML)
    for prefix in (f"{drive}/{DRIVE_YAML}", DRIVE_YAML):  # the parser names the file itself
        if problem.startswith(prefix):
            return path + problem[len(prefix) :]
    return f"{path}: {problem}"

"""scene_sets: every scene of the drive's catalog as a trimmed MCAP with a manifest, plus
fault-injected variants, each file replay-checked before the set counts as done."""

import hashlib
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from bridge_lake.defs.checks import check_specs, checked, column_schema
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LakeResource
from bridge_lake.defs.steps import HEAVY
from bridge_lake.defs.versions import code_version
from bridge_lake.export.lake_exports import drive_mapping
from bridge_lake.lake.schemas.scene_sets import SCENE_SETS
from bridge_lake.scenes.faults import FaultError, VariantSpec, check_variant_name, load_yaml
from bridge_lake.scenes.faults import specs_from_text as parse_faults
from bridge_lake.scenes.replay import replay_check
from bridge_lake.scenes.sets import (
    DEFAULT_SEED,
    DEFAULT_VARIANT,
    SceneFile,
    SceneSet,
    scene_set_to_lake,
)

ASSET = "scene_sets"
UPSTREAM = ("scene_catalog",)
"""Scenes are cut from the lake through the exporter's windows, not from the whole-drive export."""
CHECKS = {
    "replay": (
        "every file passes replay-check: decodes, topics and counts as its manifest says, "
        "timing and content as the source with exactly the listed faults",
        True,
    )
}
"""name → (description, blocking) of the asset's checks."""


class FaultVariantConfig(dg.Config):
    """One fault-injected variant (faults in the compact form, e.g. `imu:delay=30ms`)."""

    name: str
    faults: list[str]
    scenes: list[str] = []
    """scene id globs, `tag:<tag>` or `first`; empty: every scene"""
    seed: int = DEFAULT_SEED


class SceneSetsConfig(dg.Config):
    """Which fault variants the scene set gets. Nothing given: the default variant (one
    fault of most kinds on the first scene, seed 14)."""

    variants: list[FaultVariantConfig] = []
    faults_file: str = ""
    """a fault YAML (bridge_lake.scenes.faults.parse_yaml), read from this path"""
    default_variant: bool = True
    """add the default variant when no variant is given"""
    replay_check: bool = True
    """replay-check every file (data, timing, content against the clean scene)"""
    replay_decode: bool = False
    """decode every message in that check too (pure-Python decoders, about as slow as making
    the scene); off by default: the exports' health check decodes the same messages, and the
    payloads are compared with the clean scene byte for byte"""


def _variants(config: SceneSetsConfig) -> list[VariantSpec]:
    try:
        out = [
            VariantSpec(
                check_variant_name(v.name), tuple(parse_faults(v.faults)), v.seed, tuple(v.scenes)
            )
            for v in config.variants
        ]
        if config.faults_file:
            out += load_yaml(config.faults_file)
    except FaultError as exc:
        raise dg.Failure(f"scene_sets config: {exc}") from None
    if not out and config.default_variant:
        out = [DEFAULT_VARIANT]
    return out


def _upstream_versions(context: dg.AssetExecutionContext, drive: str) -> dict[str, str | None]:
    """Dagster's data versions of the upstream partitions this set was made from."""
    out: dict[str, str | None] = {}
    for key in UPSTREAM:
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[drive]), limit=1
        ).records
        mat = records[0].asset_materialization if records else None
        out[key] = (mat.tags or {}).get("dagster/data_version") if mat else None
    return out


@dg.asset(
    name=ASSET,
    partitions_def=drives,
    code_version=code_version(__name__),
    group_name="scenes",
    kinds={"mcap", "parquet"},
    deps=list(UPSTREAM),
    description="Every scene of scenes/catalog as a trimmed MCAP (with /tf_static and the "
    "last /tf) plus fault-injected variants, each with a JSON manifest, under "
    "<lake>/exports/drive=<id>/scenes/; manifests in scenes/sets.",
    check_specs=check_specs(ASSET, CHECKS),
    op_tags=HEAVY,
    pool="exports",
)
def scene_sets(
    context: dg.AssetExecutionContext,
    config: SceneSetsConfig,
    lake: LakeResource,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    drive = context.partition_key
    store = lake.get()
    variants = _variants(config)
    # a fixed folder: the mapping's path is in the MCAP metadata, so re-runs stay identical
    folder = Path(tempfile.gettempdir()) / "bridge_lake_scene_mappings" / drive
    folder.mkdir(parents=True, exist_ok=True)
    mapping = drive_mapping(store, drive, folder)
    problems: list[str] = []
    replayed: list[str] = []

    def check(f: SceneFile) -> None:  # while the file is local (object stores: before upload)
        if config.replay_check:
            report = replay_check(f.path, decode=config.replay_decode)
            replayed.append(f.path.name)
            problems.extend(
                f"{f.path.name}: {c.level} {c.name}: {c.detail}" for c in report.checks if not c.ok
            )

    made: SceneSet = scene_set_to_lake(
        store, drive, variants=variants, mapping=mapping, progress=check
    )
    context.log.info(
        f"{made.folder}: {made.scenes} scenes, {made.variants} variants in {made.seconds:.1f} s"
    )
    if not made.files:
        context.log.warning(f"drive {drive}: the scene catalog has no scenes; the set is empty")
    rows = "\n".join(
        f"| {f.path.name} | {f.variant} | {f.messages} | {f.bytes / 1e6:.2f} | "
        f"{(f.manifest.get('faults') or {}).get('count', '')} | {f.seconds:.2f} |"
        for f in made.files
    )
    metadata = {
        "dagster/uri": made.folder,
        "dagster/row_count": len(made.files),
        "dagster/column_schema": column_schema(SCENE_SETS),
        "path": dg.MetadataValue.path(made.folder),
        "scenes": made.scenes,
        "variants": made.variants,
        "bytes": sum(f.bytes for f in made.files),
        "seconds": round(made.seconds, 2),
        "files": dg.MetadataValue.md(
            "| file | variant | messages | MB | faults | s |\n|---|---|---:|---:|---:|---:|\n"
            + rows
        ),
        "upstream_data_versions": dg.MetadataValue.json(_upstream_versions(context, drive)),
        "lake_snapshot": made.files[0].manifest["lake_snapshot"]["sha256"] if made.files else "",
    }
    version = hashlib.sha256("".join(f.manifest_sha256 for f in made.files).encode()).hexdigest()
    with warnings.catch_warnings():  # data_version on Output is a Dagster beta feature
        warnings.simplefilter("ignore", category=dg.BetaWarning)
        output = dg.Output(None, metadata=metadata, data_version=dg.DataVersion(version))
    yield output
    yield checked(
        ASSET,
        CHECKS,
        "replay",
        not problems,
        "; ".join(problems[:5])
        or (
            f"{len(replayed)} files pass replay-check"
            if replayed
            else "no scenes in the catalog"
            if not made.files
            else "not run (replay_check off)"
        ),
        {"problems": problems[:50], "files": len(replayed)},
    )

"""exports: the drive as MCAP (and on request ROS 1 / ROS 2 bags) in the lake, each file
re-opened by independent readers before it counts as done. On demand (defs/jobs.py): not in
lake_job; materialize it in the UI, run export_job, or use `bridge-lake export`."""

import tempfile
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from bridge_lake.defs.calibrated import ASSET_TABLES
from bridge_lake.defs.calibrated import asset_name as calibrated_asset
from bridge_lake.defs.checks import check_specs, checked
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LakeResource
from bridge_lake.defs.steps import HEAVY
from bridge_lake.defs.versions import code_version
from bridge_lake.export.context import DriveContext
from bridge_lake.export.exporter import ExportRequest
from bridge_lake.export.health import Kind
from bridge_lake.export.lake_exports import (
    NO_TRANSFORMS,
    drive_mapping,
    export_to_lake,
    has_transforms,
)
from bridge_lake.progress import Progress

ASSET = "exports"
FORMATS = ("mcap", "bag2", "bag1")


class ExportsConfig(dg.Config):
    """Which files the exports asset writes (default: one MCAP with ROS 2 messages)."""

    formats: list[str] = ["mcap"]
    """any of mcap, bag2, bag1"""
    mcap_encoding: str = "ros2"
    """ros2 or ros1 messages in the MCAP"""


CHECKS = {
    "health": (
        "every message decodes (rosbags / mcap readers), every mapped topic is there with "
        "as many messages as the lake has rows, log times never go backwards, header "
        "stamps equal the lake's times",
        True,
    ),
    "rates": ("each topic's rate within 30% of its stream's nominal rate", False),
    "transforms": (
        "the drive's rig gave /tf_static (and poses /tf); without a rig the exports run "
        "in sensor frames with this warning",
        False,
    ),
}
"""name → (description, blocking) of the asset's checks: health and rates read the typed
health problems (`export.health.Kind`), transforms the drive context."""


@dg.asset(
    name=ASSET,
    partitions_def=drives,
    code_version=code_version(__name__),
    group_name="exports",
    kinds={"mcap", "ros"},
    deps=[calibrated_asset(t) for t in ASSET_TABLES],
    description="ON DEMAND (not in lake_job): the whole drive as MCAP (ROS 2 messages; bags "
    "on request) through the topic mapping of its source, under <lake>/exports/drive=<id>/, "
    "checked by independent readers. Get one here with Materialize (pick the drive's "
    "partition), by a run of export_job, or with `bridge-lake export --drive ID --out FILE`.",
    check_specs=check_specs(ASSET, CHECKS),
    op_tags=HEAVY,
    pool="exports",
)
def exports(
    context: dg.AssetExecutionContext,
    config: ExportsConfig,
    lake: LakeResource,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    drive = context.partition_key
    store = lake.get()
    unknown = sorted(set(config.formats) - set(FORMATS))
    if unknown:
        raise dg.Failure(f"unknown export formats {unknown}; use {', '.join(FORMATS)}")
    with tempfile.TemporaryDirectory(prefix="bridge_lake_mapping_") as tmp:
        mapping = drive_mapping(store, drive, Path(tmp))
        if mapping is not None:
            context.log.info(f"drive {drive}: topic mapping from drive.yaml ({mapping.name})")
        made = []
        facts = DriveContext.load(store, drive)  # the drive's lake facts, read once
        for fmt in config.formats:
            progress = Progress(f"export {drive} {fmt}", context.log.info, unit="msgs")

            def report(done: int, nbytes: int, total: int, progress: Progress = progress) -> None:
                progress.total = total
                progress.update(done, nbytes)

            request = ExportRequest(
                encoding=config.mcap_encoding if fmt == "mcap" else None, mapping=mapping
            )
            made.append(export_to_lake(store, drive, fmt, request, report, facts))
            progress.done()
    files = {}
    problems: list[str] = []
    rate_problems: list[str] = []
    for e in made:
        h = e.health
        context.log.info(
            f"{e.url}: {h.bytes / 1e6:.1f} MB, {h.messages} messages, {len(h.topics)} topics, "
            f"{e.result.seconds:.1f} s"
        )
        files[e.result.format] = {
            "path": e.url,
            "bytes": h.bytes,
            "messages": h.messages,
            "seconds": round(e.result.seconds, 2),
            "topics": {t: s.messages for t, s in h.topics.items()},
        }
        for t in h.topics.values():
            for p in t.problems:  # the rates check reports rates, the health check the rest
                line = f"{e.result.format} {t.topic}: {p.message}"
                (rate_problems if p.kind == Kind.RATE else problems).append(line)
        problems += [f"{e.result.format}: {p.message}" for p in h.problems]
    first = made[0]
    yield dg.Output(
        None,
        metadata={
            "dagster/uri": first.url,
            "path": dg.MetadataValue.path(first.url),
            "bytes": first.health.bytes,
            "messages": first.health.messages,
            "files": dg.MetadataValue.json(files),
            "topics": dg.MetadataValue.md(
                "| topic | type | messages | rate Hz |\n|---|---|---:|---:|\n"
                + "\n".join(
                    f"| {t.topic} | {t.type} | {t.messages} | {(t.mean_rate_hz or 0):.2f} |"
                    for t in sorted(first.health.topics.values(), key=lambda t: t.topic)
                )
            ),
        },
    )
    yield checked(
        ASSET,
        CHECKS,
        "health",
        not problems,
        "; ".join(problems[:5])
        or f"{sum(e.health.messages for e in made)} messages in {len(made)} file(s) decode "
        "and match the lake",
        {"problems": problems[:50], "files": len(made)},
    )
    transforms = has_transforms(facts)
    if not transforms:
        context.log.warning(f"drive {drive}: {NO_TRANSFORMS}; messages stay in sensor frames")
    yield checked(
        ASSET,
        CHECKS,
        "transforms",
        transforms,
        "/tf_static from the drive's rig"
        if transforms
        else f"{NO_TRANSFORMS}: no /tf_static and no /tf, every message in its sensor frame",
    )
    yield checked(
        ASSET,
        CHECKS,
        "rates",
        not rate_problems,
        "; ".join(rate_problems[:5]) or "every topic at its nominal rate",
        {"problems": rate_problems[:50]},
    )

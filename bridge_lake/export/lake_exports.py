"""A drive's exports inside the lake: `<lake>/exports/drive=<id>/<id>.<ext>`, each checked.

Used by the `exports` asset: every requested format is written (locally into the lake's
staging area and then renamed over the previous export in one step, so a killed run leaves
nothing in the exports folder but the old or the new file; for an object-store lake into a
local temporary folder and then uploaded), and each file is re-opened by independent readers
(`export.health`) against what the lake says it should hold: the topic's source rows in
the export, and the nominal rates of the streams behind single-stream topics.
"""

from __future__ import annotations

import json
import posixpath
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bridge_lake.calibrate.quality import NO_RIG
from bridge_lake.drive_meta import EXPORT_MAPPING_KEY
from bridge_lake.export.context import DriveContext
from bridge_lake.export.exporter import ExportRequest, ExportResult, export_drive
from bridge_lake.export.health import FileHealth, Kind, Problem, check_file
from bridge_lake.export.mapping import MappingError
from bridge_lake.export.names import SUFFIX
from bridge_lake.lake import Lake
from bridge_lake.lake.paths import exports_dir
from bridge_lake.lake.schemas import ADTF_PAYLOADS, GENERIC_PREFIX, RAW_DRIVES, RAW_EXPORT_MAPPING
from bridge_lake.lake.storage import replace_local


def drive_mapping(lake: Lake, drive: str, folder: Path) -> Path | None:
    """The drive's own topic mapping (drive.yaml `export_mapping: FILE`), as the raw layer
    captured it (raw/export_mapping), written to `folder`; None when the drive names none.
    A mapping raw could not read is a MappingError with raw's reason."""
    if not lake.has_partition("raw", RAW_EXPORT_MAPPING.name, drive):
        meta = lake.read_partition("raw", RAW_DRIVES.name, drive).to_pylist()[0]
        named = json.loads(meta.get("extra_json") or "{}").get(EXPORT_MAPPING_KEY)
        if named is not None:
            raise MappingError(
                f"drive {drive}: drive.yaml names {EXPORT_MAPPING_KEY} {named!r}, which the raw "
                "layer has not captured (registered before it did): materialize raw_manifest "
                "again"
            )
        return None
    rows = lake.read_partition("raw", RAW_EXPORT_MAPPING.name, drive).to_pylist()
    if not rows:
        return None
    row = rows[0]
    if row["problem"] is not None:
        raise MappingError(row["problem"])
    path = folder / Path(row["file"]).name
    path.write_bytes(row["text"].encode("utf-8"))
    return path


@dataclass(frozen=True)
class LakeExport:
    result: ExportResult
    health: FileHealth
    url: str
    """where the export lives in the lake"""


NO_TRANSFORMS = NO_RIG
"""The exports' warning for a drive calibrated without a rig: the calibrated layer's words."""


def has_transforms(ctx: DriveContext) -> bool:
    """Whether the drive's rig gave it static transforms (calibrated/tf_static has rows):
    without them its exports have no /tf_static and /tf, every message in its sensor frame."""
    return ctx.tf_static is not None and ctx.tf_static.num_rows > 0


def expected_rates(ctx: DriveContext, result: ExportResult) -> dict[str, float]:
    """Nominal rate per topic where one stream with a nominal rate feeds it."""
    nominal = {
        (r["stream"], f"normalized/{r['table']}"): r["expected_rate_hz"] for r in ctx.streams
    }
    rates = {}
    for t in result.topics.values():
        if len(t.streams) == 1 and nominal.get((t.streams[0], t.table)):
            rates[t.topic] = float(nominal[(t.streams[0], t.table)])
    return rates


def export_to_lake(
    lake: Lake,
    drive: str,
    fmt: str,
    request: ExportRequest,
    progress: Callable[[int, int, int], None] | None = None,
    context: DriveContext | None = None,
) -> LakeExport:
    """Write one format of a drive into the lake's exports folder and check it (`context`:
    the drive's lake facts, shared by the formats of one run)."""
    ctx = context or DriveContext.load(lake, drive)
    name = f"{drive}{SUFFIX[fmt]}"
    folder = exports_dir(lake.base, drive)
    request = ExportRequest(**{**request.__dict__, "format": fmt, "force": True})
    if lake.is_local:  # staged on the lake's filesystem, then renamed into place whole
        staging = Path(lake.new_staging_dir())
        staging.mkdir(parents=True)
        try:
            result = export_drive(
                lake, drive, staging / name, request, progress=progress, context=ctx
            )
            health = _check(ctx, result)
            target = Path(folder) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            replace_local(str(result.path), str(target))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        result.path = target
        health.path = str(target)
        return LakeExport(result, health, str(target))
    with tempfile.TemporaryDirectory(prefix="bridge_lake_export_") as tmp:
        result = export_drive(
            lake, drive, Path(tmp) / name, request, progress=progress, context=ctx
        )
        health = _check(ctx, result)
        target = posixpath.join(folder, name)
        lake.fs.put(str(result.path), target, recursive=result.path.is_dir())
    return LakeExport(result, health, lake.url(target))


def unexported_streams(ctx: DriveContext, result: ExportResult) -> list[Problem]:
    """Streams of the generic tables (`ddl_*`, `adtf_payloads`) with rows that no topic of
    a whole-drive export carries: what a mapping without generic rules would drop."""
    carried = {(s, t.table.split("/")[1]) for t in result.topics.values() for s in t.streams}
    return [
        Problem(
            Kind.UNEXPORTED,
            f"stream {r['stream']} ({r['table']}, {r['rows_written']} rows) is in no topic",
        )
        for r in ctx.streams
        if r["rows_written"]
        and (r["table"].startswith(GENERIC_PREFIX) or r["table"] == ADTF_PAYLOADS.name)
        and (r["stream"], r["table"]) not in carried
    ]


def _check(ctx: DriveContext, result: ExportResult) -> FileHealth:
    """The file against the lake: every topic's count (left-out topics count as missing),
    nominal rates, and every generic stream in some topic."""
    health = check_file(
        result.path,
        expected_counts={
            **{t.topic: t.expected for t in result.topics.values()},
            **result.left_out_rows,
        },
        expected_rates=expected_rates(ctx, result),
    )
    health.problems += unexported_streams(ctx, result)
    return health

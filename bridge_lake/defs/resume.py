"""Which drives an ingest may skip: done before, with the same inputs and the same code.

Each ingest run carries two tags: the digest of its inputs (the drive folder's fingerprint,
the lake it writes, the BRIDGE_LAKE_* settings and the rig and mapping files they name) and
the digest of the code (every source file of the package, and the Dagster version). A drive
is skipped when the latest lake_job run of its partition has both tags equal to now, ended
in SUCCESS, and is the run of the latest materialization of every asset of the partition:
the instance's materialization records say nothing has replaced its output since. The outputs
those records point at (`dagster/uri`) must still exist: a lake wiped or moved away under the
same path re-runs its drives instead of reporting them done over an empty lake.
An interrupted ingest is resumed by running it again: its canceled drive and those it never
started are not done, so they run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import dagster as dg

from bridge_lake.calibrate.rig import rig_dirs

INPUTS_TAG = "bridge_lake/inputs"
CODE_TAG = "bridge_lake/code"
PARTITION_TAG = "dagster/partition"
PACKAGE = Path(__file__).resolve().parents[1]
CODE_SUFFIXES = frozenset({".py", ".yaml", ".yml", ".sql", ".proto"})
SETTINGS_PREFIX = "BRIDGE_LAKE_"


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _files(root: Path, suffixes: frozenset[str] | None = None) -> Iterable[str]:
    """path, size and content digest of every file under `root` (or `root` itself)."""
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for p in paths:
        if suffixes is None or p.suffix in suffixes:
            yield f"{p.relative_to(root) if p != root else p.name}:{_sha(p)}"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def code_digest() -> str:
    """The package's source files and the Dagster version: any change re-runs every drive."""
    return _digest([dg.__version__, *_files(PACKAGE, CODE_SUFFIXES)])


def settings_digest(lake: str) -> str:
    """What every drive's output depends on besides its folder: the lake, the BRIDGE_LAKE_*
    settings, and the content of the rig folders and the mapping file they name."""
    env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(SETTINGS_PREFIX))
    mapping = os.environ.get("BRIDGE_LAKE_ADTF_MAPPING")
    named = [*rig_dirs(), *([Path(mapping)] if mapping else [])]
    files = [f"{p}/{f}" for p in named if p.exists() for f in _files(p)]
    return _digest([lake, *env, *files])


def inputs_digest(fingerprint: str, settings: str) -> str:
    return _digest([fingerprint, settings])


def done_drives(
    instance: dg.DagsterInstance,
    job_name: str,
    asset_keys: Iterable[dg.AssetKey],
    tags: Mapping[str, Mapping[str, str]],
    exists: Callable[[str], bool],
) -> dict[str, str]:
    """drive → the run that did it, for the drives of `tags` (drive → the tags a run of it
    would carry now) that a run with the same tags finished, nothing replaced since, and whose
    outputs are still there (`exists(uri)` for every materialization that names one)."""
    keys = list(asset_keys)
    out = {}
    for drive, want in tags.items():
        runs = instance.get_runs(
            dg.RunsFilter(job_name=job_name, tags={PARTITION_TAG: drive}), limit=1
        )
        if not runs:
            continue
        run = runs[0]
        if run.status != dg.DagsterRunStatus.SUCCESS:
            continue
        if any(run.tags.get(k) != v for k, v in want.items()):
            continue
        latest = [_latest(instance, key, drive) for key in keys]
        if all(r is not None and r.run_id == run.run_id for r in latest) and all(
            exists(uri) for uri in map(_uri, latest) if uri
        ):
            out[drive] = run.run_id
    return out


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, drive: str) -> dg.EventLogRecord | None:
    result = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[drive]), limit=1
    )
    return result.records[0] if result.records else None


def _uri(record: dg.EventLogRecord | None) -> str | None:
    """Where a materialization says its output is (`dagster/uri`), if it says."""
    m = record.asset_materialization if record is not None else None
    value = m.metadata.get("dagster/uri") if m is not None else None
    return str(getattr(value, "value", value)) if value is not None else None

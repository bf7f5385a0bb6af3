"""A drive's inputs besides the code, as external assets whose observations carry data versions.

- `landing_drive` (defs/landing.py): the drive folder, data version = fingerprint of its
  listing; raw_manifest reads it.
- `drive_rig`: the rig calibration files of the drive's vehicle, data version = their digest
  ("no rig" when the vehicle has none); calibrated reads it.
- `stream_mapping`: the user's ADTF stream mapping (BRIDGE_LAKE_ADTF_MAPPING, the landing
  resource's `adtf_mapping`), data version = its digest ("shipped default" without one, "not
  used" for other sources); normalized reads it. A drive's own mappings (drive.yaml `mapping`,
  `export_mapping`) are files of its folder, so landing_drive covers them.

Every materialization records the data versions of its inputs as Dagster saw them; a newer
observation with another version makes the asset stale (Dagster's staleness,
defs/staleness.py), so a changed rig re-runs calibrated and what follows, never normalized.
`bridge-lake ingest` and the nightly schedule observe before they decide what to run; an
observation is recorded only when the version changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import dagster as dg
import yaml

from bridge_lake.calibrate.rig import rig_dirs
from bridge_lake.defs.landing import DATA_VERSION_TAG, landing_drive
from bridge_lake.defs.partitions import drives
from bridge_lake.drive_meta import DRIVE_YAML, MAX_DRIVE_YAML_BYTES, parse_drive_yaml
from bridge_lake.errors import BridgeLakeError
from bridge_lake.landing import LandingZone
from bridge_lake.yaml_input import safe_load

drive_rig = dg.AssetSpec(
    "drive_rig",
    partitions_def=drives,
    group_name="raw",
    kinds={"yaml"},
    description="The rig calibration files of the drive's vehicle (bridge_lake/calibrate/rigs, "
    "$BRIDGE_LAKE_RIGS); data version = their digest. Observed by `bridge-lake ingest` and the "
    "nightly schedule: a changed rig makes calibrated stale.",
)
stream_mapping = dg.AssetSpec(
    "stream_mapping",
    partitions_def=drives,
    group_name="raw",
    kinds={"yaml"},
    description="The user's ADTF stream mapping ($BRIDGE_LAKE_ADTF_MAPPING) a drive is "
    "normalized with; data version = its digest. Observed by `bridge-lake ingest` and the "
    "nightly schedule: a changed mapping makes normalized stale.",
)
INPUTS = (landing_drive, drive_rig, stream_mapping)
NO_RIG, DEFAULT_MAPPING, NOT_USED = "no rig", "shipped default", "not used"


def drive_facts(zone: LandingZone, drive_id: str) -> tuple[str | None, str | None]:
    """(vehicle, source) from the drive's drive.yaml; None for what cannot be read."""
    try:
        meta = parse_drive_yaml(zone.read_head(drive_id, DRIVE_YAML, MAX_DRIVE_YAML_BYTES + 1))
    except (BridgeLakeError, OSError):
        return None, None
    return meta.vehicle, meta.source


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rig_versions(folders: Iterable[Path] | None = None) -> dict[str | None, str]:
    """vehicle → digest of its rig files (name and bytes, in search order); the key None
    holds files whose vehicle cannot be read, which count for every vehicle."""
    files: dict[str | None, list[str]] = {}
    for folder in rig_dirs() if folders is None else folders:
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            data = path.read_bytes()
            try:
                doc = safe_load(data)
                vehicle = str(doc["vehicle"]) if isinstance(doc, dict) else None
            except (yaml.YAMLError, KeyError):
                vehicle = None
            files.setdefault(vehicle, []).append(f"{path}:{_sha(data)}")
    return {v: _sha("\n".join(f).encode()) for v, f in files.items()}


def rig_version(vehicle: str | None, versions: Mapping[str | None, str]) -> str:
    """The data version of drive_rig for a drive of `vehicle`."""
    parts = [versions.get(vehicle), versions.get(None)] if vehicle else [versions.get(None)]
    found = [p for p in parts if p]
    return _sha("\n".join(found).encode())[:32] if found else NO_RIG


def mapping_version(source: str | None, mapping: str | os.PathLike | None) -> str:
    """The data version of stream_mapping for a drive of `source`."""
    if source != "adtf":
        return NOT_USED
    if not mapping:
        return DEFAULT_MAPPING
    path = Path(mapping)
    return _sha(path.read_bytes())[:32] if path.is_file() else f"missing: {path}"


def observed_versions(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, str]:
    """drive id → the data version of its latest observation of `key`, in one query however
    many drives (the data version tag is indexed per partition)."""
    tags = instance.event_log_storage.get_latest_tags_by_partition(
        key, dg.DagsterEventType.ASSET_OBSERVATION, [DATA_VERSION_TAG]
    )
    return {drive: t[DATA_VERSION_TAG] for drive, t in tags.items() if DATA_VERSION_TAG in t}


def observation(key: dg.AssetKey, drive_id: str, version: str, **metadata) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=key, partition=drive_id, tags={DATA_VERSION_TAG: version}, metadata=metadata
    )


def changed_observations(
    instance: dg.DagsterInstance, current: Mapping[dg.AssetKey, Mapping[str, str]]
) -> list[dg.AssetObservation]:
    """An observation per (input, drive) whose version differs from the latest observed."""
    out = []
    for key, by_drive in current.items():
        seen = observed_versions(instance, key)
        out += [observation(key, d, v) for d, v in sorted(by_drive.items()) if seen.get(d) != v]
    return out


def observe(instance: dg.DagsterInstance, current: Mapping[dg.AssetKey, Mapping[str, str]]) -> int:
    """Record the changed observations in the instance (outside any run); how many."""
    changed = changed_observations(instance, current)
    for obs in changed:
        instance.report_runless_asset_event(obs)
    return len(changed)


def current_inputs(
    found: Mapping[str, tuple[str, str | None, str | None]], mapping: str | None
) -> dict[dg.AssetKey, dict[str, str]]:
    """The inputs' versions now, for drives given as id → (fingerprint, vehicle, source)."""
    rigs = rig_versions()
    return {
        landing_drive.key: {d: fp for d, (fp, _, _) in found.items()},
        drive_rig.key: {d: rig_version(v, rigs) for d, (_, v, _) in found.items()},
        stream_mapping.key: {d: mapping_version(s, mapping) for d, (_, _, s) in found.items()},
    }

"""`drive.yaml`: the collection metadata of one drive (who drove what, where, in which weather).

It is written by people, so it is parsed strictly enough to catch typos in the required
fields and loosely enough to keep whatever else they wrote (kept verbatim as `extra`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from bridge_lake.errors import DriveMetadataError
from bridge_lake.yaml_input import safe_load

DRIVE_YAML = "drive.yaml"
MAX_DRIVE_YAML_BYTES = 1 << 20
MAX_MAPPING_BYTES = 1 << 20
"""Largest mapping file read (ADTF stream mappings, export topic mappings)."""
EXPORT_MAPPING_KEY = "export_mapping"
"""drive.yaml key naming a topic mapping file inside the drive folder (per-drive override of
the export's default mapping), captured into the lake at raw (raw/export_mapping)."""
CATALOG_FROM_KEY = "catalog_from"
"""drive.yaml key naming a finished ADTF recording (`DRIVE/FILE`, from the landing zone's
root) whose stream names and types a recording of the drive that was cut short takes
(normalize/adtf_catalogs.py); without it one of the same vehicle is found."""
SOURCES = ("nclt", "adtf")
_OPTIONAL_TEXT = ("operator", "route", "weather", "notes", "recorded_at")


@dataclass(frozen=True)
class DriveMeta:
    vehicle: str
    source: str
    operator: str | None = None
    route: str | None = None
    weather: str | None = None
    notes: str | None = None
    recorded_at: str | None = None
    tags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_yaml(self) -> str:
        doc: dict[str, Any] = {"vehicle": self.vehicle, "source": self.source}
        for key in _OPTIONAL_TEXT:
            if getattr(self, key) is not None:
                doc[key] = getattr(self, key)
        if self.tags:
            doc["tags"] = list(self.tags)
        doc.update(self.extra)
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)

    def extra_json(self) -> str:
        return json.dumps(self.extra, sort_keys=True, default=str)


def parse_drive_yaml(text: bytes | str, *, where: str = DRIVE_YAML) -> DriveMeta:
    """Parse and validate a drive.yaml; every problem raises DriveMetadataError naming `where`."""
    if len(text) > MAX_DRIVE_YAML_BYTES:
        raise DriveMetadataError(f"{where}: larger than {MAX_DRIVE_YAML_BYTES} bytes")
    try:
        doc = safe_load(text, aliases=False)
    except yaml.YAMLError as exc:
        raise DriveMetadataError(f"{where}: not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise DriveMetadataError(f"{where}: expected a mapping, got {type(doc).__name__}")
    doc = {str(k): v for k, v in doc.items()}

    def text_field(key: str, *, required: bool) -> str | None:
        value = doc.pop(key, None)
        if value is None:
            if required:
                raise DriveMetadataError(f"{where}: required field {key!r} is missing")
            return None
        if isinstance(value, int | float) and key == "recorded_at":
            value = str(value)
        if hasattr(value, "isoformat"):  # YAML turns 2012-01-08 into a date
            value = value.isoformat()
        if not isinstance(value, str):
            raise DriveMetadataError(f"{where}: field {key!r} must be text, got {value!r}")
        return value

    vehicle = text_field("vehicle", required=True)
    source = text_field("source", required=True)
    if not vehicle or not vehicle.strip():
        raise DriveMetadataError(f"{where}: field 'vehicle' is empty")
    if source not in SOURCES:
        raise DriveMetadataError(
            f"{where}: field 'source' is {source!r}; expected one of {', '.join(SOURCES)}"
        )
    optional = {key: text_field(key, required=False) for key in _OPTIONAL_TEXT}
    tags = doc.pop("tags", None) or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise DriveMetadataError(f"{where}: field 'tags' must be a list of text, got {tags!r}")
    return DriveMeta(
        vehicle=vehicle,
        source=source,
        tags=tuple(tags),
        extra=doc,
        **optional,  # type: ignore[arg-type]
    )

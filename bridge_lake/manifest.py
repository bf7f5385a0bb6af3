"""The raw manifest of a drive: every file registered, checksummed and identified.

This is the raw layer's record of what landed, so it never fails on one bad file: a file
that cannot be read from the landing zone (`error`) or a recording that is damaged,
truncated, cut short or empty (`detected.problem`, in the reader's words) becomes a row with
`readable = false` and its reason, and the asset checks decide what that means for the
drive: an I/O error blocks it, a damaged recording is a warning and is quarantined as a
file by the normalized layer (a recording cut short is recovered there).
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from bridge_lake.detect import HEAD_BYTES, RECORDING_FORMATS, Detected, detect
from bridge_lake.drive_meta import (
    DRIVE_YAML,
    EXPORT_MAPPING_KEY,
    MAX_DRIVE_YAML_BYTES,
    MAX_MAPPING_BYTES,
    DriveMeta,
    parse_drive_yaml,
)
from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake.schemas import RAW_DRIVES, RAW_EXPORT_MAPPING, RAW_MANIFEST
from bridge_lake.landing import LandingFile, LandingZone

HASH_CHUNK = 8 << 20
HASH_THREADS = 2
"""hashlib releases the GIL on large buffers, so two threads use both cores of a small box."""


@dataclass(frozen=True)
class FileEntry:
    file: LandingFile
    sha256: str | None
    detected: Detected
    error: str | None
    """Why the file could not be read from the landing zone (I/O, a path leaving the drive)."""

    @property
    def readable(self) -> bool:
        return self.error is None and self.detected.problem is None

    @property
    def damaged(self) -> bool:
        """Read fine, but not valid as the format it claims (a damaged recording)."""
        return self.error is None and self.detected.problem is not None

    @property
    def is_recording(self) -> bool:
        return self.readable and self.detected.format in RECORDING_FORMATS

    @property
    def recoverable(self) -> bool:
        """A recording cut short: damaged, but its complete chunks land (normalized layer)."""
        return self.error is None and self.detected.cut


@dataclass(frozen=True)
class ExportMapping:
    """A drive's own topic mapping as read at raw: the file, its text or why it has none."""

    file: str
    text: str | None
    problem: str | None


@dataclass(frozen=True)
class DriveManifest:
    drive_id: str
    entries: list[FileEntry]
    meta: DriveMeta | None
    meta_problem: str | None
    export_mapping: ExportMapping | None = None
    """the topic mapping drive.yaml names (`export_mapping: FILE`), as read at raw"""

    @property
    def recordings(self) -> list[FileEntry]:
        return [e for e in self.entries if e.is_recording]

    @property
    def recoverable(self) -> list[FileEntry]:
        return [e for e in self.entries if e.recoverable]

    @property
    def unreadable(self) -> list[FileEntry]:
        """Files the landing zone could not give us (not damaged ones: see `damaged`)."""
        return [e for e in self.entries if e.error is not None]

    @property
    def damaged(self) -> list[FileEntry]:
        return [e for e in self.entries if e.damaged]

    @property
    def total_bytes(self) -> int:
        return sum(e.file.size for e in self.entries)

    def files_table(self) -> pa.Table:
        rows = {
            "path": [e.file.path for e in self.entries],
            "size_bytes": [e.file.size for e in self.entries],
            "sha256": [e.sha256 for e in self.entries],
            "format": [e.detected.format for e in self.entries],
            "format_version": [e.detected.version for e in self.entries],
            "kind": [e.detected.kind for e in self.entries],
            "readable": [e.readable for e in self.entries],
            "problem": [e.error or e.detected.problem for e in self.entries],
        }
        return pa.table(rows, schema=RAW_MANIFEST.schema)

    def drive_table(self) -> pa.Table:
        m = self.meta
        row = {
            "vehicle": [m.vehicle if m else None],
            "source": [m.source if m else None],
            "operator": [m.operator if m else None],
            "route": [m.route if m else None],
            "weather": [m.weather if m else None],
            "notes": [m.notes if m else None],
            "recorded_at": [m.recorded_at if m else None],
            "tags": [list(m.tags) if m else []],
            "extra_json": [m.extra_json() if m else None],
            "metadata_problem": [self.meta_problem],
            "file_count": [len(self.entries)],
            "total_bytes": [self.total_bytes],
            "recording_count": [len(self.recordings)],
        }
        return pa.table(row, schema=RAW_DRIVES.schema)

    def export_mapping_table(self) -> pa.Table:
        """raw/export_mapping: one row when drive.yaml names a mapping, else none."""
        m = self.export_mapping
        rows = [] if m is None else [{"file": m.file, "text": m.text, "problem": m.problem}]
        return pa.Table.from_pylist(rows, schema=RAW_EXPORT_MAPPING.schema)


def build_manifest(landing: LandingZone, drive_id: str) -> DriveManifest:
    files = landing.files(drive_id)
    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        entries = list(pool.map(lambda f: _inspect(landing, drive_id, f), files))
    meta, problem = _read_meta(landing, drive_id, entries)
    mapping = _read_export_mapping(landing, drive_id, meta) if meta else None
    return DriveManifest(drive_id, entries, meta, problem, mapping)


def _read_export_mapping(
    landing: LandingZone, drive_id: str, meta: DriveMeta
) -> ExportMapping | None:
    """The file drive.yaml's `export_mapping` names, read inside the drive folder (never
    outside it, never more than MAX_MAPPING_BYTES); what went wrong is kept as its problem,
    for the export to report."""
    rel = meta.extra.get(EXPORT_MAPPING_KEY)
    if rel is None:
        return None
    if not isinstance(rel, str):
        return ExportMapping(
            str(rel), None, f"drive {drive_id}: drive.yaml {EXPORT_MAPPING_KEY} must be a file name"
        )
    try:
        with landing.open(drive_id, rel) as f:
            data = f.read(MAX_MAPPING_BYTES + 1)
    except (BridgeLakeError, OSError) as exc:
        return ExportMapping(rel, None, f"drive {drive_id}: {EXPORT_MAPPING_KEY} {rel}: {exc}")
    if len(data) > MAX_MAPPING_BYTES:
        return ExportMapping(
            rel, None, f"drive {drive_id}: {rel} is larger than {MAX_MAPPING_BYTES} bytes"
        )
    try:
        return ExportMapping(rel, data.decode("utf-8"), None)
    except UnicodeDecodeError as exc:
        return ExportMapping(rel, None, f"drive {drive_id}: {rel} is not UTF-8 text: {exc}")


def _inspect(landing: LandingZone, drive_id: str, file: LandingFile) -> FileEntry:
    digest = hashlib.sha256()
    head = b""
    try:
        for block in landing.iter_chunks(drive_id, file.path, HASH_CHUNK):
            if len(head) < HEAD_BYTES:
                head += block[: HEAD_BYTES - len(head)]
            digest.update(block)
    except (OSError, BridgeLakeError) as exc:
        found = detect(file.path, head, None)
        return FileEntry(file, None, found, f"{type(exc).__name__}: {exc}")
    return FileEntry(file, digest.hexdigest(), detect(file.path, head, file.size), None)


def _read_meta(
    landing: LandingZone, drive_id: str, entries: list[FileEntry]
) -> tuple[DriveMeta | None, str | None]:
    entry = next((e for e in entries if e.file.path == DRIVE_YAML), None)
    if entry is None:
        return None, f"{DRIVE_YAML} is missing"
    if not entry.readable:
        return None, f"{DRIVE_YAML} is unreadable: {entry.error}"
    try:
        with landing.open(drive_id, DRIVE_YAML) as f:  # never more than the size limit + 1
            text = f.read(MAX_DRIVE_YAML_BYTES + 1)
        return parse_drive_yaml(text, where=f"{drive_id}/{DRIVE_YAML}"), None
    except BridgeLakeError as exc:
        return None, str(exc)

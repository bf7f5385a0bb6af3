"""Raw layer: what landed, file by file, and each drive's drive.yaml."""

from __future__ import annotations

import pyarrow as pa

from bridge_lake.lake.schemas.base import Column, TableSpec

RAW_MANIFEST = TableSpec(
    "raw",
    "manifest",
    "Every file of a drive as it landed: the registration and checksum of the raw layer.",
    (
        Column("path", pa.string(), "path relative to the drive folder (POSIX)", nullable=False),
        Column("size_bytes", pa.int64(), "file size in bytes", nullable=False),
        Column("sha256", pa.string(), "hex SHA-256 of the content; null if unreadable"),
        Column(
            "format",
            pa.string(),
            "adtf | adtf_description | nclt | drive_yaml | unknown",
            nullable=False,
        ),
        Column("format_version", pa.int32(), "IFHD version for ADTF files (e.g. 0x0201 = 513)"),
        Column("kind", pa.string(), "NCLT file kind (gps, velodyne_hits, ...) or ADTF generation"),
        Column("readable", pa.bool_(), "false if the file could not be read", nullable=False),
        Column("problem", pa.string(), "why the file is unreadable or not valid as its format"),
    ),
)

RAW_DRIVES = TableSpec(
    "raw",
    "drives",
    "One row per drive: the collection metadata log from drive.yaml plus file totals.",
    (
        Column("vehicle", pa.string(), "vehicle or rig name (required in drive.yaml)"),
        Column("source", pa.string(), "nclt | adtf"),
        Column("operator", pa.string(), "who drove or recorded"),
        Column("route", pa.string(), "route or area"),
        Column("weather", pa.string(), "weather and light conditions"),
        Column("notes", pa.string(), "free notes"),
        Column("recorded_at", pa.string(), "recording date or time as written (ISO 8601)"),
        Column("tags", pa.list_(pa.string()), "free tags"),
        Column("extra_json", pa.string(), "any other drive.yaml keys, as sorted JSON"),
        Column("metadata_problem", pa.string(), "why drive.yaml is missing or invalid; else null"),
        Column("file_count", pa.int64(), "files in the drive folder", nullable=False),
        Column("total_bytes", pa.int64(), "bytes in the drive folder", nullable=False),
        Column(
            "recording_count",
            pa.int64(),
            "files recognised as ADTF or NCLT recordings",
            nullable=False,
        ),
    ),
)

RAW_EXPORT_MAPPING = TableSpec(
    "raw",
    "export_mapping",
    "The drive's own topic mapping (drive.yaml `export_mapping: FILE`) as it landed, captured "
    "at raw so that exports read it from the lake: one row, none when drive.yaml names none.",
    (
        Column("file", pa.string(), "the file drive.yaml names", nullable=False),
        Column("text", pa.string(), "its content (UTF-8); null when it could not be read"),
        Column("problem", pa.string(), "why it could not be read; null when it was"),
    ),
)

"""Raw layer: what landed, file by file, and each drive's drive.yaml."""

from __future__ import annotations

from bridge_lake.lake.schemas.base import TableSpec, columns

RAW_MANIFEST = TableSpec(
    "raw",
    "manifest",
    "Every file of a drive as it landed: the registration and checksum of the raw layer.",
    columns(
        """
        path            string!  path relative to the drive folder (POSIX)
        size_bytes      int64!   file size in bytes
        sha256          string   hex SHA-256 of the content; null if unreadable
        format          string!  adtf | adtf_description | nclt | drive_yaml | unknown
        format_version  int32    IFHD version for ADTF files (e.g. 0x0201 = 513)
        kind            string   NCLT file kind (gps, velodyne_hits, ...) or ADTF generation
        readable        bool!    false if the file could not be read
        problem         string   why the file is unreadable or not valid as its format
        """
    ),
)

RAW_DRIVES = TableSpec(
    "raw",
    "drives",
    "One row per drive: the collection metadata log from drive.yaml plus file totals.",
    columns(
        """
        vehicle           string        vehicle or rig name (required in drive.yaml)
        source            string        nclt | adtf
        operator          string        who drove or recorded
        route             string        route or area
        weather           string        weather and light conditions
        notes             string        free notes
        recorded_at       string        recording date or time as written (ISO 8601)
        tags              list<string>  free tags
        extra_json        string        any other drive.yaml keys, as sorted JSON
        metadata_problem  string        why drive.yaml is missing or invalid; else null
        file_count        int64!        files in the drive folder
        total_bytes       int64!        bytes in the drive folder
        recording_count   int64!        files recognised as ADTF or NCLT recordings
        """
    ),
)

RAW_EXPORT_MAPPING = TableSpec(
    "raw",
    "export_mapping",
    "The drive's own topic mapping (drive.yaml `export_mapping: FILE`) as it landed, captured "
    "at raw so that exports read it from the lake: one row, none when drive.yaml names none.",
    columns(
        """
        file     string!  the file drive.yaml names
        text     string   its content (UTF-8); null when it could not be read
        problem  string   why it could not be read; null when it was
        """
    ),
)

"""Normalize one drive: pick the source's normalizer, run it into a sink, publish."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.nclt.archives import member_of
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.memory import release_large_frees
from bridge_lake.normalize.adtf import normalize_adtf
from bridge_lake.normalize.nclt import normalize_nclt
from bridge_lake.normalize.sink import SOURCE_SEPARATOR, DriveSink, NormalizeResult

Normalizer = Callable[[Path, DriveSink], None]
DamagedFile = tuple[str, int]
"""A damaged file's reason (the raw manifest's `problem`) and size in bytes."""
NORMALIZERS: dict[str, Normalizer] = {"nclt": normalize_nclt, "adtf": normalize_adtf}
"""drive.yaml `source` → the function that maps its files onto the normalized tables."""


def normalize_drive(
    landing: LandingZone,
    lake: Lake,
    drive_id: str,
    source: str,
    *,
    normalizers: Mapping[str, Normalizer] | None = None,
    audit: Callable[[NormalizeResult], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
    damaged: Mapping[str, DamagedFile] | None = None,
) -> tuple[NormalizeResult, bool]:
    """Normalize a drive into staging, let `audit` judge the figures, publish if it agrees.

    Returns the result and whether it was published; a rejected drive keeps its previous
    partitions, so readers never see tables that failed a blocking check. `progress` gets
    (rows written, bytes) as the sink writes. `damaged`: the files the raw manifest found
    damaged (path → its reason and size); each one the normalizer did not quarantine itself
    becomes one quarantine row with that reason, so no damaged file is passed over silently.
    """
    release_large_frees()
    normalizers = NORMALIZERS if normalizers is None else normalizers
    try:
        normalizer = normalizers[source]
    except KeyError:
        raise BridgeLakeError(
            f"drive {drive_id}: no normalizer for source {source!r} "
            f"(known: {', '.join(sorted(normalizers))})"
        ) from None
    with landing.local_drive(drive_id) as local, DriveSink(lake, drive_id, progress) as sink:
        normalizer(local, sink)
        quarantine_damaged(sink, damaged or {})
        result = sink.stage()
        if audit is not None and not audit(result):
            sink.abort()
            return result, False
        return sink.publish(result), True


def quarantine_damaged(sink: DriveSink, damaged: Mapping[str, DamagedFile]) -> None:
    """A quarantine row for every damaged file no stream of the sink read yet."""
    read = {s.info.source_file for s in sink.streams() if s.records_read}
    for path in sorted(damaged):
        if not covered(path, read):
            reason, size = damaged[path]
            sink.quarantine_file(path, "damaged", reason, size=size)


def covered(recording: str, source_files: set[str]) -> bool:
    """A recording file is covered by a stream whose source_file is the file itself, a
    folder prefix ending in `/` (NCLT scan and image folders hold thousands of files), or a
    member of it when it is an archive (`<archive>!/<member>`). A split recording's streams
    name all its parts (`a.dat, a_001.dat`)."""
    source_files = {f for s in source_files for f in s.split(SOURCE_SEPARATOR)}
    if recording in source_files:
        return True
    return any(
        (s.endswith("/") and recording.startswith(s)) or member_of(s, recording)
        for s in source_files
    )

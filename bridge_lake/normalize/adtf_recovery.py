"""Recordings cut short in a drive: recovered before they are normalized.

A recording whose writer crashed has its chunks but not its index and stream descriptions
(formats/adtf/recover.py). Normalizing it as it is lands its chunks under `stream<N>`
names the mappings cannot match. Instead, its complete chunks are rebuilt into a copy,
with stream names and types from a finished recording of the same drive (the catalog: same
recorder, same configuration, same stream ids) or, failing that, from the recording's own
ADTF 3 type chunks. The copy is stored in the lake's raw layer beside the tables
(`paths.recovered_dir`: `raw/_recovered/drive=<id>/<path in the drive>`), never over the
landing file, and normalized in its place under the landing file's name. What was lost (the
bytes after the last complete chunk) is the file's quarantine row (`DriveSink.quarantine_file`,
kind `recovered`) with the cut offset, which the `files` check (WARN) names, and a WARN in
the log names the file, the offset and the loss.

`recover_cut_recordings` is the one hook; `normalize_adtf` calls it on its file list.
"""

from __future__ import annotations

import logging
import posixpath
from pathlib import Path

from bridge_lake.formats.adtf.errors import AdtfError
from bridge_lake.formats.adtf.recover import AdtfRecovery, cut_short, recover_dat
from bridge_lake.lake import paths
from bridge_lake.normalize.sink import FILE_PREFIX, DriveSink

log = logging.getLogger(__name__)

RECOVERED = "recovered"
SOURCE_TYPE = FILE_PREFIX + RECOVERED
"""The quarantine row of a recovered recording (the `files` check names it)."""


def recover_cut_recordings(
    root: Path, recordings: list[Path], sink: DriveSink, workdir: Path
) -> dict[Path, Path]:
    """Recover every cut recording among `recordings` (inside drive folder `root`) into
    `workdir` and the lake; returns landing path -> recovered local copy."""
    cut = {p for p in recordings if _is_cut(p)}
    catalog = next((p for p in recordings if p not in cut), None)
    out: dict[Path, Path] = {}
    for path in sorted(cut):
        rel = path.relative_to(root).as_posix()
        copy = workdir / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            report = recover_dat(path, copy, catalog=catalog)
        except AdtfError as exc:  # left to the normalizer, which quarantines the file
            log.warning("%s: cut short and not recoverable: %s", rel, exc)
            continue
        target = posixpath.join(
            paths.recovered_dir(sink.lake.base, sink.drive_id), paths.safe_relative(rel)
        )
        sink.lake.put_file(target, copy)
        _record(
            sink, rel, report, target, catalog.relative_to(root).as_posix() if catalog else None
        )
        out[path] = copy
    return out


def _is_cut(path: Path) -> bool:
    try:
        return cut_short(path)
    except OSError:
        return False


def _record(
    sink: DriveSink, rel: str, report: AdtfRecovery, target: str, catalog: str | None
) -> None:
    """The WARN and the quarantine row of one recovered recording."""
    at = report.valid_end
    named = sorted({s.source for s in report.streams.values()})
    text = (
        f"recording cut short at offset {at} ({report.file_size} bytes): kept {report.chunks} "
        f"complete chunks, lost {report.lost_bytes} bytes after the last one; stream names "
        f"from {', '.join(named) or 'nothing'}"
        + (f" ({catalog})" if catalog and "catalog" in named else "")
        + f"; recovered copy {target}"
    )
    log.warning("%s: %s", rel, text)
    sink.quarantine_file(rel, RECOVERED, text, size=report.lost_bytes, offset=at)

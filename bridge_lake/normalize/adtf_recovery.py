"""Recordings cut short in a drive: recovered before they are normalized.

A recording whose writer crashed has its chunks but not its index and stream descriptions
(formats/adtf/recover.py). Normalizing it as it is lands its chunks under `stream<N>`
names the mappings cannot match. Instead, its complete chunks are rebuilt into a copy,
with stream names and types from a finished recording of the same vehicle (the catalog:
same recorder, same configuration, same stream ids; drive.yaml `catalog_from`, the drive's
own, another drive's in the landing zone or a recovered one in the lake:
normalize/adtf_catalogs.py) or, failing that, from the recording's own ADTF 3 type chunks.
The copy is stored in the lake's raw layer beside the tables (`paths.recovered_dir`:
`raw/_recovered/drive=<id>/<path in the drive>`), never over the landing file, and
normalized in its place under the landing file's name. What was lost (the bytes after the
last complete chunk) is the file's quarantine row (`DriveSink.quarantine_file`, kind
`recovered`) with the cut offset, which the `files` check (WARN) names, and a WARN in the
log names the file, the offset, the loss and where the stream names came from; streams left
without a name say how to give them one (quality.CATALOG_FIX).

`recover_cut_recordings` is the one hook; `normalize_adtf` calls it on its file list.
"""

from __future__ import annotations

import logging
import posixpath
from pathlib import Path

from bridge_lake.formats.adtf.errors import AdtfError
from bridge_lake.formats.adtf.ifhd import DDL_SIDECAR_SUFFIX
from bridge_lake.formats.adtf.recover import (
    CATALOG,
    NONE,
    TYPE_CHUNK,
    AdtfRecovery,
    cut_short,
    recover_dat,
)
from bridge_lake.lake import paths
from bridge_lake.normalize.adtf_catalogs import CatalogChooser, CatalogPlaces
from bridge_lake.normalize.quality import CATALOG_FIX, RECOVERED_TYPE
from bridge_lake.normalize.sink import DriveSink

log = logging.getLogger(__name__)

RECOVERED = RECOVERED_TYPE.removeprefix("file:")
SOURCE_TYPE = RECOVERED_TYPE
UNNAMED = (NONE, TYPE_CHUNK)
"""Where a stream's description came from when it kept no name (a type chunk has no name)."""
"""The quarantine row of a recovered recording (the `files` check names it)."""


def recover_cut_recordings(
    root: Path,
    recordings: list[Path],
    sink: DriveSink,
    workdir: Path,
    places: CatalogPlaces | None = None,
) -> dict[Path, Path]:
    """Recover every cut recording among `recordings` (inside drive folder `root`) into
    `workdir` and the lake; returns landing path -> recovered local copy. `places`: where
    catalogs are looked for beyond the drive (adtf_catalogs)."""
    cut = {p for p in recordings if _is_cut(p)}
    if not cut:
        return {}
    own = [(p.relative_to(root).as_posix(), p) for p in recordings if p not in cut]
    chooser = CatalogChooser(places, own, workdir)
    out: dict[Path, Path] = {}
    for path in sorted(cut):
        rel = path.relative_to(root).as_posix()
        copy = workdir / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        catalog = chooser.choose(path)
        try:
            report = recover_dat(path, copy, catalog=catalog.path if catalog else None)
        except AdtfError as exc:  # left to the normalizer, which quarantines the file
            log.warning("%s: cut short and not recoverable: %s", rel, exc)
            continue
        target = posixpath.join(
            paths.recovered_dir(sink.lake.base, sink.drive_id), paths.safe_relative(rel)
        )
        sink.lake.put_file(target, copy)
        side = Path(str(copy) + DDL_SIDECAR_SUFFIX)
        if side.is_file():  # ADTF 2 types: a later drive may take the copy as its catalog
            sink.lake.put_file(target + DDL_SIDECAR_SUFFIX, side)
        _record(sink, rel, report, target, catalog.label if catalog else None, chooser.problems)
        out[path] = copy
    return out


def _is_cut(path: Path) -> bool:
    try:
        return cut_short(path)
    except OSError:
        return False


def _record(
    sink: DriveSink,
    rel: str,
    report: AdtfRecovery,
    target: str,
    catalog: str | None,
    problems: list[str],
) -> None:
    """The WARN and the quarantine row of one recovered recording."""
    at = report.valid_end
    named = sorted({s.source for s in report.streams.values()})
    unnamed = sorted(s.stream_id for s in report.streams.values() if s.source in UNNAMED)
    untyped = any(s.source == NONE for s in report.streams.values())
    text = (
        f"recording cut short at offset {at} ({report.file_size} bytes): kept {report.chunks} "
        f"complete chunks, lost {report.lost_bytes} bytes after the last one; stream names "
        f"from {', '.join(named) or 'nothing'}"
        + (f" ({catalog})" if catalog and CATALOG in named else "")
        + (
            f"; stream ids {', '.join(map(str, unnamed))} kept as stream<N> (no name"
            + (", no type" if untyped else "")
            + "): "
            + ("" if catalog else "no finished recording of the vehicle was found; ")
            + CATALOG_FIX
            if unnamed
            else ""
        )
        + "".join(f"; {p}" for p in problems)
        + f"; recovered copy {target}"
    )
    log.warning("%s: %s", rel, text)
    sink.quarantine_file(rel, RECOVERED, text, size=report.lost_bytes, offset=at)

"""Find a session's files inside a landing-zone drive folder, whatever tarball layout it has.

People unpack the NCLT tarballs flat, under `<date>/`, or under `<kind>/<date>/` (spec §1),
so files are located by name (kinds.nclt_kind), never by one fixed path. Every kind may be
absent — absent kinds are listed in `missing`, which is not an error — but a present file
must be readable, and two files claiming the same single-file kind (say `gps.csv` both flat
and under `<date>/`) are ambiguous: both are errors (`NcltLayoutError`), because guessing
which copy is the session would silently pick data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.nclt.kinds import (
    ALL_KINDS,
    DATE_RE,
    IMAGE_KIND,
    SCAN_KIND,
    camera_of,
    nclt_kind,
)

MULTI_FILE_KINDS = frozenset({SCAN_KIND, IMAGE_KIND})


class NcltLayoutError(BridgeLakeError):
    """A drive folder whose NCLT files are ambiguous or unreadable."""


@dataclass
class NcltSession:
    root: Path
    date: str | None
    """Session date from `<date>/` folders or dated file names; None if nothing says."""
    files: dict[str, Path] = field(default_factory=dict)
    """Single-file kinds (gps, velodyne_hits, groundtruth, ...) -> path."""
    scans: list[Path] = field(default_factory=list)
    """velodyne_sync files, sorted by name (utime)."""
    images: dict[int, list[Path]] = field(default_factory=dict)
    """camera index -> lb3 TIFFs sorted by name (utime)."""
    missing: list[str] = field(default_factory=list)
    """Kinds with no file in the folder."""


def locate_session(drive_dir: str | os.PathLike) -> NcltSession:
    """Index every NCLT file under `drive_dir`; raise on duplicates and unreadable files."""
    drive_dir = Path(drive_dir)
    session = NcltSession(root=drive_dir, date=None)
    dates: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(drive_dir):
        dirnames.sort()
        here = Path(dirpath)
        rel_dir = here.relative_to(drive_dir)
        dates.update(part for part in rel_dir.parts if DATE_RE.match(part))
        for name in sorted(filenames):
            path = here / name
            rel = (rel_dir / name).as_posix()
            kind = nclt_kind(rel)
            if kind is None:
                continue
            if not os.access(path, os.R_OK):
                raise NcltLayoutError(f"{rel}: present but not readable")
            if kind == SCAN_KIND:
                session.scans.append(path)
            elif kind == IMAGE_KIND:
                session.images.setdefault(camera_of(rel), []).append(path)
            elif kind in session.files:
                raise NcltLayoutError(f"two files for {kind}: {session.files[kind]} and {path}")
            else:
                session.files[kind] = path
                if kind in ("groundtruth", "cov"):
                    dates.add(name.split("_", 1)[1].removesuffix(".csv"))
    if len(dates) > 1:
        raise NcltLayoutError(
            f"{drive_dir}: files of several sessions ({', '.join(sorted(dates))})"
        )
    session.date = next(iter(dates), None)
    session.scans.sort(key=lambda p: p.name)
    for paths in session.images.values():
        paths.sort(key=lambda p: p.name)
    present = (
        set(session.files)
        | ({SCAN_KIND} if session.scans else set())
        | ({IMAGE_KIND} if session.images else set())
    )
    session.missing = [k for k in ALL_KINDS if k not in present]
    return session

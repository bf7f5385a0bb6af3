"""NCLT sessions as the dataset ships them: `<date>_sen.tar.gz`, `<date>_vel.tar.gz`,
`<date>_hokuyo.tar.gz`, `<date>_lb3.tar.gz` beside `groundtruth_<date>.csv` and
`cov_<date>.csv`.

`unpacked(drive_dir)` gives a folder the session readers can walk: the drive itself when it
holds no archives; otherwise a temporary folder with the drive's loose files linked in and
each archive streamed out (`tarfile` in stream mode: memory stays bounded whatever the
archive's size; disk holds the session's files while the drive is normalized) under
`<archive>!/`, so a stream read from an archive member names its source as
`<archive>!/<member path>` and completeness can tie it back to the archive file.
Extraction keeps only NCLT files and refuses anything that would leave the folder (tarfile's
`data` filter: no absolute paths, no `..`, no links out, no devices).
"""

from __future__ import annotations

import os
import re
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bridge_lake.errors import FormatError
from bridge_lake.formats.nclt.kinds import nclt_kind

ARCHIVE_RE = re.compile(r"^(20\d\d-\d\d-\d\d)_(sen|vel|hokuyo|lb3)\.tar\.gz$")
MEMBER_SEP = "!/"
"""Between an archive's drive-relative path and a member's path in `source_file`s."""


def archive_kind(name: str) -> str | None:
    """`sen`, `vel`, `hokuyo` or `lb3` for an NCLT archive's file name, else None."""
    match = ARCHIVE_RE.match(name)
    return match.group(2) if match else None


def archives(drive_dir: str | os.PathLike) -> list[Path]:
    return sorted(
        p for p in Path(drive_dir).rglob("*") if p.is_file() and archive_kind(p.name) is not None
    )


def member_of(source_file: str, archive: str) -> bool:
    """Whether a stream's source_file names a member of `archive` (drive-relative)."""
    return source_file.startswith(archive + MEMBER_SEP)


@contextmanager
def unpacked(drive_dir: str | os.PathLike) -> Iterator[Path]:
    """The drive as a folder of plain files (see the module docstring)."""
    drive_dir = Path(drive_dir)
    packed = archives(drive_dir)
    if not packed:
        yield drive_dir
        return
    with tempfile.TemporaryDirectory(prefix="bridge-lake-nclt-") as tmp:
        root = Path(tmp)
        packed_set = set(packed)
        for path in sorted(drive_dir.rglob("*")):
            if path.is_file() and path not in packed_set:
                link = root / path.relative_to(drive_dir)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(path.resolve())
        for archive in packed:
            rel = archive.relative_to(drive_dir).as_posix()
            _extract(archive, root / f"{rel}!", rel)
        yield root


def _extract(archive: Path, target: Path, rel: str) -> None:
    target.mkdir(parents=True, exist_ok=True)

    def keep(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        member = tarfile.data_filter(member, dest)  # raises on anything leaving `dest`
        return member if member.isfile() and nclt_kind(member.name) is not None else None

    try:
        with tarfile.open(archive, mode="r|gz") as tar:
            for member in tar:
                tar.extract(member, target, filter=keep)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise FormatError(f"cannot unpack the NCLT archive: {exc}", path=rel) from exc

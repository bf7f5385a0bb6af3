"""The landing zone: drive folders as they arrive, on a local disk or under `s3://bucket/prefix`.

One folder per drive. Folder names become partition keys and lake paths, so only names that
pass `validate_drive_id` are drives; the others are reported, never used. Files are listed
relative to their drive folder and may not point outside it (a symlink out of the landing
zone is reported as unreadable rather than followed).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bridge_lake.errors import BridgeLakeError, DriveIdError
from bridge_lake.lake.paths import safe_relative, validate_drive_id
from bridge_lake.lake.storage import FsRoot


@dataclass(frozen=True)
class LandingFile:
    path: str
    """Relative to the drive folder, POSIX separators."""
    size: int
    mtime: float | None


@dataclass(frozen=True)
class LandingScan:
    drives: dict[str, str]
    """drive id → fingerprint of its file listing (paths, sizes, modification times)."""
    rejected: dict[str, str]
    """folder name → why it is not a drive."""


@dataclass(frozen=True)
class LandingZone(FsRoot):
    """Where drive folders arrive: a local path or `s3://bucket/prefix`."""

    def drive_dir(self, drive_id: str) -> str:
        return posixpath.join(self.base, validate_drive_id(drive_id))

    def scan(self) -> LandingScan:
        """All drive folders with a fingerprint each; one listing call per drive."""
        fs, base = self.fs, self.base
        drives: dict[str, str] = {}
        rejected: dict[str, str] = {}
        fs.invalidate_cache()  # fsspec instances are cached per process: see new uploads
        if not fs.exists(base):
            return LandingScan(drives, rejected)
        for entry in fs.ls(base, detail=True):
            name = posixpath.basename(entry["name"].rstrip("/"))
            if entry.get("type") != "directory":
                continue
            if name.startswith(("_", ".")):
                continue  # scratch folders of upload tools
            try:
                validate_drive_id(name)
            except DriveIdError as exc:
                rejected[name] = str(exc)
                continue
            files = self.files(name)
            if files:
                drives[name] = fingerprint(files)
        return LandingScan(drives, rejected)

    def files(self, drive_id: str) -> list[LandingFile]:
        """Every file of a drive, sorted by relative path."""
        fs = self.fs
        ddir = self.drive_dir(drive_id)
        if not fs.exists(ddir):
            raise BridgeLakeError(f"drive {drive_id!r} not found in landing zone {self.root}")
        out = []
        for path, info in fs.find(ddir, detail=True, withdirs=False).items():
            rel = safe_relative(posixpath.relpath(path, ddir))
            mtime = info.get("mtime") or info.get("LastModified")
            if hasattr(mtime, "timestamp"):
                mtime = mtime.timestamp()
            out.append(LandingFile(rel, int(info.get("size") or 0), mtime))
        return sorted(out, key=lambda f: f.path)

    def local_path(self, drive_id: str, rel: str) -> str | None:
        """The OS path of a file when the zone is local (readers memory-map it), else None."""
        if not self.is_local:
            return None
        return self._checked_local(drive_id, rel)

    @contextmanager
    def local_drive(self, drive_id: str) -> Iterator[Path]:
        """The drive folder on local disk: itself when local, else a downloaded temporary copy.

        Readers memory-map their files, which needs a local file; the copy costs disk, not
        memory, and is removed afterwards.
        """
        if self.is_local:
            ddir = self.drive_dir(drive_id)
            for f in self.files(drive_id):
                self._checked_local(drive_id, f.path)  # readers walk the folder themselves
            yield Path(ddir)
            return
        with tempfile.TemporaryDirectory(prefix=f"bridge-lake-{drive_id}-") as tmp:
            target = Path(tmp) / drive_id
            for f in self.files(drive_id):
                dest = target / f.path
                dest.parent.mkdir(parents=True, exist_ok=True)
                self.fs.get_file(posixpath.join(self.drive_dir(drive_id), f.path), str(dest))
            yield target

    def open(self, drive_id: str, rel: str) -> IO[bytes]:
        if self.is_local:
            return open(self._checked_local(drive_id, rel), "rb")
        return self.fs.open(posixpath.join(self.drive_dir(drive_id), safe_relative(rel)), "rb")

    def read_head(self, drive_id: str, rel: str, size: int) -> bytes:
        with self.open(drive_id, rel) as f:
            return f.read(size)

    def iter_chunks(self, drive_id: str, rel: str, chunk: int = 8 << 20) -> Iterator[bytes]:
        with self.open(drive_id, rel) as f:
            while block := f.read(chunk):
                yield block

    def _checked_local(self, drive_id: str, rel: str) -> str:
        ddir = self.drive_dir(drive_id)
        path = os.path.join(ddir, safe_relative(rel))
        real_zone = os.path.realpath(self.base)
        real_root = os.path.realpath(ddir)
        real = os.path.realpath(path)
        if os.path.commonpath([real_zone, real_root]) != real_zone or real_root == real_zone:
            raise BridgeLakeError(
                f"{ddir}: drive folder resolves to {real_root}, outside landing zone {self.base}"
            )
        if os.path.commonpath([real_root, real]) != real_root:
            raise BridgeLakeError(f"{path}: resolves to {real}, outside drive folder {ddir}")
        return real


def fingerprint(files: list[LandingFile]) -> str:
    """A short digest of a listing: changes when any file is added, removed, resized or touched."""
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.path}\0{f.size}\0{f.mtime}\n".encode())
    return h.hexdigest()[:16]

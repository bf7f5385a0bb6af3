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
from dataclasses import dataclass, field
from functools import partial
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
    totals: dict[str, tuple[int, int]] = field(default_factory=dict)
    """drive id → (files, bytes)."""


@dataclass(frozen=True)
class LandingZone(FsRoot):
    """Where drive folders arrive: a local path or `s3://bucket/prefix`."""

    def drive_dir(self, drive_id: str) -> str:
        return posixpath.join(self.base, validate_drive_id(drive_id))

    def scan(self) -> LandingScan:
        """All drive folders with a fingerprint each, from one recursive listing of the zone:
        on S3 one LIST request per 1,000 files, not one per drive (a listing per drive took
        64-125 s for 2,000 drives on moto's S3 server: benchmarks/bench_sensor.py)."""
        fs, base = self.fs, self.base
        fs.invalidate_cache()  # fsspec instances are cached per process: see new uploads
        find = _walk_local if self.is_local else partial(fs.find, detail=True, withdirs=True)
        listing = find(base)
        files: dict[str, list[LandingFile]] = {}
        rejected: dict[str, str] = {}
        prefix = base.rstrip("/") + "/"
        for path, info in listing.items():
            if not path.startswith(prefix):
                continue  # the zone's own folder
            name, _, rel = path[len(prefix) :].partition("/")
            is_dir = info.get("type") == "directory"
            if name.startswith(("_", ".")) or (not rel and not is_dir):
                continue  # scratch folders of upload tools; loose files beside the drives
            if name in rejected:
                continue
            if name not in files:
                try:
                    validate_drive_id(name)
                except DriveIdError as exc:
                    rejected[name] = str(exc)
                    continue
                files[name] = []
            if rel and not is_dir:
                files[name].append(_landing_file(rel, info))
        drives = {
            name: fingerprint(sorted(found, key=lambda f: f.path))
            for name, found in sorted(files.items())
            if found
        }
        totals = {name: (len(files[name]), sum(f.size for f in files[name])) for name in drives}
        return LandingScan(drives, rejected, totals)

    def files(self, drive_id: str) -> list[LandingFile]:
        """Every file of a drive, sorted by relative path."""
        fs = self.fs
        ddir = self.drive_dir(drive_id)
        if not fs.exists(ddir):
            raise BridgeLakeError(f"drive {drive_id!r} not found in landing zone {self.root}")
        out = [
            _landing_file(posixpath.relpath(path, ddir), info)
            for path, info in fs.find(ddir, detail=True, withdirs=False).items()
        ]
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


def _walk_local(root: str) -> dict[str, dict]:
    """What `fs.find(root, detail=True, withdirs=True)` gives for a local folder, from
    os.scandir: fsspec's per-entry `info` took 2.5 s of a 2.6 s scan of 10,000 drives. As in
    fsspec, links are not followed into folders; a link's size is its target's (0 if it
    dangles) and its time its own."""
    out: dict[str, dict] = {}
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for entry in entries:
                path = f"{folder}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    out[path] = {"type": "directory"}
                    stack.append(path)
                    continue
                st = entry.stat(follow_symlinks=False)
                size = st.st_size
                if entry.is_symlink():
                    try:
                        size = entry.stat(follow_symlinks=True).st_size
                    except OSError:
                        size = 0
                out[path] = {"type": "file", "size": size, "mtime": st.st_mtime}
    return out


def _landing_file(rel: str, info: dict) -> LandingFile:
    mtime = info.get("mtime") or info.get("LastModified")
    if hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    return LandingFile(safe_relative(rel), int(info.get("size") or 0), mtime)


def fingerprint(files: list[LandingFile]) -> str:
    """A short digest of a listing: changes when any file is added, removed, resized or touched."""
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.path}\0{f.size}\0{f.mtime}\n".encode())
    return h.hexdigest()[:16]

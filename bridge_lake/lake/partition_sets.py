"""Partitions on object stores: a set of parts published by one small manifest object.

An object store has no rename, so a partition of several parts cannot be swapped in the way a
local folder is. Instead every materialization writes its parts under a fresh prefix inside
the partition, and publishing is one PUT of the partition's manifest, which names that set:

```
<table>/drive=<id>/_manifest.json               the commit: {"set": ..., "parts": [...]}
<table>/drive=<id>/set-<time>-<hex>/part-00000.parquet
```

A single PUT is atomic and S3 reads after it are consistent, so a reader that reads the
manifest and then the parts it names sees the whole old set or the whole new one. Parts of a
set nobody has committed yet sit one folder deeper than `drive=*/*.parquet`, where no glob of
the table finds them. The set a publish replaces is kept for SUPERSEDED_GRACE_S, so a reader
that read the previous manifest can still finish; publishes of the partition after that
delete it (the manifest carries the superseded sets and when they were replaced). Sets no
manifest ever named (a killed run) are deleted once they are older than a day.

Partitions written before manifests existed (parts straight in `drive=<id>/`) are still read
and are replaced by the first publish.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import fsspec

from bridge_lake.errors import FormatError

MANIFEST = "_manifest.json"
"""The commit object of a partition; the underscore keeps it out of `*.parquet` globs."""
MANIFEST_FORMAT = "bridge_lake.partition/1"
SET_PREFIX = "set-"
SUPERSEDED_GRACE_S = 3600.0
"""How long a replaced set stays readable: longer than any query over one partition."""
ORPHAN_MAX_AGE_S = 24 * 3600.0
"""A set no manifest names is a killed run's (or a running writer's): deleted after this."""
MAX_MANIFEST_BYTES = 1 << 20


@dataclass(frozen=True)
class PartitionManifest:
    set: str
    parts: list[str]
    published_at: float
    superseded: dict[str, float] = field(default_factory=dict)
    """set name → when a publish replaced it (epoch seconds); deleted after the grace."""

    def to_json(self) -> bytes:
        body = {
            "format": MANIFEST_FORMAT,
            "set": self.set,
            "parts": self.parts,
            "published_at": self.published_at,
            "superseded": self.superseded,
        }
        return json.dumps(body, sort_keys=True, indent=1).encode()


def new_set_name() -> str:
    """`set-<UTC time>-<random>`: unique per publish, sortable by when it was written."""
    return f"{SET_PREFIX}{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(6)}"


def parse_manifest(data: bytes, path: str) -> PartitionManifest:
    """The manifest at `path`, checked: every name it holds becomes a path, so none may
    leave the partition."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise FormatError(f"manifest larger than {MAX_MANIFEST_BYTES} bytes", path=path)
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"manifest is not JSON: {e}", path=path) from e
    if not isinstance(body, dict) or body.get("format") != MANIFEST_FORMAT:
        raise FormatError(f"not a {MANIFEST_FORMAT} manifest", path=path)
    set_name, parts = body.get("set"), body.get("parts")
    superseded = body.get("superseded", {})
    if not _is_set_name(set_name):
        raise FormatError(f"manifest key 'set' is not a set name: {set_name!r}", path=path)
    if not isinstance(parts, list) or not all(_is_part_name(p) for p in parts):
        raise FormatError("manifest key 'parts' must list part-<n>.parquet names", path=path)
    if not isinstance(superseded, dict) or not all(
        _is_set_name(k) and isinstance(v, int | float) for k, v in superseded.items()
    ):
        raise FormatError("manifest key 'superseded' must map set names to times", path=path)
    published_at = body.get("published_at")
    if not isinstance(published_at, int | float):
        raise FormatError("manifest key 'published_at' must be a time", path=path)
    return PartitionManifest(set_name, parts, float(published_at), dict(superseded))


def read_manifest(fs: fsspec.AbstractFileSystem, pdir: str) -> PartitionManifest | None:
    path = posixpath.join(pdir, MANIFEST)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return None
    return parse_manifest(data, path)


def set_files(pdir: str, manifest: PartitionManifest) -> list[str]:
    return [posixpath.join(pdir, manifest.set, p) for p in manifest.parts]


def published_parts(fs: fsspec.AbstractFileSystem, pdir: str) -> list[str]:
    """The part files of one partition: the set its manifest names, else (written before
    manifests) the parts lying in the partition folder; empty when there is no partition."""
    manifest = read_manifest(fs, pdir)
    if manifest is not None:
        return set_files(pdir, manifest)
    fs.invalidate_cache(pdir)
    try:
        return _flat_parts(fs.ls(pdir, detail=False))
    except FileNotFoundError:
        return []


def table_partitions(fs: fsspec.AbstractFileSystem, tdir: str) -> dict[str, list[str]]:
    """drive id → published part files, for every partition of a table: one listing of the
    table and one batch of concurrent manifest reads, not a round trip per partition."""
    fs.invalidate_cache(tdir)
    try:
        listing = fs.find(tdir)
    except FileNotFoundError:
        return {}
    manifests: dict[str, str] = {}
    flat: dict[str, list[str]] = {}
    for path in listing:
        rel = posixpath.relpath(path, tdir).split("/")
        if len(rel) != 2 or not rel[0].startswith("drive="):
            continue
        drive = rel[0].removeprefix("drive=")
        if rel[1] == MANIFEST:
            manifests[drive] = path
        elif _is_part_name(rel[1]):
            flat.setdefault(drive, []).append(path)
    out = {d: sorted(files) for d, files in flat.items() if d not in manifests}
    if manifests:
        blobs = fs.cat(sorted(manifests.values()), on_error="return")
        for drive, path in manifests.items():
            data = blobs.get(path)
            if isinstance(data, FileNotFoundError):
                continue  # removed between the listing and the read
            if isinstance(data, BaseException):
                raise data
            out[drive] = set_files(posixpath.dirname(path), parse_manifest(data, path))
    return dict(sorted(out.items()))


def publish_set(
    fs: fsspec.AbstractFileSystem, pdir: str, set_name: str, parts: list[str]
) -> list[str]:
    """Make the uploaded set `set_name` the partition (one PUT of the manifest), then delete
    what no reader can still need. Returns the published part files."""
    now = time.time()
    old = read_manifest(fs, pdir)
    superseded = dict(old.superseded) if old else {}
    if old is not None and old.set != set_name:
        superseded[old.set] = now
    keep = {s: t for s, t in superseded.items() if now - t < SUPERSEDED_GRACE_S}
    manifest = PartitionManifest(set_name, list(parts), now, keep)
    fs.pipe_file(posixpath.join(pdir, MANIFEST), manifest.to_json())
    _delete_unneeded(fs, pdir, manifest, expired=set(superseded) - set(keep), now=now)
    return set_files(pdir, manifest)


def remove_partition(fs: fsspec.AbstractFileSystem, pdir: str) -> None:
    """Delete a partition: the manifest first (readers see no partition from then on), then
    its sets and any parts written before manifests."""
    fs.invalidate_cache(pdir)
    if not fs.exists(pdir):
        return
    with contextlib.suppress(FileNotFoundError):
        fs.rm_file(posixpath.join(pdir, MANIFEST))
    fs.rm(pdir, recursive=True)


def _delete_unneeded(
    fs: fsspec.AbstractFileSystem,
    pdir: str,
    manifest: PartitionManifest,
    *,
    expired: set[str],
    now: float,
) -> None:
    """After a publish: parts from before manifests, sets whose grace has passed, and sets
    no manifest named that are older than a day. Sets of a writer still uploading are young
    and stay."""
    fs.invalidate_cache(pdir)
    doomed: list[str] = []
    for path, info in fs.find(pdir, detail=True).items():
        rel = posixpath.relpath(path, pdir).split("/")
        if len(rel) == 1:
            if _is_part_name(rel[0]):
                doomed.append(path)
            continue
        name = rel[0]
        if name == manifest.set or name in manifest.superseded:
            continue
        if name in expired or _age(info, now) > ORPHAN_MAX_AGE_S:
            doomed.append(path)
    if doomed:
        fs.rm(doomed)


def _age(info: dict[str, Any], now: float) -> float:
    modified = info.get("LastModified") or info.get("mtime")
    if hasattr(modified, "timestamp"):
        modified = modified.timestamp()
    return now - float(modified) if modified is not None else 0.0


def _flat_parts(paths: Iterable[str]) -> list[str]:
    return sorted(p for p in paths if _is_part_name(posixpath.basename(p.rstrip("/"))))


def _is_part_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name.startswith("part-")
        and name.endswith(".parquet")
        and "/" not in name
    )


def _is_set_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name.startswith(SET_PREFIX)
        and "/" not in name
        and ".." not in name
        and len(name) <= 64
    )

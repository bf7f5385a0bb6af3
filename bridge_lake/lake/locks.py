"""One writer per drive: a lock per drive kept in the lake itself, under `<lake>/_locks/`.

Every partition is published atomically, but a drive's step writes several partitions (the
normalized layer swaps a dozen tables one after the other), so two runs of the same drive
writing at once could leave tables from both. The lock makes them take turns; runs of
different drives never touch the same lock.

The lock lives where the data lives, not in Dagster, because every writer must respect it:
runs of any Dagster instance or deployment, `bridge-lake ingest`, a developer's `dagster dev`
against the shared S3 lake. A Dagster pool or run-tag limit only orders the runs of one
instance (and cannot be keyed by partition on an asset).

- Local lake: `fcntl.flock` on `_locks/drive=<id>.lock`. The kernel drops the lock when the
  holder dies, SIGKILL included, so a crashed run never blocks the next one and there is no
  stale-lock guessing; the file names the holder (host, pid, owner) for whoever waits.
- S3 lake: the lock is an object created with a conditional PUT (`If-None-Match: *`), so
  exactly one writer creates it. It is a lease: the holder rewrites it every third of
  `ttl_s` (`If-Match` its own ETag); a lock whose lease ran out, or whose holder on this
  host is no longer alive, or whose owner the caller knows to have ended (`ended`: a Dagster
  run the instance records as finished, its worker on another host lost), is taken over at
  once with `If-Match` on the stale ETag, so of several takers exactly one wins. Needs an
  S3 API with conditional writes (AWS S3 since 2024, MinIO, moto).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import posixpath
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from fsspec.asyn import sync

from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import paths
from bridge_lake.lake.storage import Lake

LOCK_TTL_S = 60.0
"""Lease of an object-store lock: a holder that stops renewing it for this long is dead."""
POLL_S = 0.5
"""How often a waiting writer tries again."""
_MAX_HOLDER_BYTES = 4096
_RECORD_GRACE_S = 1.0
"""How long a busy lock with no record yet is re-read (its holder is writing the record)."""
ACQUIRED: Any = object()
"""try_acquire's answer when the lock is now ours (else: the holder, or None if unknown)."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a drive's lock, as recorded in the lock."""

    host: str
    pid: int
    owner: str
    """What asked for it: a Dagster run and step, a CLI command."""
    since: str
    """UTC time it was taken (ISO 8601)."""
    expires: float | None = None
    """End of the lease (epoch seconds); object stores only."""

    def __str__(self) -> str:
        who = f"{self.owner} " if self.owner else ""
        return f"{who}(pid {self.pid} on {self.host}, since {self.since})"

    @classmethod
    def me(cls, owner: str) -> LockHolder:
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        return cls(socket.gethostname(), os.getpid(), owner, now)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LockHolder | None:
        """None for an empty or unreadable record (a lock being taken or released)."""
        try:
            d = json.loads(data)
            return cls(
                str(d["host"]),
                int(d["pid"]),
                str(d["owner"]),
                str(d["since"]),
                None if d.get("expires") is None else float(d["expires"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


class DriveLockedError(BridgeLakeError):
    """Another writer holds the drive's lock (and waiting, if allowed, did not help), or took
    it over while this one held it (`lost`: its lease ran out, e.g. the process was paused)."""

    def __init__(
        self,
        drive_id: str,
        holder: LockHolder | None,
        lock: str,
        waited_s: float = 0.0,
        *,
        lost: bool = False,
    ) -> None:
        self.drive_id, self.holder, self.lock = drive_id, holder, lock
        who = str(holder) if holder else "another writer (not yet recorded)"
        if lost:
            message = f"drive {drive_id}: the lock was taken over by {who} while this run held it"
        else:
            waited = f"; gave up after waiting {waited_s:.0f} s" if waited_s else ""
            message = f"drive {drive_id} is being written by {who}{waited}"
        super().__init__(f"{message} (lock {lock})")


def lock_path(lake: Lake, drive_id: str) -> str:
    """`<lake>/_locks/drive=<id>.lock`: outside every table, like the staging area."""
    name = f"drive={paths.validate_drive_id(drive_id)}.lock"
    return posixpath.join(lake.base, paths.LOCKS_DIR, name)


@contextlib.contextmanager
def drive_lock(
    lake: Lake,
    drive_id: str,
    *,
    owner: str = "",
    wait_s: float = 0.0,
    on_wait: Callable[[LockHolder | None], None] | None = None,
    ttl_s: float = LOCK_TTL_S,
    ended: Callable[[LockHolder], bool] | None = None,
) -> Iterator[LockHolder]:
    """Hold the drive's lock for the `with` block; yields this writer's record.

    A busy lock is retried for up to `wait_s` seconds (`on_wait` is told once who holds it),
    then DriveLockedError names the drive and the holder. Not re-entrant: a second `with`
    on the same drive in the same process waits for the first like any other writer.
    `ended(holder)`: True when the holder's owner is known to be over, so its object-store
    lock is taken over without waiting for its lease (a local lock needs no such help).
    """
    me = LockHolder.me(owner)
    lock = (
        _FileLock(lock_path(lake, drive_id))
        if lake.is_local
        else _ObjectLock(lake, drive_id, ended or _never)
    )
    url = lake.url(lock.path)
    deadline = time.monotonic() + wait_s
    told = False
    start = time.monotonic()
    while True:
        holder = lock.try_acquire(me, ttl_s)
        if holder is ACQUIRED:
            break
        if time.monotonic() >= deadline:
            waited = time.monotonic() - start if wait_s > 0 else 0.0
            raise DriveLockedError(drive_id, holder, url, waited)
        if on_wait is not None and not told:
            on_wait(holder)
            told = True
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
    try:
        yield me
    finally:
        lost = lock.release()
    if lost is not None:
        raise DriveLockedError(drive_id, lost, url, lost=True)


class _FileLock:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self, me: LockHolder, ttl_s: float) -> Any:
        os.makedirs(posixpath.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return _holder_of(fd)
                raise
            finally:
                os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.to_json(), 0)
        self._fd = fd
        return ACQUIRED

    def release(self) -> LockHolder | None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)  # the file stays: deleting it would race with waiters
            finally:
                os.close(fd)  # closing the last descriptor drops the flock
        return None


def _holder_of(fd: int) -> LockHolder | None:
    """The record of a busy lock. The holder writes it just after its flock succeeds, so an
    empty record is re-read for a moment before the holder counts as unknown."""
    deadline = time.monotonic() + _RECORD_GRACE_S
    while True:
        holder = LockHolder.from_json(os.pread(fd, _MAX_HOLDER_BYTES, 0))
        if holder is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.01)


class _ObjectLock:
    """A leased lock object on S3 (conditional writes; see the module docstring)."""

    def __init__(self, lake: Lake, drive_id: str, ended: Callable[[LockHolder], bool]) -> None:
        if "s3" not in _protocols(lake.fs):
            raise BridgeLakeError(
                f"drive locks need a local lake or s3:// (conditional writes); {lake.root} is not"
            )
        self.path = lock_path(lake, drive_id)
        self._fs = lake.fs
        self._bucket, self._key, _ = lake.fs.split_path(self.path)
        self._etag: str | None = None
        self._me: LockHolder | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._lost: LockHolder | None = None
        self._ended = ended

    def try_acquire(self, me: LockHolder, ttl_s: float) -> Any:
        lease = LockHolder(me.host, me.pid, me.owner, me.since, time.time() + ttl_s)
        try:
            self._etag = self._put(lease, IfNoneMatch="*")
        except OSError as exc:
            if not _lost_race(exc):
                raise
            holder, etag = self._read()
            if holder is None or etag is None or not (_stale(holder) or self._ended(holder)):
                return holder
            try:  # take over the dead holder's lease; of several takers one wins
                self._etag = self._put(lease, IfMatch=etag)
            except OSError as exc2:
                if not _lost_race(exc2):
                    raise
                return self._read()[0]
        self._me = me
        self._stop.clear()
        self._renewer = threading.Thread(
            target=self._renew, args=(ttl_s,), name="drive-lock-lease", daemon=True
        )
        self._renewer.start()
        return ACQUIRED

    def release(self) -> LockHolder | None:
        """Stop renewing and delete the lock if it is still ours; returns who took it over
        while we held it (our lease lapsed), else None."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        if self._lost is None and self._etag is not None:
            try:
                self._fs.call_s3(
                    "delete_object", Bucket=self._bucket, Key=self._key, IfMatch=self._etag
                )
            except OSError as exc:
                if not _lost_race(exc):
                    raise
                self._lost = self._read()[0]
        self._etag = None
        return self._lost

    def _renew(self, ttl_s: float) -> None:
        assert self._me is not None
        while not self._stop.wait(ttl_s / 3):
            me = self._me
            lease = LockHolder(me.host, me.pid, me.owner, me.since, time.time() + ttl_s)
            try:
                self._etag = self._put(lease, IfMatch=self._etag)
            except OSError as exc:
                if _lost_race(exc):
                    self._lost = self._read()[0] or LockHolder("?", 0, "unknown", "?")
                    return
                # a transient error: try again at the next beat, the lease is not over yet

    def _put(self, holder: LockHolder, **condition: str | None) -> str:
        out = self._fs.call_s3(
            "put_object", Bucket=self._bucket, Key=self._key, Body=holder.to_json(), **condition
        )
        return out["ETag"]

    def _read(self) -> tuple[LockHolder | None, str | None]:
        """The lock's record and the ETag of that very version (one GET), or (None, None)."""
        try:
            return sync(self._fs.loop, self._get)
        except FileNotFoundError:
            return None, None

    async def _get(self) -> tuple[LockHolder | None, str | None]:
        out = await self._fs._call_s3("get_object", Bucket=self._bucket, Key=self._key)
        async with out["Body"] as body:
            data = await body.read(_MAX_HOLDER_BYTES)
        return LockHolder.from_json(data), out["ETag"]


def _protocols(fs: Any) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)


def _lost_race(exc: OSError) -> bool:
    """A conditional write refused: the lock exists, or is no longer the version we read."""
    response = getattr(exc.__cause__, "response", None) or {}
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


def _never(holder: LockHolder) -> bool:
    return False


def _stale(holder: LockHolder) -> bool:
    """A lease that ran out, or a holder on this host that no longer runs."""
    if holder.expires is not None and time.time() > holder.expires:
        return True
    if holder.host == socket.gethostname() and holder.pid > 0:
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False

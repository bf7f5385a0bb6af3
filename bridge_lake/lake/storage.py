"""The lake's storage: one class that owns every write, local or on an object store.

Partitions are written in a staging area outside the table and published in one step, so a
reader (DuckDB, polars, a downstream asset) sees either the previous partition or the new
one, never a half-written file. Locally publishing is a directory rename; on an object store
the parts are uploaded under a fresh set prefix inside the partition and published by one PUT
of the partition's manifest naming them (bridge_lake.lake.partition_sets).
"""

from __future__ import annotations

import ctypes
import errno
import os
import posixpath
import secrets
import shutil
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from types import TracebackType
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import partition_sets, paths
from bridge_lake.lake.encodings import parquet_encodings

DEFAULT_ROWS_PER_PART = 4_000_000
"""A part file of a few hundred MB at most: big enough for fast scans, small enough to
rewrite, and the unit in which a writer flushes to storage."""
DEFAULT_ROW_GROUP_ROWS = 262_144
"""Row groups of 256 Ki rows: time statistics per group let scans skip by time."""
ROW_GROUP_BYTES = 64 << 20
"""...or 64 MiB, whichever comes first: camera frames must not pile up 256 Ki images."""
BUFFERED_PART_BYTES = 128 << 20
"""A part encoded in the background is held whole in memory until written: at most this."""
STAGING_MAX_AGE_S = 24 * 3600
"""Staging folders older than this belong to dead runs and are swept."""


def is_local_url(root: str) -> bool:
    return "://" not in root or root.startswith("file://")


def resolve_root(
    root: str, storage_options: Mapping[str, Any]
) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem of a root URL and the root as that filesystem names it
    (no protocol, no trailing slash; absolute when local)."""
    fs, base = fsspec.core.url_to_fs(root, **dict(storage_options))
    if is_local_url(root):
        base = os.path.abspath(base)
    return fs, base.rstrip("/")


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE): a reader sees the old
    partition or the new one, never none. False where the system cannot do it."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


def replace_local(src: str, dst: str) -> None:
    """Put `src` (a file or a folder) at `dst` in one step, replacing what is there: a reader
    sees the old one or the new one, never neither and never half. A file is renamed over
    the old file; a folder is swapped with the old one (RENAME_EXCHANGE), which is then
    deleted. Only where the filesystem cannot swap is the old folder moved aside first."""
    if not os.path.isdir(dst):
        os.replace(src, dst)
        return
    if _exchange(src, dst):
        old = src  # the swap left the previous one here
    else:
        old = f"{src}.old"
        os.replace(dst, old)
        os.replace(src, dst)
    if os.path.isdir(old):
        shutil.rmtree(old)
    else:
        os.unlink(old)


def _fsync(path: str) -> None:
    """Flush a closed file to disk, so a published partition survives a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class FsRoot:
    """A folder on a local disk or behind an fsspec URL (`s3://bucket/prefix`), with the
    options its filesystem needs (endpoint, credentials)."""

    root: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def _fs_and_base(self) -> tuple[fsspec.AbstractFileSystem, str]:
        return resolve_root(self.root, self.storage_options)

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        return self._fs_and_base[0]

    @property
    def base(self) -> str:
        """The root as the filesystem names it (no protocol; absolute when local)."""
        return self._fs_and_base[1]

    @property
    def is_local(self) -> bool:
        return is_local_url(self.root)

    def url(self, path: str) -> str:
        """A path inside the root as a URL that DuckDB, polars and users can open."""
        return path if self.is_local else f"{self.root.split('://', 1)[0]}://{path}"


@dataclass(frozen=True)
class Lake(FsRoot):
    """A lake rooted at a local path or an fsspec URL such as `s3://bucket/lake`."""

    # --- layout -------------------------------------------------------------------------

    def table_dir(self, layer: str, table: str) -> str:
        return paths.table_dir(self.base, layer, table)

    def partition_dir(self, layer: str, table: str, drive_id: str) -> str:
        return paths.partition_dir(self.base, layer, table, drive_id)

    def partition_files(self, layer: str, table: str, drive_id: str) -> list[str]:
        """The published part files of one partition, in part order; empty if absent."""
        pdir = self.partition_dir(layer, table, drive_id)
        if not self.is_local:  # the set the partition's manifest names
            return partition_sets.published_parts(self.fs, pdir)
        self.fs.invalidate_cache(pdir)  # another process may have published since
        if not self.fs.exists(pdir):
            return []
        files = self.fs.find(pdir, maxdepth=1)
        return sorted(f for f in files if posixpath.basename(f).startswith("part-"))

    def has_partition(self, layer: str, table: str, drive_id: str) -> bool:
        return bool(self.partition_files(layer, table, drive_id))

    def table_files(self, layer: str, table: str) -> dict[str, list[str]]:
        """drive id → published part files, for every partition of a table (what DuckDB
        views and polars scans read on an object store, where a glob would also find sets
        not yet or no longer published)."""
        tdir = self.table_dir(layer, table)
        if not self.is_local:
            return partition_sets.table_partitions(self.fs, tdir)
        out: dict[str, list[str]] = {}
        for path in sorted(self.fs.glob(f"{tdir}/drive=*/part-*.parquet")):
            drive = posixpath.basename(posixpath.dirname(path)).removeprefix("drive=")
            out.setdefault(drive, []).append(path)
        return out

    def drives(self, layer: str, table: str) -> list[str]:
        """Drive ids that have a published partition of this table."""
        tdir = self.table_dir(layer, table)
        if not self.is_local:
            return list(self.table_files(layer, table))
        if not self.fs.exists(tdir):
            return []
        out = []
        for entry in self.fs.ls(tdir, detail=False):
            name = posixpath.basename(entry.rstrip("/"))
            if name.startswith("drive="):
                out.append(name.removeprefix("drive="))
        return sorted(out)

    def tables(self, layer: str) -> list[str]:
        """Names of the tables of a layer that exist in the lake (generic tables included)."""
        ldir = posixpath.join(self.base, layer)
        if layer not in paths.LAYERS:
            raise paths.LakePathError(f"unknown layer {layer!r}")
        self.fs.invalidate_cache(ldir)
        if not self.fs.exists(ldir):
            return []
        names = (posixpath.basename(e.rstrip("/")) for e in self.fs.ls(ldir, detail=False))
        return sorted(n for n in names if paths.is_valid_name(n))

    # --- writes -------------------------------------------------------------------------

    def remove_partition(self, layer: str, table: str, drive_id: str) -> None:
        """Delete one partition (a generic table the drive no longer has). Local lakes move
        it out of the table first, object stores delete its manifest first, so readers see
        the whole partition or none of it."""
        pdir = self.partition_dir(layer, table, drive_id)
        if not self.is_local:
            partition_sets.remove_partition(self.fs, pdir)
            return
        if not self.fs.exists(pdir):
            return
        trash = self.new_staging_dir()
        os.makedirs(posixpath.dirname(trash), exist_ok=True)
        os.replace(pdir, trash)
        self.fs.rm(trash, recursive=True)

    def partition_writer(
        self,
        layer: str,
        table: str,
        drive_id: str,
        schema: pa.Schema,
        *,
        rows_per_part: int = DEFAULT_ROWS_PER_PART,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        row_group_bytes: int = ROW_GROUP_BYTES,
        encode_threads: int = 1,
        page_rows: int | None = None,
    ) -> PartitionWriter:
        """A streaming writer: feed record batches, publish on `commit()` (or leaving `with`).
        `encode_threads` > 1 encodes parts in the background (see PartitionWriter)."""
        return PartitionWriter(
            self,
            self.partition_dir(layer, table, drive_id),
            schema,
            rows_per_part=rows_per_part,
            row_group_rows=row_group_rows,
            row_group_bytes=row_group_bytes,
            encode_threads=encode_threads,
            page_rows=page_rows,
        )

    def write_partition(
        self, layer: str, table: str, drive_id: str, data: pa.Table, **kwargs: int
    ) -> list[str]:
        """Replace one partition with `data` atomically; returns the published files."""
        with self.partition_writer(layer, table, drive_id, data.schema, **kwargs) as writer:
            writer.write(data)
        return writer.published

    def read_partition(
        self, layer: str, table: str, drive_id: str, columns: list[str] | None = None
    ) -> pa.Table:
        """The whole partition (only `columns`, if given: Parquet reads just those)."""
        files = self._existing_files(layer, table, drive_id)
        return pa.concat_tables(
            pq.read_table(f, filesystem=self.fs, columns=columns) for f in files
        )

    def iter_batches(
        self,
        layer: str,
        table: str,
        drive_id: str,
        *,
        columns: list[str] | None = None,
        batch_rows: int = 1 << 20,
    ) -> Iterator[pa.RecordBatch]:
        """Stream a partition in row order, about `batch_rows` rows at a time: memory stays
        bounded whatever the partition's size (lidar points of a long drive)."""
        for path in self._existing_files(layer, table, drive_id):
            if self.is_local:  # Arrow's own file I/O: no Python file object buffering reads
                yield from pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=columns)
                continue
            with self.fs.open(path, "rb") as f:
                yield from pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=columns)

    def _existing_files(self, layer: str, table: str, drive_id: str) -> list[str]:
        files = self.partition_files(layer, table, drive_id)
        if not files:
            raise BridgeLakeError(
                f"no partition drive={drive_id} in {layer}/{table} of {self.root}"
            )
        return files

    def write_bytes(self, relative_path: str, data: bytes) -> str:
        """Write a small file (report, manifest) atomically at `<root>/<relative_path>`."""
        target = posixpath.join(self.base, paths.safe_relative(relative_path))
        self.fs.makedirs(posixpath.dirname(target), exist_ok=True)
        if self.is_local:  # staged outside the tables: a killed run leaves nothing beside it
            tmp = self.new_staging_dir()
            os.makedirs(posixpath.dirname(tmp), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        else:
            self.fs.pipe_file(target, data)  # one PUT: atomic on object stores
        return target

    def put_file(self, target: str, local: str | os.PathLike[str]) -> str:
        """Copy a local file to `target` (a path under this lake's base, e.g. from
        `paths.recovered_dir`), streamed: atomically for a local lake, one upload on S3."""
        if self.is_local:
            tmp = self.new_staging_dir()
            os.makedirs(posixpath.dirname(tmp), exist_ok=True)
            shutil.copyfile(local, tmp)
            _fsync(tmp)
            os.makedirs(posixpath.dirname(target), exist_ok=True)
            os.replace(tmp, target)
        else:
            self.fs.put_file(os.fspath(local), target)
        return target

    def sweep_staging(self, max_age_s: float = STAGING_MAX_AGE_S) -> list[str]:
        """Delete scratch left by killed runs (local lakes; object stores expire it by a
        lifecycle rule on `_staging/`, as they have no folder times)."""
        root = posixpath.join(self.base, paths.STAGING_DIR)
        if not self.is_local or not os.path.isdir(root):
            return []
        cutoff = time.time() - max_age_s
        swept = []
        for entry in os.scandir(root):
            if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                self.fs.rm(entry.path, recursive=True)
                swept.append(entry.path)
        return swept

    def new_staging_dir(self) -> str:
        """A fresh path in the staging area (local lakes: on the lake's filesystem, so a
        rename publishes it; swept by `sweep_staging` if a killed run leaves it)."""
        return posixpath.join(self.base, paths.STAGING_DIR, secrets.token_hex(8))


class PartitionWriter:
    """Writes a partition part by part into staging, then publishes all parts at once.

    By default row groups are encoded as they come, on the caller's thread. With
    `encode_threads` > 1 whole parts are encoded on background threads instead: for lidar
    points Parquet encoding costs more than decoding the recording, and pyarrow releases the
    GIL while it encodes. A background part is held in memory until written, so at most
    `encode_threads` parts wait or encode while the next one fills (each part at most
    `rows_per_part` rows or about BUFFERED_PART_BYTES); an encoding error surfaces at the next
    write or at close.

    `page_rows` caps the rows of a data page (Arrow's default, None, is 20,000); pages still
    end at Arrow's 1 MB of encoded values. Columns that encode to a few bits a row (dictionary
    indices, deltas) then cost less: every page compresses with a fresh zstd context.
    """

    def __init__(
        self,
        lake: Lake,
        target_dir: str,
        schema: pa.Schema,
        *,
        rows_per_part: int,
        row_group_rows: int,
        row_group_bytes: int = ROW_GROUP_BYTES,
        encode_threads: int = 1,
        page_rows: int | None = None,
    ) -> None:
        if rows_per_part <= 0 or row_group_rows <= 0 or encode_threads <= 0:
            raise ValueError("rows_per_part, row_group_rows and encode_threads must be positive")
        if page_rows is not None and page_rows <= 0:
            raise ValueError("page_rows must be positive")
        self._lake = lake
        self._fs = lake.fs
        self._target = target_dir
        self._schema = schema
        self._rows_per_part = rows_per_part
        self._row_group_rows = row_group_rows
        self._row_group_bytes = row_group_bytes
        self._page_rows = page_rows
        if lake.is_local:
            self._staging = lake.new_staging_dir()
        else:  # the parts go straight to where they stay; the manifest publishes them
            self._staging = posixpath.join(target_dir, partition_sets.new_set_name())
        self._fs.makedirs(self._staging, exist_ok=True)
        self._parts: list[str] = []
        self._part_open = False
        self._file: Any = None
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_part = 0
        self._part_bytes = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._encode_threads = encode_threads
        self._pool = (
            ThreadPoolExecutor(encode_threads, thread_name_prefix="parquet-encode")
            if encode_threads > 1
            else None
        )
        self._part_tables: list[pa.Table] = []
        self._encoding: deque[Future[None]] = deque()
        self.rows_written = 0
        self.published: list[str] = []
        self._closed = False
        self._done = False

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def write(self, data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch]) -> None:
        """Append rows. Small batches are gathered into row groups of `row_group_rows` rows
        (or `row_group_bytes`); a new part starts every `rows_per_part` rows."""
        if self._closed:
            raise BridgeLakeError(f"writer for {self._target} is already closed")
        batches = (
            data.to_batches()
            if isinstance(data, pa.Table)
            else ([data] if isinstance(data, pa.RecordBatch) else data)
        )
        for batch in batches:
            if batch.schema != self._schema:
                batch = pa.RecordBatch.from_arrays(
                    [batch.column(n).cast(self._schema.field(n).type) for n in self._schema.names],
                    schema=self._schema,
                )
            if batch.num_rows == 0:
                continue
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
            self._pending_bytes += batch.nbytes
            if self._pending_bytes >= self._row_group_bytes:
                self._flush()
            elif self._pending_rows >= self._row_group_rows:
                self._flush(keep_remainder=True)

    def close(self) -> None:
        """Finish every staged part without publishing (see `publish`)."""
        if self._closed:
            return
        self._flush()
        if not self._parts:
            self._open_part()  # an empty partition still has a file: its schema is data too
        self._close_part()
        while self._encoding:
            self._encoding.popleft().result()
        self._shutdown_pool()
        self._closed = True

    def publish(self) -> list[str]:
        """Make the staged parts the partition, replacing what was there."""
        if self._done:
            return self.published
        try:
            self.close()
        except BaseException:
            self.abort()
            raise
        if self._lake.is_local:
            self._publish_local()
        else:
            self._publish_object_store()
        self._done = True
        return self.published

    def commit(self) -> list[str]:
        """close() and publish()."""
        return self.publish()

    def abort(self) -> None:
        """Drop everything staged; the published partition stays as it was."""
        if self._done:
            return
        self._done = self._closed = True
        self._pending.clear()
        self._part_tables.clear()
        for future in self._encoding:
            future.exception()  # let it finish: its file is deleted below
        self._encoding.clear()
        self._shutdown_pool()
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                if self._file is not None:
                    self._file.close()
        self._writer = None
        if self._fs.exists(self._staging):
            self._fs.rm(self._staging, recursive=True)

    # --- internals ----------------------------------------------------------------------

    def _flush(self, *, keep_remainder: bool = False) -> None:
        """Write the gathered batches as row groups, splitting at part boundaries; with
        `keep_remainder` the rows short of a full row group wait for the next batches."""
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self._schema)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        if keep_remainder:
            full = table.num_rows - table.num_rows % self._row_group_rows
            rest = table.slice(full).combine_chunks()
            self._pending = rest.to_batches()
            self._pending_rows, self._pending_bytes = rest.num_rows, rest.nbytes
            table = table.slice(0, full)
        offset = 0
        while offset < table.num_rows:
            if not self._part_open:
                self._open_part(table.slice(offset))
            take = min(table.num_rows - offset, self._rows_per_part - self._rows_in_part)
            rows = table.slice(offset, take)  # chunks and all: the writer needs no copy
            if self._writer is not None:
                self._writer.write_table(rows, row_group_size=self._row_group_rows)
            else:
                self._part_tables.append(rows)
                self._part_bytes += rows.nbytes
            offset += take
            self._rows_in_part += take
            self.rows_written += take
            if self._rows_in_part >= self._rows_per_part or (
                self._pool is not None and self._part_bytes >= BUFFERED_PART_BYTES
            ):
                self._close_part()

    def _open_part(self, first_rows: pa.Table | None = None) -> None:
        path = posixpath.join(self._staging, paths.part_name(len(self._parts)))
        self._parts.append(path)
        self._part_open = True
        self._rows_in_part = self._part_bytes = 0
        if self._pool is None:
            self._writer, self._file = self._open_file(path, first_rows)

    def _close_part(self) -> None:
        if not self._part_open:
            return
        self._part_open = False
        if self._pool is None:
            assert self._writer is not None
            writer, file, self._writer, self._file = self._writer, self._file, None, None
            self._finish_file(self._parts[-1], writer, file)
            return
        while len(self._encoding) >= self._encode_threads:
            self._encoding.popleft().result()
        tables, self._part_tables = self._part_tables, []
        self._encoding.append(self._pool.submit(self._encode_part, self._parts[-1], tables))

    def _encode_part(self, path: str, tables: list[pa.Table]) -> None:
        writer, file = self._open_file(path, tables[0] if tables else None)
        try:
            for table in tables:
                writer.write_table(table, row_group_size=self._row_group_rows)
        except BaseException:
            writer.close()
            if file is not None:
                file.close()
            raise
        self._finish_file(path, writer, file)

    def _open_file(self, path: str, first_rows: pa.Table | None) -> tuple[pq.ParquetWriter, Any]:
        """Locally Arrow writes the file itself (C++ I/O, no GIL held while writing, which
        a Python file object would need for every chunk); object stores go through fsspec.
        The part's first rows choose its column encodings (see lake.encodings)."""
        file = None if self._lake.is_local else self._fs.open(path, "wb")
        writer = pq.ParquetWriter(
            path if file is None else file,
            self._schema,
            compression="zstd",
            write_statistics=True,
            max_rows_per_page=self._page_rows,
            **parquet_encodings(self._schema, first_rows),
        )
        return writer, file

    def _finish_file(self, path: str, writer: pq.ParquetWriter, file: Any) -> None:
        writer.close()
        if file is not None:
            file.close()  # an object store upload completes here
        else:
            _fsync(path)

    def _shutdown_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _publish_local(self) -> None:
        os.makedirs(posixpath.dirname(self._target), exist_ok=True)
        replace_local(self._staging, self._target)
        self.published = [posixpath.join(self._target, posixpath.basename(p)) for p in self._parts]

    def _publish_object_store(self) -> None:
        names = [posixpath.basename(p) for p in self._parts]
        set_name = posixpath.basename(self._staging)
        self.published = partition_sets.publish_set(self._fs, self._target, set_name, names)

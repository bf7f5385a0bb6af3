"""ADTF recordings → normalized tables, through the YAML stream mapping (`adtf_mapping`).

`normalize_adtf(drive_dir, sink)` finds every `.dat` / `.adtfdat` recording under the drive,
reads each once in file order and hands every sample to its stream's job. A job is chosen by
the mapping's first matching rule; a stream no rule takes (or whose rule names elements its
DDL lacks) still gets a job that counts and quarantines its samples, so nothing is dropped.

Clock. Master time is the sample's chunk (recording) time in ns (`Sample.time_ns`, already
ns for every IFHD version); `sensor_time_ns` is the rule's device-time element times its unit,
in integer arithmetic. The sink fits the device clock from the pair.

Speed and memory. The hot loop does one list append per sample. Jobs collect samples up to a
bounded batch (`BATCH_SAMPLES` samples or `BATCH_BYTES` of payload, whichever comes first),
then decode the whole batch with the vectorized DDL decoder and build Arrow columns with
numpy: no Python work per field, point or frame. Memory is bounded by the batch limits times
the number of streams, independent of the drive's length. A batch whose decode fails is
split in halves until the bad samples are isolated; they go to quarantine with their byte
offset, the rest is written.

Order. Within a batch, rows are stably sorted by master time if needed (counted through
`sink.reordered`); a stream that goes backwards across a batch boundary is left as is and
shows up as `out_of_order` in the catalog.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake import clock
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf import Sample, Stream, open_dat, recording_parts, sniff
from bridge_lake.formats.adtf.ddl import DDL, render_ddl, static_size
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.formats.adtf.errors import AdtfError, DDLError
from bridge_lake.formats.video import access_units
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.normalize.adtf_clock import RecordingClock, recording_clocks
from bridge_lake.normalize.adtf_generic import (
    element_columns,
    struct_schema,
    substream_streams,
    table_name,
    with_plain_type,
)
from bridge_lake.normalize.adtf_mapping import FieldMap, Mapping, Rule, resolve_mapping
from bridge_lake.normalize.sink import SOURCE_SEPARATOR, DriveSink, StreamInfo

BATCH_SAMPLES = 50_000
BATCH_BYTES = 16 << 20
"""Batch limits per stream: bound memory (and keep Arrow's 32-bit binary offsets safe)."""
CHECK_EVERY = 4096
"""Samples dispatched between two looks at the batch sizes (fewer when they span more than a
quarter of RELEASE_BYTES of the file)."""
RELEASE_BYTES = 32 << 20
"""File bytes read between two releases of the mapped pages (`DatFile.release_pages`), and
the most a stream's pending samples may span. Batches decode their samples after the
reader's walk has released them, mapping their pages in again: a sparse stream (15 MB of
video in a 136 MB recording, one batch) touched the whole file, so a 30-minute recording
(822 MB) stayed resident whole."""
UNMAPPED_TABLE = "quarantine"
"""File problems (an unreadable file, the damage of a readable one) are declared for the
quarantine table: all their records go there, and their `source_type` starts with `file:`.
Streams no rule takes are not quarantined: they land in generic tables (`adtf_generic`)."""
PAYLOAD_TABLE = "adtf_payloads"
SOURCE_PREFIX = "adtf"


def normalize_adtf(
    drive_dir: Path,
    sink: DriveSink,
    mapping: Mapping | None = None,
    *,
    user_mapping: str | Path | None = None,
    files: list[Path] | None = None,
) -> None:
    """Normalize every ADTF recording under `drive_dir` into `sink` (the NORMALIZERS entry).

    `mapping` is used as given; by default the layered mapping of `resolve_mapping`: the
    drive's own file (drive.yaml `mapping`), the user's (`user_mapping`, else
    `$BRIDGE_LAKE_ADTF_MAPPING`), the packaged `adtf_mapping.yaml`. `files` limits the run to
    these recordings (inside `drive_dir`). The parts of a split recording are read as one
    recording (`group_parts`); each recording is put on the master clock (`adtf_clock`).
    """
    root = Path(drive_dir)
    mapping = resolve_mapping(root, user=user_mapping) if mapping is None else mapping
    used: set[str] = set()
    paths = find_recordings(root) if files is None else [Path(p) for p in files]
    recordings = group_parts(paths)
    for parts, clock_ in zip(recordings, recording_clocks(recordings), strict=True):
        with _gc_paused():
            rels = [p.relative_to(root).as_posix() for p in parts]
            _normalize_recording(parts, rels, sink, mapping, used, clock_)


def group_parts(paths: list[Path]) -> list[list[Path]]:
    """The recordings among `paths`: a split recording's parts as one list in time order,
    every other file alone; in the order of each recording's first path.

    Parts are found through `referencedfiles` (followed transitively); when a middle part is
    missing that chain breaks, so parts are also joined by the recorders' naming
    (`name.dat`, `name_001.dat`, ...) if they reference other parts at all."""
    given = {p.resolve(): p for p in paths}
    chains: list[list[Path]] = []
    seen: set[Path] = set()
    for p in paths:
        if p.resolve() in seen:
            continue
        try:
            chain = [given[q] for q in recording_parts(p) if q in given] or [p]
        except AdtfError:
            chain = [p]  # unreadable: quarantined as a file of its own
        seen.update(q.resolve() for q in chain)
        chains.append(chain)
    by_base: dict[tuple[Path, str], list[list[Path]]] = {}
    for chain in chains:
        by_base.setdefault(_split_base(chain), []).append(chain)
    out = []
    for chain in chains:
        group = by_base.get(_split_base(chain), [chain])
        if len(group) > 1 and not all(_is_split(c) for c in group):
            group = [chain]
        if group[0] is chain:
            out.append(sorted((p for c in group for p in c), key=_part_number))
    return out


_PART = re.compile(r"^(?P<base>.+)_(?P<n>\d{3,})$")


def _part_number(path: Path) -> int:
    m = _PART.match(path.stem)
    return int(m["n"]) if m else 0


def _split_base(chain: list[Path]) -> tuple[Path, str]:
    """(folder, recording name without part number) of a chain's first part."""
    p = chain[0]
    m = _PART.match(p.stem)
    return p.parent, (m["base"] if m else p.stem) + p.suffix


def _is_split(chain: list[Path]) -> bool:
    if len(chain) > 1:
        return True
    try:
        with open_dat(chain[0], strict=False) as f:
            return bool(f.referenced_files)
    except AdtfError:
        return False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a file is read.

    The reader allocates one tuple per sample and the batches hold up to 50k of them, so the
    collector's generation scans (triggered by allocation counts, not by garbage) re-walk the
    pending batches again and again: measured, it more than doubled the normalizer's time on
    the 5-minute synthetic drive. Nothing here builds reference cycles (samples, batches and
    Arrow arrays are acyclic and freed by reference counting), so pausing loses no memory;
    the previous state is restored even on error.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def find_recordings(drive_dir: Path) -> list[Path]:
    """Every file under `drive_dir` that is an ADTF recording by `sniff`'s rule (the IFHD
    magic, whatever its name: the raw manifest lists the same files), sorted by path. A file
    that cannot be opened is left to the raw manifest, which reports it unreadable."""
    found = []
    for p in sorted(Path(drive_dir).rglob("*")):
        try:
            if p.is_file() and sniff(p)[0]:
                found.append(p)
        except OSError:
            continue
    return found


# --------------------------------------------------------------------------------------------
# one file


def _unique(name: str, rel: str, used: set[str]) -> str:
    """Stream names are unique per drive in the sink; a second file's `imu` is `imu@<file>`."""
    out = name if name not in used else f"{name}@{rel}"
    used.add(out)
    return out


def _normalize_recording(
    parts: list[Path],
    rels: list[str],
    sink: DriveSink,
    mapping: Mapping,
    used: set,
    clock_: RecordingClock,
) -> None:
    """One recording, maybe split: each stream one job across all parts (matched by stream
    name; stream ids may differ between parts), so it is one stream of one time base."""
    jobs: dict[str, _Job | _Substreams] = {}
    source = SOURCE_SEPARATOR.join(rels)
    samples = [
        _normalize_part(path, rel, source, sink, mapping, used, jobs, clock_)
        for path, rel in zip(parts, rels, strict=True)
    ]
    for job in jobs.values():
        job.finish()
    if samples and all(n == 0 for n in samples):  # opened, streams maybe, not one sample
        used.add(f"{source}#file")
        sink.quarantine_file(
            source,
            "empty",
            f"empty recording: {len(jobs)} streams, no samples",
            size=sum(p.stat().st_size for p in parts),
        )


def _unreadable(path: Path, rel: str, sink: DriveSink, used: set, exc: AdtfError) -> None:
    """The whole file is one unreadable record: counted and quarantined, not skipped. The
    reason is the reader's, as the raw manifest's `problem` has it."""
    used.add(f"{rel}#file")
    sink.quarantine_file(
        rel,
        "unreadable",
        f"unreadable recording: {exc.reason}",
        size=path.stat().st_size,
        offset=exc.offset,
    )


def _normalize_part(
    path: Path,
    rel: str,
    source: str,
    sink: DriveSink,
    mapping: Mapping,
    used: set,
    jobs: dict[str, _Job | _Substreams],
    clock_: RecordingClock,
) -> int | None:
    """One file of a recording into the recording's `jobs` (flushed, not finished); returns
    how many samples it held, None when it could not be opened (quarantined as a file)."""
    try:
        f = open_dat(path, strict=False)
    except AdtfError as exc:
        _unreadable(path, rel, sink, used, exc)
        return None
    with f:
        data = np.frombuffer(f.view, dtype=np.uint8) if len(f.view) else np.zeros(0, np.uint8)
        here: dict[int, _Job | _Substreams] = {}

        def job_for(stream: Stream) -> _Job | _Substreams:
            key = stream.name or f"stream{stream.stream_id}"
            job = jobs.get(key)
            if job is None:
                job = jobs[key] = _make_job(
                    stream, _unique(key, rel, used), rel, sink, mapping, data
                )
                _set_part(job, rel, source, clock_)
            here[stream.stream_id] = job
            adds[stream.stream_id] = job.pending.append
            return job

        def late(sample: Sample) -> None:
            """A stream met only in the walk (recovery of a file without index)."""
            job_for(f.stream(sample[0])).pending.append(sample)

        adds: list[Callable[[Sample], None]] = [late] * 65536
        for job in jobs.values():
            _set_part(job, rel, source, clock_)
        for stream in f.streams:
            job_for(stream)
        samples = f.samples()
        release_at, step = RELEASE_BYTES, CHECK_EVERY
        count = 0
        while chunk := list(itertools.islice(samples, step)):
            count += len(chunk)
            for s in chunk:
                adds[s[0]](s)
            at = chunk[-1].offset
            for job in here.values():
                if job.full(at):
                    job.flush()
            if at >= release_at:
                f.release_pages()
                release_at = at + RELEASE_BYTES
            # big samples (dense lidar frames) mean fewer between two looks at the batches
            step = int(
                max(16, min(CHECK_EVERY, step * RELEASE_BYTES / 4 / max(1, at - chunk[0].offset)))
            )
        for job in here.values():
            job.flush()  # the samples are views of this file: written before it closes
        issues = list(f.issues.items)
    if issues:
        name = _unique(f"{rel}#issues", rel, used)
        sink.declare(StreamInfo(name, UNMAPPED_TABLE, rel, "file:issues"))
        sink.read(name, UNMAPPED_TABLE, len(issues))
        sink.quarantine(
            name,
            UNMAPPED_TABLE,
            source_file=rel,
            reasons=[f"{type(e).__name__}: {e.reason}" for e in issues],
            byte_offset=[e.offset for e in issues],
        )
    return count


def _set_part(job: _Job | _Substreams, rel: str, source: str, clock_: RecordingClock) -> None:
    """Point a job (and a substream job's children) at the part being read and its clock."""
    if isinstance(job, _Substreams):
        for child in job.jobs.values():
            _set_part(child, rel, source, clock_)
        return
    job.rel, job.source, job.clock = rel, source, clock_


def _type_name(stream: Stream) -> str:
    meta = stream.meta_type or stream.kind
    return f"{meta}:{stream.ddl_struct}" if stream.ddl_struct else meta


def _make_job(
    stream: Stream, name: str, rel: str, sink: DriveSink, mapping: Mapping, data: np.ndarray
) -> _Job | _Substreams:
    """The job for a stream: its mapping rule's, else a generic table's (decoded by its DDL,
    or kept as payload bytes); a substream stream no rule takes is split into its
    substreams, each mapped on its own."""
    stream = with_plain_type(stream)
    props = {
        k: p.value for k, p in (stream.stream_type.properties.items() if stream.stream_type else ())
    }
    placed = mapping.lookup(stream.name, stream.meta_type, stream.ddl_struct, props)
    if placed is None:
        subs = substream_streams(stream)
        if subs:
            return _Substreams(
                {
                    sub_id: _make_job(
                        sub, f"{name}/{sub.name.rsplit('/', 1)[1]}", rel, sink, mapping, data
                    )
                    for sub_id, sub in subs.items()
                },
                lambda sub_id: _PayloadJob(
                    stream,
                    f"{name}/#{sub_id}",
                    rel,
                    sink,
                    f"substream {sub_id} not in the stream type",
                ),
            )
        return _generic(stream, name, rel, sink, "no mapping rule")
    rule = placed.rule
    job: _Job
    if rule.decoder == "video":
        job = _Video(stream, name, rel, sink, rule, props)
    else:
        problem = _check_rule(stream, rule)
        if problem is not None:
            return _generic(stream, name, rel, sink, f"rule {rule.name} cannot apply: {problem}")
        cls = {"struct": _StructJob, "can": _CanJob, "lidar": _LidarJob}[rule.decoder]
        job = cls(stream, name, rel, sink, rule, data)
    job.mapping = placed.describe()
    return job


def _generic(stream: Stream, name: str, rel: str, sink: DriveSink, why: str) -> _Job:
    if stream.ddl is not None and stream.ddl_struct is not None:
        return _GenericJob(stream, name, rel, sink, why)
    return _PayloadJob(stream, name, rel, sink, why)


_PATH = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _path_parts(path: str) -> list[str | int]:
    return [m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _PATH.finditer(path)]


def _check_path(ddl: DDL, struct: str, path: str) -> str | None:
    """None if `path` names a scalar in `struct` (or an array/struct where `whole` allows)."""
    current: str | None = struct
    parts = _path_parts(path)
    elem = None
    for part in parts:
        if isinstance(part, int):
            if elem is None or not isinstance(elem.arraysize, int) or part >= elem.arraysize:
                return f"element {path!r}: index [{part}] outside a fixed array"
            continue
        if current is None:
            return f"element {path!r}: {part!r} below a non-struct element"
        found = [e for e in ddl.struct(current).elements if e.name == part]
        if not found:
            return f"struct {current} has no element {part!r} (for {path!r})"
        elem = found[0]
        current = elem.type if elem.type in ddl.structs else None
    return None


def _check_rule(stream: Stream, rule: Rule) -> str | None:
    """Why `rule` cannot decode `stream`, or None. Checked once per stream, not per sample."""
    if stream.ddl is None or stream.ddl_struct is None:
        return f"stream {stream.name} has no DDL description"
    paths = [f.element for f in rule.fields]
    if rule.sensor_time is not None:
        paths.append(rule.sensor_time.element)
    if rule.sensor_scan_id:
        paths.append(rule.sensor_scan_id)
    if rule.points_element:
        paths.append(rule.points_element)
    for p in paths:
        problem = _check_path(stream.ddl, stream.ddl_struct, p)
        if problem:
            return problem
    if rule.points_element:
        elem = next(
            e
            for e in stream.ddl.struct(stream.ddl_struct).elements
            if e.name == rule.points_element
        )
        if elem.type not in stream.ddl.structs:
            return f"points element {rule.points_element!r} is not an array of structs"
        for fm in rule.point_fields:
            problem = _check_path(stream.ddl, elem.type, fm.element)
            if problem:
                return problem
    return None


# --------------------------------------------------------------------------------------------
# jobs


class _Job(ABC):
    """One stream of one file: pending samples, lazy declaration, conservation accounting."""

    table = UNMAPPED_TABLE

    def __init__(self, stream: Stream, name: str, rel: str, sink: DriveSink) -> None:
        self.stream = stream
        self.name = name
        self.rel = rel
        """the file being read (quarantine rows and errors name it)"""
        self.source = rel
        """the recording's file(s) for the catalog: a split recording lists its parts"""
        self.mapping: str | None = None
        """the rule that chose the table and its layer (`Placement.describe`)"""
        self.clock = RecordingClock(0, "")
        """the recording's offset to the master clock (added to every chunk time)"""
        self.sink = sink
        self.pending: list[Sample] = []
        self.declared = False
        self.last_time: int | None = None
        self.pending_bytes = 0
        self.counted = 0
        """pending samples already added to pending_bytes (sizes vary: video frames)."""

    def full(self, at: int) -> bool:
        """Time to flush: a batch's worth of samples or bytes, or pending samples spread
        over more than RELEASE_BYTES of the file before offset `at`."""
        n = len(self.pending)
        self.pending_bytes += sum(len(s[4]) for s in self.pending[self.counted :])
        self.counted = n
        return (
            n >= BATCH_SAMPLES
            or self.pending_bytes >= BATCH_BYTES
            or (n > 0 and at - self.pending[0].offset >= RELEASE_BYTES)
        )

    @abstractmethod
    def info(self, batch: _Batch | None) -> list[StreamInfo]:
        """The stream(s) this job writes, declared when its first batch is flushed."""

    def declare(self, batch: _Batch | None) -> None:
        if not self.declared:
            for info in self.info(batch):
                self.sink.declare(
                    dataclasses.replace(
                        info,
                        mapping=info.mapping or self.mapping,
                        recording_offset_ns=self.clock.offset_ns,
                        recording_clock=self.clock.method or None,
                    )
                )
            self.declared = True

    def flush(self) -> None:
        if not self.pending:
            return
        batch = _Batch(self.pending, self)
        self.pending.clear()  # in place: the dispatch table holds this list's append
        self.pending_bytes = self.counted = 0
        self.declare(batch)
        self.sink.read(self.name, self.table, batch.n)
        self.process(batch)

    def finish(self) -> None:
        self.declare(None)

    @abstractmethod
    def process(self, batch: _Batch) -> None:
        """Turn one batch of samples into rows and quarantine entries."""

    def quarantine(self, batch: _Batch, idx: np.ndarray, reasons: list[str]) -> None:
        if not len(idx):
            return
        self.sink.quarantine(
            self.name,
            self.table,
            source_file=self.rel,
            reasons=reasons,
            record_index=batch.stream_index[idx].tolist(),
            byte_offset=batch.chunk_offset[idx].tolist(),
            byte_length=batch.lengths[idx].tolist(),
            raw=[batch.raws[i] for i in idx.tolist()],
        )

    def source_type(self) -> str:
        return f"{SOURCE_PREFIX}:{_type_name(self.stream)}"

    def unmapped_info(
        self,
        batch: _Batch | None,
        mapping: str,
        ddl_struct: str | None = None,
        ddl: str | None = None,
    ) -> list[StreamInfo]:
        """The declaration of a stream no rule maps (a payload or generic table): no topic,
        the batch's measured rate, and why it went there."""
        return [
            StreamInfo(
                self.name,
                self.table,
                self.source,
                self.source_type(),
                expected_rate_hz=_measured_rate(batch),
                mapping=mapping,
                ddl_struct=ddl_struct,
                ddl=ddl,
            )
        ]


class _Batch:
    """A batch of one stream's samples as columns (one transpose in C, no per-sample loop)."""

    def __init__(self, samples: list[Sample], job: _Job) -> None:
        n = self.n = len(samples)
        cols = list(zip(*samples, strict=True))
        self.time_ns = np.fromiter(cols[1], dtype=np.int64, count=n) + job.clock.offset_ns
        self.sample_time_ns = np.fromiter(cols[2], dtype=np.int64, count=n)
        self.raws: list = list(cols[4])
        self.stream_index = np.fromiter(cols[7], dtype=np.int64, count=n)
        self.chunk_offset = np.fromiter(cols[8], dtype=np.int64, count=n)
        self.lengths = np.fromiter(map(len, self.raws), dtype=np.int64, count=n)
        self.sorted_by_time(job)

    def sorted_by_time(self, job: _Job) -> None:
        """Stable sort by master time when needed; count the records that had to move."""
        t = self.time_ns
        prev = job.last_time
        if self.n:
            job.last_time = int(t.max()) if prev is None else max(prev, int(t.max()))
        if self.n < 2 or not np.any(t[1:] < t[:-1]):
            return
        job.sink.reordered(job.name, job.table, clock.reorder_count(t))
        order = np.argsort(t, kind="stable")
        self.time_ns = t[order]
        self.sample_time_ns = self.sample_time_ns[order]
        self.raws = [self.raws[i] for i in order.tolist()]
        self.stream_index = self.stream_index[order]
        self.chunk_offset = self.chunk_offset[order]
        self.lengths = self.lengths[order]

    def buffer(self, idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Payloads of `idx` (default all) concatenated: (bytes as uint8, offsets, lengths)."""
        raws = self.raws if idx is None else [self.raws[i] for i in idx.tolist()]
        lengths = self.lengths if idx is None else self.lengths[idx]
        joined = b"".join(raws)
        offsets = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths) > 1:
            np.cumsum(lengths[:-1], out=offsets[1:])
        return np.frombuffer(joined, dtype=np.uint8), offsets, lengths


class _Substreams:
    """An `adtf/substreams` stream: samples handed to one job per substream (by the
    substream id each sample carries), each its own stream in the catalog."""

    def __init__(self, jobs: dict[int, _Job | _Substreams], stray: Callable[[int], _Job]) -> None:
        self.jobs = jobs
        self.stray = stray
        """makes the job for a substream id the stream type does not name"""
        self.pending: list[Sample] = []

    def full(self, at: int) -> bool:
        """Hand the pending samples to the substream jobs and flush those that are full;
        never full itself."""
        self._distribute()
        for job in self.jobs.values():
            if job.full(at):
                job.flush()
        return False

    def _distribute(self) -> None:
        for sample in self.pending:
            job = self.jobs.get(sample[6])
            if job is None:
                job = self.jobs[sample[6]] = self.stray(sample[6])
            job.pending.append(sample)
        self.pending.clear()

    def flush(self) -> None:
        self._distribute()
        for job in self.jobs.values():
            job.flush()

    def finish(self) -> None:
        self.flush()
        for job in self.jobs.values():
            job.finish()


class _PayloadJob(_Job):
    """A stream without a DDL: one `adtf_payloads` row per sample, bytes and meta type."""

    table = PAYLOAD_TABLE

    def __init__(self, stream: Stream, name: str, rel: str, sink: DriveSink, why: str) -> None:
        super().__init__(stream, name, rel, sink)
        self.why = why

    def info(self, batch: _Batch | None) -> list[StreamInfo]:
        return self.unmapped_info(batch, f"payload: {self.why}, no DDL")

    def process(self, batch: _Batch) -> None:
        buf, offsets, _ = batch.buffer()
        n = batch.n
        cols = {
            "time_ns": batch.time_ns,
            "sample_time_ns": batch.sample_time_ns,
            "meta_type": pa.repeat(pa.scalar(self.stream.meta_type or self.stream.kind), n),
            "data": _binary(buf, offsets, self.rel),
        }
        self.sink.write(self.name, self.table, pa.table(cols))


def _binary(buf: np.ndarray, offsets: np.ndarray, rel: str) -> pa.Array:
    """Concatenated payloads (`buf`, start `offsets`) as an Arrow binary array, no copy."""
    if len(buf) > np.iinfo(np.int32).max:  # pa.binary() offsets are int32
        raise BridgeLakeError(f"{rel}: batch of {len(buf)} bytes exceeds 2 GiB")
    ends = np.concatenate([offsets, [len(buf)]]).astype(np.int32)
    return pa.Array.from_buffers(
        pa.binary(), len(offsets), [None, pa.py_buffer(ends), pa.py_buffer(buf)]
    )


def _measured_rate(batch: _Batch | None) -> float | None:
    """Mean rate of a batch, 3 significant digits: the nominal rate when a rule gives none."""
    if batch is None or batch.n < 2:
        return None
    span = int(batch.time_ns[-1] - batch.time_ns[0])
    if span <= 0:
        return None
    rate = (batch.n - 1) * 1e9 / span
    digits = 2 - math.floor(math.log10(rate))
    return round(rate, digits)


class _StructJob(_Job):
    """A DDL-described stream mapped field by field; decoded a batch at a time."""

    def __init__(
        self, stream: Stream, name: str, rel: str, sink: DriveSink, rule: Rule, data: np.ndarray
    ) -> None:
        super().__init__(stream, name, rel, sink)
        self.rule = rule
        self.table = rule.table
        self.use_ddl(stream)
        self.frame_id = rule.frame_id or stream.name

    def use_ddl(self, stream: Stream) -> None:
        """The stream's DDL struct and stored layout, and its static size (None if variable)."""
        self.ddl = stream.ddl
        self.struct = stream.ddl_struct
        self.layout = stream.stored_layout or "deserialized"
        self.size = static_size(self.ddl, self.struct, self.layout)

    def topic(self, batch: _Batch | None) -> str | None:
        return self.rule.topic.format(stream=self.stream.name) if self.rule.topic else None

    def info(self, batch: _Batch | None) -> list[StreamInfo]:
        rate = self.rule.expected_rate_hz or _measured_rate(batch)
        return [
            StreamInfo(
                self.name, self.table, self.source, self.source_type(), self.topic(batch), rate
            )
        ]

    def decode(self, batch: _Batch) -> tuple[np.ndarray, pa.Table | None]:
        """Decode the batch; returns (indices decoded, their table). Bad samples (wrong size
        for a static struct, bounds violations found by the decoder) are quarantined."""
        idx = np.arange(batch.n)
        if self.size is not None:
            bad = batch.lengths != self.size
            if bad.any():
                where = np.flatnonzero(bad)
                self.quarantine(
                    batch,
                    where,
                    [
                        f"payload of {n} bytes, struct {self.struct} is {self.size} bytes"
                        for n in batch.lengths[where].tolist()
                    ],
                )
                idx = np.flatnonzero(~bad)
        if not len(idx):
            return idx, None
        good, parts = self._decode_split(batch, idx)
        if not parts:
            return good, None
        return good, pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _decode_split(self, batch: _Batch, idx: np.ndarray) -> tuple[np.ndarray, list[pa.Table]]:
        buf, offsets, lengths = batch.buffer(idx)
        try:
            table = decode(
                self.ddl, self.struct, buf, offsets, lengths, layout=self.layout, path=self.rel
            )
        except DDLError as exc:
            if len(idx) == 1:
                self.quarantine(
                    batch, idx, [f"payload does not decode as {self.struct}: {exc.reason}"]
                )
                return idx[:0], []
            half = len(idx) // 2
            a_idx, a = self._decode_split(batch, idx[:half])
            b_idx, b = self._decode_split(batch, idx[half:])
            return np.concatenate([a_idx, b_idx]), a + b
        return idx, [table]

    def sensor_time(self, table: pa.Table) -> tuple[np.ndarray | None, np.ndarray]:
        """(sensor_time_ns or None, mask of rows whose device time overflows int64 ns)."""
        st = self.rule.sensor_time
        if st is None:
            return None, np.zeros(table.num_rows, dtype=bool)
        raw = np.asarray(_column(table, st.element).to_numpy(zero_copy_only=False))
        if raw.dtype.kind not in "iu":
            raw = np.asarray(raw, dtype=np.float64)
            bad = ~np.isfinite(raw) | (np.abs(raw) * st.unit_ns >= 2**63)
            ns = np.where(bad, 0, np.rint(np.where(bad, 0, raw) * st.unit_ns)).astype(np.int64)
            return ns, bad
        limit = np.iinfo(np.int64).max // st.unit_ns
        if raw.dtype.kind == "u":
            bad = raw > np.uint64(limit)
        else:
            bad = np.abs(raw.astype(np.int64)) > limit
        return np.where(bad, 0, raw).astype(np.int64) * st.unit_ns, bad

    def base_columns(self, batch: _Batch, idx: np.ndarray, table: pa.Table) -> dict:
        sensor, _ = self.sensor_time(table)
        cols: dict = {"time_ns": batch.time_ns[idx]}
        if sensor is not None:
            cols["sensor_time_ns"] = sensor
        cols["frame_id"] = pa.repeat(pa.scalar(self.frame_id), len(idx))
        return cols

    def drop_bad_time(self, batch: _Batch, idx: np.ndarray, table: pa.Table):
        """Rows whose device time does not fit the ns range go to quarantine."""
        _, bad = self.sensor_time(table)
        if not bad.any():
            return idx, table
        where = np.flatnonzero(bad)
        self.quarantine(batch, idx[where], ["device time out of the int64 ns range"] * len(where))
        keep = np.flatnonzero(~bad)
        return idx[keep], table.take(pa.array(keep))

    def drop_unfit(self, batch: _Batch, idx: np.ndarray, table: pa.Table, reasons: np.ndarray):
        """Rows with a `reasons` entry (a mapped value its integer column cannot hold) go to
        quarantine with that reason; the drive goes on."""
        bad = reasons != None  # noqa: E711
        if not bad.any():
            return idx, table
        where = np.flatnonzero(bad)
        self.quarantine(batch, idx[where], reasons[where].tolist())
        keep = np.flatnonzero(~bad)
        return idx[keep], table.take(pa.array(keep))

    def process(self, batch: _Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        idx, table = self.drop_bad_time(batch, idx, table)
        schema = NORMALIZED[self.table].schema
        idx, table = self.drop_unfit(batch, idx, table, _unfit(table, self.rule.fields, schema))
        cols = self.base_columns(batch, idx, table)
        for fm in self.rule.fields:
            cols[fm.column] = _mapped(table, fm, schema.field(fm.column).type)
        self.sink.write(self.name, self.table, pa.table(cols))


class _GenericJob(_StructJob):
    """A DDL-described stream no rule takes: every element decoded into `ddl_<struct>`."""

    def __init__(self, stream: Stream, name: str, rel: str, sink: DriveSink, why: str) -> None:
        _Job.__init__(self, stream, name, rel, sink)
        self.why = why
        self.use_ddl(stream)
        schema = struct_schema(self.ddl, self.struct, self.layout)
        self.table = sink.register_table(table_name(self.struct), schema)

    def info(self, batch: _Batch | None) -> list[StreamInfo]:
        return self.unmapped_info(
            batch, f"generic: {self.why}", ddl_struct=self.struct, ddl=render_ddl(self.ddl)
        )

    def process(self, batch: _Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        elements = element_columns(table)
        cols = {"time_ns": batch.time_ns[idx], "sample_time_ns": batch.sample_time_ns[idx]}
        cols.update(zip(elements.column_names, elements.columns, strict=True))
        self.sink.write(self.name, self.table, pa.table(cols))


def _column(table: pa.Table, path: str) -> pa.Array:
    """Element `a.b[2]` of a decoded table as one Arrow array (nested struct / list access)."""
    parts = _path_parts(path)
    arr = table.column(parts[0]).combine_chunks()
    for part in parts[1:]:
        arr = pc.list_element(arr, part) if isinstance(part, int) else pc.struct_field(arr, part)
    return arr


def _mapped(table: pa.Table, fm: FieldMap, target: pa.DataType | None = None) -> pa.Array:
    """`element * scale + offset` as the column `fm.column` of type `target`. Integers go to
    float columns through numpy (Arrow's safe cast refuses integers beyond 2^53); for an
    integer column, rows `_unfit` names must have been dropped first (they come out as 0)."""
    arr = _column(table, fm.element)
    if target is not None and pa.types.is_integer(target):
        values, valid, _ = _fit_integer(arr, fm, target)
        return pa.array(values, type=target, mask=None if valid.all() else ~valid)
    if fm.identity and not pa.types.is_integer(arr.type):
        return arr
    values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return pa.array(values * fm.scale + fm.offset, mask=None if valid.all() else ~valid)


def _unfit(table: pa.Table, fields: tuple[FieldMap, ...], schema: pa.Schema) -> np.ndarray:
    """Per row, why a mapped value does not fit its integer column (overflow, not finite, a
    fraction after scaling), or None: the first problem of the row, in field order."""
    reasons = np.full(table.num_rows, None, dtype=object)
    for fm in fields:
        target = schema.field(fm.column).type
        if not pa.types.is_integer(target):
            continue
        _, _, why = _fit_integer(_column(table, fm.element), fm, target)
        free = reasons == None  # noqa: E711
        reasons[free] = why[free]
    return reasons


def _fit_integer(
    arr: pa.Array, fm: FieldMap, target: pa.DataType
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as `target`'s numpy type with unfit rows 0, validity, per-row reason or None).

    Integers mapped as they are are compared exactly; anything scaled (or a float element)
    is rounded to the nearest integer when it lies within a few ulps of it (0.1 * 30 is
    3.0000000000000004), else it is a fraction."""
    dtype = np.dtype(target.to_pandas_dtype())
    info = np.iinfo(dtype)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    filled = arr.fill_null(0) if arr.null_count else arr
    raw = np.asarray(filled.to_numpy(zero_copy_only=False))
    if raw.dtype == np.bool_:
        raw = raw.astype(np.int8)
    scale = (f" * {fm.scale:g}" if fm.scale != 1 else "") + (
        f" + {fm.offset:g}" if fm.offset else ""
    )
    where = f"column {fm.column} ({target}): value"
    src = f"(element {fm.element}{scale})"
    reasons = np.full(len(raw), None, dtype=object)
    if fm.identity and raw.dtype.kind in "iu":
        if raw.dtype.kind == "u":
            over = raw.astype(np.uint64) > np.uint64(info.max)
            under = np.zeros(len(raw), dtype=bool)
        else:
            wide = raw.astype(np.int64)
            over = wide > min(info.max, np.iinfo(np.int64).max)
            under = wide < info.min
        bad = (over | under) & valid
        reasons[bad] = [f"{where} {v} overflows {src}" for v in raw[bad].tolist()]
        return np.where(bad, 0, raw).astype(dtype), valid, reasons
    scaled = raw.astype(np.float64) * fm.scale + fm.offset
    rounded = np.rint(scaled)
    finite = np.isfinite(scaled)
    bits = dtype.itemsize * 8
    lo, hi = (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if info.min < 0 else (0.0, 2.0**bits)
    with np.errstate(invalid="ignore"):
        fraction = finite & (np.abs(scaled - rounded) > 64 * np.spacing(np.abs(scaled)))
        over = finite & ~fraction & ((rounded < lo) | (rounded >= hi))
    for mask, problem in ((~finite, "is not finite"), (fraction, "is not an integer")):
        mask &= valid
        reasons[mask] = [f"{where} {v!r} {problem} {src}" for v in scaled[mask].tolist()]
    over &= valid
    reasons[over] = [f"{where} {v!r} overflows {src}" for v in scaled[over].tolist()]
    bad = reasons != None  # noqa: E711
    return np.where(bad | ~valid, 0, rounded).astype(dtype), valid, reasons


class _CanJob(_StructJob):
    """tCANData-like frames: extended flag from the id bit (or a flag), payload cut to dlc,
    error frames and bus-status messages quarantined with their reason (they are not frames
    of the bus traffic the table describes)."""

    first_channel: int | None = None

    def topic(self, batch: _Batch | None) -> str | None:
        if not self.rule.topic:
            return None
        channel = "unknown" if self.first_channel is None else self.first_channel
        return self.rule.topic.format(stream=self.stream.name, channel=channel)

    def declare(self, batch: _Batch | None) -> None:
        if not self.declared and batch is not None:
            # the topic names the bus channel: decode the channel of the first frame now
            idx, table = self._peek(batch)
            if table is not None and table.num_rows:
                self.first_channel = int(_column(table, self._field("channel")).to_numpy()[idx])
        super().declare(batch)

    def _peek(self, batch: _Batch):
        ok = np.flatnonzero(batch.lengths == self.size) if self.size else np.arange(batch.n)
        if not len(ok):
            return 0, None
        buf, offsets, lengths = batch.buffer(ok[:1])
        try:
            return 0, decode(self.ddl, self.struct, buf, offsets, lengths, layout=self.layout)
        except DDLError:
            return 0, None

    def _field(self, column: str) -> str:
        return next(f.element for f in self.rule.fields if f.column == column)

    def process(self, batch: _Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        idx, table = self.drop_bad_time(batch, idx, table)
        opt = self.rule.can
        names = {f.column: f.element for f in self.rule.fields}

        def ints(column: str) -> np.ndarray | None:
            if column not in names:
                return None
            return np.asarray(_column(table, names[column]).to_numpy(zero_copy_only=False))

        raw_id = ints("can_id").astype(np.int64)
        dlc = ints("dlc").astype(np.int64)
        flags = ints("flags")
        tag = ints("tag")
        data_arr = _column(table, names["data"])
        if not pa.types.is_fixed_size_list(data_arr.type):
            self.quarantine(
                batch,
                idx,
                [f"CAN data element {names['data']!r} is not a fixed byte array"] * len(idx),
            )
            return
        width = data_arr.type.list_size
        payload = np.asarray(
            data_arr.flatten().to_numpy(zero_copy_only=False), dtype=np.uint8
        ).reshape(-1, width)
        ext = np.zeros(len(idx), dtype=bool)
        if opt["extended_bit"] is not None:
            ext |= ((raw_id >> opt["extended_bit"]) & 1).astype(bool)
            raw_id = raw_id & ~(1 << opt["extended_bit"])
        if flags is not None and opt["extended_flag"]:
            ext |= (flags & opt["extended_flag"]) != 0
        reasons = np.full(len(idx), None, dtype=object)
        if tag is not None:
            status = ~np.isin(tag, opt["data_tags"])
            reasons[status] = [f"CAN status message (tag {t})" for t in tag[status].tolist()]
        if flags is not None and opt["error_flag"]:
            err = ((flags & opt["error_flag"]) != 0) & (reasons == None)  # noqa: E711
            reasons[err] = "CAN error frame"
        too_long = (dlc > width) & (reasons == None)  # noqa: E711
        reasons[too_long] = [
            f"dlc {d} exceeds the {width}-byte data array" for d in dlc[too_long].tolist()
        ]
        mask = np.where(ext, opt["extended_mask"], opt["standard_mask"])
        wide = ((raw_id & ~mask) != 0) & (reasons == None)  # noqa: E711
        reasons[wide] = [
            f"CAN id 0x{i:X} exceeds {'29' if e else '11'} bits"
            for i, e in zip(raw_id[wide].tolist(), ext[wide].tolist(), strict=True)
        ]
        bad = reasons != None  # noqa: E711
        if bad.any():
            where = np.flatnonzero(bad)
            self.quarantine(batch, idx[where], reasons[where].tolist())
            keep = np.flatnonzero(~bad)
            idx, table = idx[keep], table.take(pa.array(keep))
            raw_id, dlc, ext, payload = raw_id[keep], dlc[keep], ext[keep], payload[keep]
            flags = flags[keep] if flags is not None else None
        cols = self.base_columns(batch, idx, table)
        cols["channel"] = _column(table, names["channel"])
        cols["can_id"] = raw_id
        cols["is_extended"] = ext
        if flags is not None and opt["remote_flag"]:
            cols["is_remote"] = (flags & opt["remote_flag"]) != 0
        cols["dlc"] = dlc
        cols["data"] = _sliced_binary(payload, dlc)
        self.sink.write(self.name, self.table, pa.table(cols))


def _sliced_binary(payload: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Row i's first lengths[i] bytes of an (n, w) byte matrix as a binary array, vectorized."""
    keep = np.arange(payload.shape[1])[None, :] < lengths[:, None]
    values = np.ascontiguousarray(payload[keep])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(values)]
    )


class _LidarJob(_StructJob):
    """One lidar_scans row per sample and its point array as lidar_points rows.

    The table pair is two declared streams of the same name: lidar_scans counts samples,
    lidar_points counts the points of the samples that decoded (a quarantined sample's points
    are inside its quarantined record). Scan ids come from the sink (unique in the drive); the
    payload's own frame counter, if mapped, is `sensor_scan_id`. A point's time is its scan's
    plus `time_offset_ns`; without a per-point time in the payload `end_time_ns` equals the
    start and the offset is null.
    """

    def info(self, batch: _Batch | None) -> list[StreamInfo]:
        scans = super().info(batch)[0]
        points = StreamInfo(self.name, "lidar_points", self.source, self.source_type(), scans.topic)
        return [scans, points]

    def process(self, batch: _Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        idx, table = self.drop_bad_time(batch, idx, table)
        idx, table = self.drop_unfit(batch, idx, table, self.unfit_points(table))
        cols = self.base_columns(batch, idx, table)
        scan_id = self.sink.scan_ids(len(idx))
        if self.rule.sensor_scan_id:
            cols["sensor_scan_id"] = _column(table, self.rule.sensor_scan_id)
        points = _column(table, self.rule.points_element)
        counts = np.diff(np.asarray(points.offsets)).astype(np.int64)
        cols.update(
            scan_id=scan_id,
            end_time_ns=cols["time_ns"],
            point_count=counts,
            cut=pa.repeat(pa.scalar("frame"), len(idx)),
        )
        self.sink.write(self.name, self.table, pa.table(cols))
        flat = points.flatten()
        n = int(counts.sum())
        self.sink.read(self.name, "lidar_points", n)
        pcols: dict = {"scan_id": np.repeat(scan_id, counts)}
        flat_table = pa.table({f.name: flat.field(f.name) for f in flat.type})
        schema = NORMALIZED["lidar_points"].schema
        for fm in self.rule.point_fields:
            pcols[fm.column] = _mapped(flat_table, fm, schema.field(fm.column).type)
        self.sink.write(self.name, "lidar_points", pa.table(pcols))

    def unfit_points(self, table: pa.Table) -> np.ndarray:
        """Per scan, its first point whose mapped value its integer column cannot hold (the
        scan's whole record goes to quarantine: a point is not a record), or None."""
        reasons = np.full(table.num_rows, None, dtype=object)
        schema = NORMALIZED["lidar_points"].schema
        fields = self.rule.point_fields
        if not any(pa.types.is_integer(schema.field(f.column).type) for f in fields):
            return reasons
        points = _column(table, self.rule.points_element)
        flat = points.flatten()
        flat_table = pa.table({f.name: flat.field(f.name) for f in flat.type})
        per_point = _unfit(flat_table, fields, schema)
        bad = np.flatnonzero(per_point != None)  # noqa: E711
        if len(bad):
            counts = np.diff(np.asarray(points.offsets)).astype(np.int64)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            owner = np.repeat(np.arange(table.num_rows), counts)[bad]
            scans, first = np.unique(owner, return_index=True)
            reasons[scans] = [
                f"point {int(bad[i] - starts[s])}: {per_point[bad[i]]}"
                for s, i in zip(scans.tolist(), first.tolist(), strict=True)
            ]
        return reasons


class _Video(_Job):
    """Compressed video: each sample is one access unit, kept as is. `is_keyframe` = the AU
    holds an IDR slice (NAL scan over the whole batch with numpy); width/height from the
    rule, the stream-type properties, or else the first SPS of the stream."""

    def __init__(self, stream, name, rel, sink, rule: Rule, props: dict[str, str]) -> None:
        super().__init__(stream, name, rel, sink)
        self.rule = rule
        self.table = rule.table
        self.width = rule.width or _int_prop(props, "width", "pixel_width")
        self.height = rule.height or _int_prop(props, "height", "pixel_height")
        self.fps = _float_prop(props, "fps", "framerate")

    def info(self, batch: _Batch | None) -> list[StreamInfo]:
        rate = self.rule.expected_rate_hz or self.fps or _measured_rate(batch)
        topic = self.rule.topic.format(stream=self.stream.name) if self.rule.topic else None
        return [StreamInfo(self.name, self.table, self.source, self.source_type(), topic, rate)]

    def process(self, batch: _Batch) -> None:
        buf, offsets, lengths = batch.buffer()
        unsized = self.width is None or self.height is None
        key, size = access_units(buf, offsets, lengths, size=unsized)
        if size is not None:
            self.width, self.height = size
        n = batch.n
        if len(buf) > np.iinfo(np.int32).max:  # pa.binary() offsets are int32
            raise BridgeLakeError(f"{self.rel}: video batch of {len(buf)} bytes exceeds 2 GiB")
        ends = np.concatenate([offsets, [len(buf)]]).astype(np.int32)
        data = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(ends), pa.py_buffer(buf)])
        cols = {
            "time_ns": batch.time_ns,
            "frame_id": pa.repeat(pa.scalar(self.rule.frame_id or self.stream.name), n),
            "camera": pa.repeat(pa.scalar(self.stream.name), n),
            "width": pa.repeat(pa.scalar(self.width, pa.int32()), n),
            "height": pa.repeat(pa.scalar(self.height, pa.int32()), n),
            "encoding": pa.repeat(pa.scalar(self.rule.encoding), n),
            "is_keyframe": key,
            "data": data,
        }
        self.sink.write(self.name, self.table, pa.table(cols))


def _int_prop(props: dict[str, str], *names: str) -> int | None:
    for n in names:
        try:
            return int(props[n], 0)
        except (KeyError, ValueError):
            continue
    return None


def _float_prop(props: dict[str, str], *names: str) -> float | None:
    for n in names:
        try:
            value = float(props[n])
        except (KeyError, ValueError):
            continue
        if value > 0 and math.isfinite(value):
            return value
    return None


__all__ = ["find_recordings", "group_parts", "normalize_adtf"]

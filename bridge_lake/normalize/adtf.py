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
import gc
import itertools
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from bridge_lake.formats.adtf import Sample, Stream, open_dat, recording_parts, sniff
from bridge_lake.formats.adtf.ddl import DDL
from bridge_lake.formats.adtf.errors import AdtfError
from bridge_lake.normalize.adtf_catalogs import CatalogPlaces
from bridge_lake.normalize.adtf_clock import RecordingClock, recording_clocks
from bridge_lake.normalize.adtf_generic import (
    substream_streams,
    with_plain_type,
)
from bridge_lake.normalize.adtf_jobs import (
    RELEASE_BYTES,
    UNMAPPED_TABLE,
    GenericJob,
    Job,
    PayloadJob,
    StructJob,
    Substreams,
    path_parts,
)
from bridge_lake.normalize.adtf_mapping import Mapping, Rule, resolve_mapping
from bridge_lake.normalize.adtf_recovery import recover_cut_recordings
from bridge_lake.normalize.adtf_sensor_jobs import CanJob, LidarJob, VideoJob
from bridge_lake.normalize.sink import SOURCE_SEPARATOR, DriveSink, StreamInfo

CHECK_EVERY = 4096
"""Samples dispatched between two looks at the batch sizes (fewer when they span more than a
quarter of RELEASE_BYTES of the file)."""


def normalize_adtf(
    drive_dir: Path,
    sink: DriveSink,
    mapping: Mapping | None = None,
    *,
    user_mapping: str | Path | None = None,
    files: list[Path] | None = None,
    catalogs: CatalogPlaces | None = None,
) -> None:
    """Normalize every ADTF recording under `drive_dir` into `sink` (the NORMALIZERS entry).

    `mapping` is used as given; by default the layered mapping of `resolve_mapping`: the
    drive's own file (drive.yaml `mapping`), the user's (`user_mapping`, else
    `$BRIDGE_LAKE_ADTF_MAPPING`), the packaged `adtf_mapping.yaml`. `files` limits the run to
    these recordings (inside `drive_dir`). The parts of a split recording are read as one
    recording (`group_parts`); each recording is put on the master clock (`adtf_clock`).
    A recording cut short is recovered first (`adtf_recovery`), its stream names and types
    from a finished recording of the vehicle (`catalogs`: where to look beyond the drive).
    """
    root = Path(drive_dir)
    mapping = resolve_mapping(root, user=user_mapping) if mapping is None else mapping
    used: set[str] = set()
    paths = find_recordings(root) if files is None else [Path(p) for p in files]
    recordings = group_parts(paths)
    with tempfile.TemporaryDirectory(prefix="bridge_lake_recovered") as work:
        recovered = recover_cut_recordings(root, paths, sink, Path(work), catalogs)
        # a cut file is read as its rebuilt copy, its clock too (the cut file has no index)
        copies = [[recovered.get(p, p) for p in parts] for parts in recordings]
        for parts, read, clock_ in zip(recordings, copies, recording_clocks(copies), strict=True):
            with _gc_paused():
                rels = [p.relative_to(root).as_posix() for p in parts]
                _normalize_recording(read, rels, sink, mapping, used, clock_)


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
    jobs: dict[str, Job | Substreams] = {}
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
    jobs: dict[str, Job | Substreams],
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
        here: dict[int, Job | Substreams] = {}

        def job_for(stream: Stream) -> Job | Substreams:
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


def stream_job(
    stream: Stream, name: str, rel: str, sink: DriveSink, mapping: Mapping, clock_: RecordingClock
) -> Job | Substreams:
    """The job `normalize_adtf` makes for a stream (its mapping rule's, else a generic one),
    for a caller that feeds samples itself: the live bridge appends to `job.pending`, calls
    `flush()` after each poll and `finish()` at the end, so its rows are the lake's rows."""
    job = _make_job(stream, name, rel, sink, mapping, np.zeros(0, np.uint8))
    _set_part(job, rel, rel, clock_)
    return job


def _set_part(job: Job | Substreams, rel: str, source: str, clock_: RecordingClock) -> None:
    """Point a job (and a substream job's children) at the part being read and its clock."""
    if isinstance(job, Substreams):
        for child in job.jobs.values():
            _set_part(child, rel, source, clock_)
        return
    job.rel, job.source, job.clock = rel, source, clock_


def _make_job(
    stream: Stream, name: str, rel: str, sink: DriveSink, mapping: Mapping, data: np.ndarray
) -> Job | Substreams:
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
            return Substreams(
                {
                    sub_id: _make_job(
                        sub, f"{name}/{sub.name.rsplit('/', 1)[1]}", rel, sink, mapping, data
                    )
                    for sub_id, sub in subs.items()
                },
                lambda sub_id: PayloadJob(
                    stream,
                    f"{name}/#{sub_id}",
                    rel,
                    sink,
                    f"substream {sub_id} not in the stream type",
                ),
            )
        return _generic(stream, name, rel, sink, "no mapping rule")
    rule = placed.rule
    job: Job
    if rule.decoder == "video":
        job = VideoJob(stream, name, rel, sink, rule, props)
    else:
        problem = _check_rule(stream, rule)
        if problem is not None:
            return _generic(stream, name, rel, sink, f"rule {rule.name} cannot apply: {problem}")
        cls = {"struct": StructJob, "can": CanJob, "lidar": LidarJob}[rule.decoder]
        job = cls(stream, name, rel, sink, rule, data)
    job.mapping = placed.describe()
    return job


def _generic(stream: Stream, name: str, rel: str, sink: DriveSink, why: str) -> Job:
    if stream.ddl is not None and stream.ddl_struct is not None:
        return GenericJob(stream, name, rel, sink, why)
    return PayloadJob(stream, name, rel, sink, why)


def _check_path(ddl: DDL, struct: str, path: str) -> str | None:
    """None if `path` names a scalar in `struct` (or an array/struct where `whole` allows)."""
    current: str | None = struct
    parts = path_parts(path)
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


__all__ = ["find_recordings", "group_parts", "normalize_adtf", "stream_job"]

"""Export one drive of the lake to MCAP, a ROS 2 bag or a ROS 1 bag.

The mapping (`export.mapping`) says which rows become which topics; every (rule, stream,
split value) is a lane (`export.source`), read from the lake in time order in bounded
batches and serialized in bulk; a k-way merge over the lanes' batches hands the writer one
time-ordered run after another, so a drive never has to fit in memory. The file is written
under a temporary name beside the target and renamed when complete.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from bridge_lake.clock import ns_to_ros
from bridge_lake.export.context import DriveContext
from bridge_lake.export.generic_types import lane_type, plan_types
from bridge_lake.export.kinds import GENERATED as GENERATED_TYPES
from bridge_lake.export.kinds import KINDS
from bridge_lake.export.kinds.json_rows import JSON_TYPE, json_schema
from bridge_lake.export.mapping import (
    Mapping,
    TopicRule,
)
from bridge_lake.export.messages import ExportTypes, Serialized
from bridge_lake.export.names import output_format
from bridge_lake.export.prefetch import prefetch
from bridge_lake.export.source import Batch, Builder, ExportError, Lane, dataset, lane_filter
from bridge_lake.export.trim import ALWAYS, Window, select_topics, window, windows
from bridge_lake.export.writers import (
    COMPRESSIONS,
    DEFAULT_COMPRESSION,
    Bag1Output,
    Bag2Output,
    McapOutput,
    Output,
)
from bridge_lake.lake import Lake
from bridge_lake.lake.storage import replace_local
from bridge_lake.memory import reuse_large_frees

FORMATS = ("mcap", "bag2", "bag1")
ENCODINGS = ("ros2", "ros1", "protobuf")


@dataclass(frozen=True)
class ExportRequest:
    format: str = "mcap"
    encoding: str | None = None
    """ros2 | ros1 | protobuf (MCAP only; bag1 is ros1 and bag2 ros2 by nature)."""
    topics: Sequence[str] | None = None
    start: str | float | int | None = None
    end: str | float | int | None = None
    spans: Sequence[tuple[int, int]] | None = None
    """absolute [start, end) ns windows (scene sets); overrides start/end."""
    compression: str | None = None
    chunk_size: int = 4 << 20
    storage: str = "mcap"
    """bag2 storage: mcap | sqlite3."""
    mapping: str | os.PathLike | None = None
    time_base: str = "master"
    """master: log times and stamps on the master clock; zero: shifted to start at 0."""
    force: bool = False
    skip_unsupported: bool = False
    """write the topics the format can carry and list the others (`left_out`) instead of
    failing; without it an export that cannot hold every topic fails and names them."""


@dataclass
class TopicStat:
    topic: str
    type: str
    frame_id: str
    messages: int = 0
    expected: int = 0
    """source rows in the export's windows, counted in the lake before writing."""
    table: str = ""
    streams: list[str] = field(default_factory=list)
    """the lake streams feeding the topic"""
    first_ns: int | None = None
    last_ns: int | None = None


@dataclass
class ExportResult:
    path: Path
    format: str
    encoding: str
    drive: str
    mapping: str
    windows: list[Window] | None
    shift_ns: int
    topics: dict[str, TopicStat] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)
    """topics the format cannot carry (JSON topics in bags), written only with
    skip_unsupported"""
    left_out_rows: dict[str, int] = field(default_factory=dict)
    """the lake rows of each left-out topic (the health check counts them as missing)"""
    warnings: list[str] = field(default_factory=list)
    """what went out other than asked, e.g. a stream whose DDL struct has no ROS type"""
    bytes: int = 0
    seconds: float = 0.0
    mapping_ref: dict[str, Any] = field(default_factory=dict)
    """the mapping as written into the output (`Mapping.reference`: file name, sha256,
    shipped), not its path, so the bytes do not depend on where the file lay"""

    @property
    def messages(self) -> int:
        return sum(t.messages for t in self.topics.values())

    def summary(self) -> dict:
        d = dataclasses.asdict(self)
        d["path"] = str(self.path)
        d["windows"] = [dataclasses.asdict(w) for w in self.windows or []]
        return d


Progress = Callable[[int, int, int], None]
"""Called after each written batch with (messages so far, message bytes so far, messages in
all)."""


def drive_span(lake: Lake, drive: str) -> tuple[int, int]:
    """First and last master time of the drive's streams."""
    return DriveContext.load(lake, drive).span


def plan_lanes(
    ctx: DriveContext,
    mapping: Mapping,
    spans: list[Window] | None,
    topics: Sequence[str] | None = None,
) -> list[Lane]:
    """Every lane of every rule that has rows in the drive, with its row count and frame.
    Rules whose topics no glob of `topics` can match are not looked at (their tables need
    not exist)."""
    lanes: list[Lane] = []
    lake, drive, static = ctx.lake, ctx.drive, ctx.static_frames
    for given in mapping.topics:
        if topics and not _may_match(given, topics):
            continue
        for rule in _concrete(lake, drive, given):
            lanes += _rule_lanes(lake, drive, rule, spans, static)
    return lanes


def _concrete(lake: Lake, drive: str, rule: TopicRule) -> list[TopicRule]:
    """The rule once per lake table it names: a ddl or json rule's table may be a glob
    (`normalized/ddl_*`), and such a rule without rows in the drive has no lane."""
    if rule.type not in GENERATED_TYPES:
        return [rule]
    layer, pattern = rule.table.split("/")
    return [
        dataclasses.replace(rule, table=f"{layer}/{t}")
        for t in lake.tables(layer)
        if fnmatch.fnmatchcase(t, pattern) and lake.has_partition(layer, t, drive)
    ]


def _rule_lanes(
    lake: Lake, drive: str, rule: TopicRule, spans: list[Window] | None, static: set[str]
) -> list[Lane]:
    """The lanes of one concrete rule: one per stream / split value with rows."""
    lanes: list[Lane] = []
    layer, table = rule.table.split("/")
    if rule.table in TRANSFORM_TABLES and not _has_rows(lake, layer, table, drive):
        return []  # no rig: no /tf_static, no /tf; messages stay in their sensor frames
    data = dataset(lake, layer, table, drive)
    keys = [c for c in ("stream", *rule.where, rule.split_by) if c and c in data.schema.names]
    keys = list(dict.fromkeys(keys))
    combos = [{}]
    if keys:
        combos = data.to_table(columns=keys).group_by(keys).aggregate([]).to_pylist()
    for combo in sorted(combos, key=lambda c: [str(c[k]) for k in keys]):
        if not all(rule.selects(k, v) for k, v in combo.items()):
            continue
        selection = {k: v for k, v in combo.items() if k in ("stream", rule.split_by)}
        lane = Lane(rule.topic_for(combo.get(rule.split_by)), rule, "", selection)
        _describe(lane, data, spans, static)
        lanes.append(lane)
    return lanes


def _may_match(rule: TopicRule, patterns: Sequence[str]) -> bool:
    """Whether some topic of the rule (any split value) could match one of the globs."""
    if rule.topic in ALWAYS:
        return True
    template = rule.topic.replace("{" + rule.split_by + "}", "*") if rule.split_by else rule.topic
    return any(
        fnmatch.fnmatchcase(template, p) or fnmatch.fnmatchcase(p, template) for p in patterns
    )


TRANSFORM_TABLES = ("calibrated/tf_static", "calibrated/poses")
"""Tables a drive without a rig has empty (or, calibrated by an older version, not at all):
their topics are left out instead of failing the export."""


def _has_rows(lake: Lake, layer: str, table: str, drive: str) -> bool:
    if not lake.has_partition(layer, table, drive):
        return False
    return dataset(lake, layer, table, drive).count_rows() > 0


def _describe(lane: Lane, data, spans: list[Window] | None, static: set[str]) -> None:
    rule = lane.rule
    if rule.table == "calibrated/tf_static":
        lane.rows = 1 if data.count_rows() else 0
        lane.frame_id = ""
        return
    flt = lane_filter(lane.selection, spans)
    lane.rows = data.count_rows(filter=flt) if flt is not None else data.count_rows()
    cols = [c for c in ("frame_id", "child_frame_id") if c in data.schema.names]
    first = data.head(1, columns=cols, filter=lane_filter(lane.selection, None)).to_pylist()
    row = first[0] if first else {}
    frame = rule.frame_id or row.get("frame_id") or ""
    if rule.table == "normalized/camera_frames" and f"{frame}_optical" in static:
        frame = f"{frame}_optical"  # images are in the camera's optical frame (REP-103)
    if rule.options.get("points") == "base_link":
        frame = "base_link"
    lane.frame_id = frame
    lane.extra["child_frame_id"] = row.get("child_frame_id") or "base_link"


def _tf_windows(lake: Lake, drive: str, lane: Lane, spans: list[Window]) -> list[Window]:
    """Each window widened back to the latest pose before it: the last /tf comes along."""
    data = dataset(lake, *lane.rule.table.split("/"), drive)
    out = []
    for w in spans:
        before = data.to_table(columns=["time_ns"], filter=pc.field("time_ns") < w.start_ns)
        last = pc.max(before.column("time_ns")).as_py() if before.num_rows else None
        out.append(Window(last if last is not None else w.start_ns, w.end_ns))
    return out


def _slice(m: Serialized, a: int, b: int) -> Serialized:
    off = m.offsets[a : b + 1]
    return Serialized(m.data[off[0] : off[-1]], off - off[0])


def merge(
    sources: list[tuple[int, Iterator[Batch]]],
) -> Iterator[tuple[np.ndarray, np.ndarray, Serialized]]:
    """K-way merge of time-ordered batches by time (ties: source order), batch-wise: emit
    everything up to the earliest last-time among the heads, then refill. Memory is one
    batch per source."""
    heads: list[list] = []
    for order, (channel, it) in enumerate(sources):
        for batch in it:
            if len(batch.time_ns):
                heads.append([order, channel, batch, it])
                break
    while heads:
        horizon = min(int(h[2].time_ns[-1]) for h in heads)
        times, chans, parts, ranks = [], [], [], []
        for h in heads:
            order, channel, batch, _ = h
            k = int(np.searchsorted(batch.time_ns, horizon, side="right"))
            if k == 0:
                continue
            times.append(batch.time_ns[:k])
            chans.append(np.full(k, channel, np.uint16))
            ranks.append(np.full(k, order, np.int32))
            parts.append(_slice(batch.messages, 0, k))
            h[2] = Batch(batch.time_ns[k:], _slice(batch.messages, k, len(batch.time_ns)))
        t = np.concatenate(times)
        c = np.concatenate(chans)
        m = parts[0] if len(parts) == 1 else Serialized.concat(parts)  # one lane: no copy
        if len(parts) > 1:
            idx = np.lexsort((np.concatenate(ranks), t))
            t, c, m = t[idx], c[idx], m.take(idx)
        yield c, t, m
        refreshed = []
        for h in heads:
            if len(h[2].time_ns):
                refreshed.append(h)
                continue
            for batch in h[3]:
                if len(batch.time_ns):
                    h[2] = batch
                    refreshed.append(h)
                    break
        heads = refreshed


def _open_output(
    fmt: str,
    path: Path,
    encoding: str,
    request: ExportRequest,
    compression: str,
    types: ExportTypes,
) -> Output:
    if fmt == "mcap":
        return McapOutput(
            path,
            encoding=encoding,
            compression=compression,
            chunk_size=request.chunk_size,
            types=types,
        )
    if fmt == "bag2":
        return Bag2Output(path, storage=request.storage, compression=compression, types=types)
    return Bag1Output(path, compression=compression, chunk_size=request.chunk_size, types=types)


def _supported(lane: Lane, fmt: str) -> bool:
    """Whether a format can carry the lane's messages (JSON needs MCAP's schema records)."""
    return fmt == "mcap" or KINDS[lane.rule.type].in_bags


def _first_lanes(lanes: list[Lane]) -> dict[str, Lane]:
    out: dict[str, Lane] = {}
    for lane in lanes:
        out.setdefault(lane.topic, lane)
    return out


def _check_topic_types(lanes: list[Lane]) -> None:
    """One message type per topic: a rule without split_by over streams of different
    structs would mix types on one topic."""
    seen: dict[str, str] = {}
    for lane in lanes:
        typename = lane_type(lane)
        if seen.setdefault(lane.topic, typename) != typename:
            raise ExportError(
                f"topic {lane.topic} would carry both {seen[lane.topic]} and {typename} "
                f"(streams of different structs); split the rule by stream"
            )


def _check_request(r: ExportRequest) -> tuple[str, str]:
    if r.format not in FORMATS:
        raise ExportError(f"unknown format {r.format!r}; use one of {', '.join(FORMATS)}")
    encoding = r.encoding or {"bag1": "ros1", "bag2": "ros2", "mcap": "ros2"}[r.format]
    if encoding not in ENCODINGS:
        raise ExportError(f"unknown encoding {encoding!r}; use one of {', '.join(ENCODINGS)}")
    if (r.format == "bag1" and encoding != "ros1") or (r.format == "bag2" and encoding != "ros2"):
        raise ExportError(
            f"a {r.format} holds {('ros1' if r.format == 'bag1' else 'ros2')} messages"
        )
    compression = r.compression or DEFAULT_COMPRESSION[r.format]
    if compression not in COMPRESSIONS[r.format]:
        known = ", ".join(COMPRESSIONS[r.format])
        raise ExportError(f"{r.format} compression {compression!r} unknown; use {known}")
    if r.time_base not in ("master", "zero"):
        raise ExportError("time base must be master or zero")
    if r.storage not in ("mcap", "sqlite3"):
        raise ExportError("bag2 storage must be mcap or sqlite3")
    return encoding, compression


@dataclass
class StreamTopic:
    """One topic of a drive stream, in channel order."""

    topic: str
    type: str
    latched: bool
    json_title: str | None = None
    json_schema: bytes | None = None
    """JSON topics (generic ADTF tables): the table and its JSON Schema"""


@dataclass
class DriveStream:
    """A drive's export before any file: its topics (index = channel), lanes, windows, time
    shift and generated types; `messages()` is the time-ordered merge of every lane:
    (channel indexes, log times, Serialized) batch by batch. `export_drive` writes it;
    `bridge-lake play --drive` serves it."""

    lake: Lake
    drive: str
    context: DriveContext
    mapping: Mapping
    encoding: str
    spans: list[Window] | None
    shift: int
    start_ns: int
    end_ns: int
    topics: list[StreamTopic]
    lanes: list[Lane]
    lane_windows: dict[int, list[Window] | None]
    left_out: dict[str, int]
    """topics the format cannot carry (skipped with skip_unsupported) → their rows"""
    types: ExportTypes
    warnings: list[str]

    def messages(self) -> Iterator[tuple[np.ndarray, np.ndarray, Serialized]]:
        sources = []
        index = {t.topic: i for i, t in enumerate(self.topics)}
        for lane in self.lanes:
            builder = _builder(self.lake, self.drive, lane, self.encoding, self.shift)
            batches = builder.batches(self.lane_windows[id(lane)])
            if KINDS[lane.rule.type].prefetch:
                batches = prefetch(batches)
            sources.append((index[lane.topic], batches))
        return merge(sources)


def plan_stream(
    lake: Lake,
    drive: str,
    request: ExportRequest = ExportRequest(),
    context: DriveContext | None = None,
) -> DriveStream:
    """What `request` exports of `drive`: topics, lanes, windows and types (DriveStream).
    `context`: the drive's lake facts when the caller has them (several formats or scenes of
    one drive), else read here."""
    encoding, _ = _check_request(request)
    ctx = context or DriveContext.load(lake, drive)
    mapping = ctx.mapping(request.mapping)
    first, last = ctx.span
    if request.spans is not None:
        spans = windows(request.spans, first, last)
    else:
        spans = window(request.start, request.end, first, last)
    lanes = plan_lanes(ctx, mapping, spans, request.topics)
    chosen = set(select_topics(list(dict.fromkeys(x.topic for x in lanes)), request.topics))
    lanes = [lane for lane in lanes if lane.topic in chosen]
    plan = plan_types(ctx, lanes)
    _check_topic_types(lanes)
    unsupported = [lane for lane in lanes if not _supported(lane, request.format)]
    left_out: dict[str, int] = {}
    for lane in unsupported:
        left_out[lane.topic] = left_out.get(lane.topic, 0) + lane.rows
    if left_out and not request.skip_unsupported:
        raise ExportError(
            f"a {request.format} cannot carry {len(left_out)} topic(s) of drive {drive}: "
            + ", ".join(f"{t} ({lane_type(x)})" for t, x in _first_lanes(unsupported).items())
            + "; export to MCAP, map them to another type, or pass --skip-unsupported to "
            "write the rest without them"
        )
    lanes = [lane for lane in lanes if lane.topic not in left_out]
    start_ns = spans[0].start_ns if spans else first
    end_ns = spans[-1].end_ns - 1 if spans else last
    lane_windows: dict[int, list[Window] | None] = {}
    for lane in lanes:
        lane_windows[id(lane)] = spans
        if (
            lane.rule.table == "calibrated/poses"
            and lane.rule.type == "tf2_msgs/msg/TFMessage"
            and spans
        ):
            lane_windows[id(lane)] = _tf_windows(lake, drive, lane, spans)
        if lane.rule.table == "calibrated/tf_static":
            lane.extra["stamp_ns"] = start_ns
    shift = 0
    if request.time_base == "zero":
        shift = min([start_ns] + [w[0].start_ns for w in lane_windows.values() if w])
    topics: list[StreamTopic] = []
    seen: set[str] = set()
    for lane in lanes:
        if lane.topic in seen:
            continue
        seen.add(lane.topic)
        latched = lane.rule.table == "calibrated/tf_static"
        if lane.rule.type == JSON_TYPE:
            title = lane.rule.table.split("/")[1]
            schema = json_schema(dataset(lake, "normalized", title, drive).schema, title)
            topics.append(StreamTopic(lane.topic, lane_type(lane), latched, title, schema))
        else:
            topics.append(StreamTopic(lane.topic, lane_type(lane), latched))
    return DriveStream(
        lake,
        drive,
        ctx,
        mapping,
        encoding,
        spans,
        shift,
        start_ns - shift,
        end_ns - shift,
        topics,
        lanes,
        lane_windows,
        left_out,
        plan.types,
        plan.warnings,
    )


def export_drive(
    lake: Lake,
    drive: str,
    out: str | os.PathLike,
    request: ExportRequest = ExportRequest(),
    *,
    progress: Progress | None = None,
    context: DriveContext | None = None,
) -> ExportResult:
    """Write one drive (or its windows and topics) to `out`; see the module docstring
    (`context`: as `plan_stream`)."""
    t_start = time.perf_counter()
    reuse_large_frees()
    encoding, compression = _check_request(request)
    out = Path(out)
    output_format(out, request.format)  # a .bag or .mcap name must not say otherwise
    if out.exists() and not request.force:
        raise ExportError(f"{out} exists; pass --force to overwrite it")
    if not out.parent.is_dir():
        raise ExportError(f"output folder {out.parent} does not exist")
    stream = plan_stream(lake, drive, request, context)
    # written under its own name in a hidden folder beside `out`: a ROS 2 bag names its
    # storage file and metadata after its folder, so the export's bytes never hold a temp name
    staging = out.parent / f".{out.name}.{secrets.token_hex(4)}.partial"
    staging.mkdir()
    tmp = staging / out.name
    output = _open_output(request.format, tmp, encoding, request, compression, stream.types)
    result = ExportResult(
        out, request.format, encoding, drive, stream.mapping.path, stream.spans, stream.shift
    )
    result.mapping_ref = stream.mapping.reference()
    result.left_out = sorted(stream.left_out)
    result.left_out_rows = stream.left_out
    result.warnings = stream.warnings
    try:
        ids = np.zeros(len(stream.topics), np.uint16)
        for i, t in enumerate(stream.topics):
            if t.json_title is not None:
                ids[i] = output.add_json_topic(t.topic, t.json_title, t.json_schema)
            else:
                ids[i] = output.add_topic(t.topic, t.type, latched=t.latched)
        for lane in stream.lanes:
            if lane.topic not in result.topics:
                result.topics[lane.topic] = TopicStat(
                    lane.topic, lane_type(lane), lane.frame_id, table=lane.rule.table
                )
            stat = result.topics[lane.topic]
            stat.expected += lane.rows
            if "stream" in lane.selection and lane.selection["stream"] not in stat.streams:
                stat.streams.append(str(lane.selection["stream"]))
        by_channel = {i: t.topic for i, t in enumerate(stream.topics)}
        total = sum(t.expected for t in result.topics.values())
        written = nbytes = 0
        for c, t, m in stream.messages():
            output.write(ids[c], t, m)
            for ch in np.unique(c).tolist():
                sel = t[c == ch]
                stat = result.topics[by_channel[ch]]
                stat.messages += len(sel)
                stat.first_ns = int(sel[0]) if stat.first_ns is None else stat.first_ns
                stat.last_ns = int(sel[-1])
            written += len(t)
            nbytes += int(m.offsets[-1])
            if progress is not None:
                progress(written, nbytes, total)
        _attach(output, stream.context, result)
        output.close()
    except BaseException as exc:
        try:
            output.abort()
        finally:
            _remove(staging)
        if isinstance(exc, OSError):
            raise ExportError(f"writing {out} failed: {exc.strerror or exc}") from exc
        raise
    replace_local(str(tmp), str(out))  # the previous export stays until this one replaces it
    _remove(staging)
    result.bytes = _size(out)
    result.seconds = time.perf_counter() - t_start
    return result


def _builder(lake: Lake, drive: str, lane: Lane, encoding: str, shift: int) -> Builder:
    return KINDS[lane.rule.type].open(lake, drive, lane, encoding, shift)


def _attach(output: Output, ctx: DriveContext, result: ExportResult) -> None:
    """drive.yaml as metadata, the rig calibration as an attachment, and what was exported."""
    output.add_metadata("drive", {k: _text(v) for k, v in ctx.meta.items() if v is not None})
    output.add_metadata(
        "bridge_lake.export",
        {
            "drive": ctx.drive,
            **{
                f"mapping_{k}": str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in result.mapping_ref.items()
            },
            "windows": json.dumps([[w.start_ns, w.end_ns] for w in result.windows or []]),
            "time_shift_ns": str(result.shift_ns),
        },
    )
    tf = ctx.tf_static
    if tf is not None and tf.num_rows:  # a drive without a rig has no calibration to attach
        rig = tf.column("rig_file")[0].as_py()
        if rig and Path(rig).is_file():
            output.add_attachment(Path(rig).name, "application/yaml", Path(rig).read_bytes())
        else:
            rows = json.dumps(tf.drop_columns(["rig_valid_from"]).to_pylist(), default=str)
            output.add_attachment("tf_static.json", "application/json", rows.encode())


def _text(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v, default=str)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def export_tum(
    lake: Lake, drive: str, out_dir: str | os.PathLike, *, force: bool = False
) -> list[Path]:
    """TUM trajectory files (`timestamp tx ty tz qx qy qz qw`, seconds): poses.tum from
    calibrated/poses (base_link in the map) and, where the drive has one, ground_truth.tum
    (the source's ground truth in its own world frame, as the dataset gives it)."""
    from bridge_lake.geometry import rpy_to_quaternion

    DriveContext.load(lake, drive)  # the drive must be in the lake
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    poses = lake.read_partition("calibrated", "poses", drive)
    cols = {c: poses.column(c).to_numpy() for c in ("x_m", "y_m", "z_m", "qx", "qy", "qz", "qw")}
    written.append(_tum(out_dir / "poses.tum", poses.column("time_ns").to_numpy(), cols, force))
    gt = lake.read_partition("normalized", "ground_truth", drive)
    gt = gt.filter(pc.is_finite(gt.column("x_m")).fill_null(False))
    if gt.num_rows:
        r, p, y = (gt.column(c).to_numpy() for c in ("roll_rad", "pitch_rad", "yaw_rad"))
        q = rpy_to_quaternion(r, p, y)
        cols = {c: gt.column(c).to_numpy() for c in ("x_m", "y_m", "z_m")}
        cols |= {k: q[:, i] for i, k in enumerate(("qx", "qy", "qz", "qw"))}
        written.append(
            _tum(out_dir / "ground_truth.tum", gt.column("time_ns").to_numpy(), cols, force)
        )
    return written


def _tum(path: Path, time_ns: np.ndarray, cols: dict, force: bool) -> Path:
    if path.exists() and not force:
        raise ExportError(f"{path} exists; pass --force to overwrite it")
    sec, ns = ns_to_ros(time_ns)
    lines = [
        f"{s}.{n:09d} {x:.6f} {y:.6f} {z:.6f} {a:.9f} {b:.9f} {c:.9f} {d:.9f}"
        for s, n, x, y, z, a, b, c, d in zip(
            sec.tolist(),
            ns.tolist(),
            *(cols[k].tolist() for k in ("x_m", "y_m", "z_m", "qx", "qy", "qz", "qw")),
            strict=True,
        )
    ]
    # a new name of our own (O_EXCL): a fixed one could be a planted symlink to write through
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("# timestamp tx ty tz qx qy qz qw\n" + "\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


__all__ = [
    "DriveStream",
    "ExportRequest",
    "ExportResult",
    "StreamTopic",
    "export_drive",
    "export_tum",
    "merge",
    "plan_lanes",
    "plan_stream",
]

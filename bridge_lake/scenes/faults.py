"""Fault-injected variants of a scene MCAP, with the truth of every injected fault.

A validation team replays a scene into the stack under test and wants to know how it copes
with the faults real vehicles produce: messages dropped by an overloaded bus, a topic
delayed by a slow driver, black camera frames, a lidar that stops for a few seconds,
messages arriving out of order, a sensor clock that is off. This module makes such a
variant from a clean scene MCAP (read with the `mcap` reader, written with our
`McapWriter`), deterministically from a seed, and lists every affected message (topic,
index of the message in the clean scene's topic, original and new log time) so that a
replay test, and `scenes.replay`, knows exactly what to expect.

Faults are given in a compact form (`--inject`, one or comma separated) or in a YAML file
per scene set; both parse to `FaultSpec`:

    camera:drop=0.5%             drop 0.5 % of the messages (0.1-5 %; at least one)
    imu:delay=30ms               every message arrives 30 ms late (log time; stamps kept)
    camera:black=2               two black frames (raw images; also 1% or 500ms@1s)
    lidar:missing=2s@10s         no messages for 2 s from 10 s into the scene
                                 (without @: a seeded start)
    can:reorder=5@window=50ms    5 windows of 50 ms whose messages arrive permuted
                                 (log times keep their slots, so header stamps go back)
    *:clock_offset=+20ms         log times and header stamps shifted by +20 ms

The selector before the colon is a sensor kind (camera, lidar, imu, can, gnss/gps,
laser, odom, tf: every topic of its message types), `*` (every topic but /tf_static) or
a topic glob starting with `/`. Effects on one message compose in the order given.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import secrets
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bridge_lake.export.mcap_writer import McapWriter
from bridge_lake.formats.ros.files import RecordingError
from bridge_lake.formats.ros.readers import McapRecording, RosMessage, open_recording
from bridge_lake.formats.ros.stamps import definition_text, shift_stamps, stamp_positions
from bridge_lake.scenes.fault_specs import (
    DEFAULT_REORDER_WINDOW_NS,
    KINDS,
    SENSOR_TYPES,
    FaultError,
    FaultSpec,
    VariantSpec,
    check_variant_name,
    load_yaml,
    parse_compact,
    parse_duration,
    parse_yaml,
    specs_from_text,
)

STATIC_TOPICS = ("/tf_static",)
"""Never selected by `*` or a sensor kind: the latched transforms every replay needs."""
BLACKABLE = ("sensor_msgs/msg/Image",)
"""Raw pixels: zero bytes are black in every encoding the exports write (rgb8, bgr8, mono8)."""
FAULTS_METADATA = "bridge_lake.faults"


# --- reading a scene -------------------------------------------------------------------------


@dataclass
class TopicMessages:
    """One topic of an MCAP file, in file order."""

    topic: str
    channel_id: int
    type: str
    """ROS 2 style type name (pkg/msg/Type)"""
    encoding: str
    """message encoding: cdr | ros1 | protobuf | json"""
    definition: str
    """the schema's message definition (ros1msg / ros2msg text; "" for other encodings):
    where its header stamps are (`formats.ros.stamps`), generated types included"""
    log: np.ndarray
    publish: np.ndarray
    sequence: np.ndarray
    data: list[bytes] | None
    """payloads (`read_mcap`); None where they were not kept (`scan_mcap`)"""
    order: np.ndarray
    """position of each message in the file (over all topics)"""

    def __len__(self) -> int:
        return len(self.log)


@dataclass
class McapContent:
    """Everything of an MCAP file a variant copies: records by id, messages by topic."""

    profile: str
    library: str
    compression: str
    schemas: dict[int, Any]
    channels: dict[int, Any]
    metadata: list[tuple[str, dict[str, str]]]
    attachments: list[Any]
    topics: dict[str, TopicMessages]

    def window(self) -> tuple[int, int]:
        """The scene's [start, end) from the export's metadata, else the log time range."""
        for name, data in self.metadata:
            if name == "bridge_lake.export":
                spans = json.loads(data.get("windows") or "[]")
                shift = int(data.get("time_shift_ns") or 0)
                if spans:
                    return int(spans[0][0]) - shift, int(spans[-1][1]) - shift
        times = [t.log for t in self.topics.values() if len(t)]
        if not times:
            return 0, 0
        return int(min(t.min() for t in times)), int(max(t.max() for t in times)) + 1


def ros2_name(name: str) -> str:
    return name if "/msg/" in name or "/" not in name else name.replace("/", "/msg/", 1)


def schema_type(schema: Any) -> str:
    """A schema record's type in ROS 2 spelling, "" without a schema."""
    return ros2_name(schema.name) if schema else ""


def definition(schema: Any) -> str:
    """A schema record's ROS message definition, "" when it holds none."""
    return "" if schema is None else definition_text(schema.encoding, schema.data)


def read_mcap(path: str | os.PathLike) -> McapContent:
    """The whole file in memory, payloads included (what a variant copies), CRCs validated."""
    payloads: dict[int, list[bytes]] = {}
    content = scan_mcap(
        path, lambda channel, _schema, data: payloads.setdefault(channel.id, []).append(data)
    )
    for t in content.topics.values():
        t.data = payloads.get(t.channel_id, [])
    return content


def scan_mcap(
    path: str | os.PathLike, visit: Callable[[Any, str, bytes], None] | None = None
) -> McapContent:
    """Read `path` once, streaming in file order, one chunk in memory at a time, CRCs
    validated: `visit(channel, schema, payload)` sees every message's payload (schema: the
    MCAP record or None) and no payload is kept (each topic's `data` is None; `read_mcap`
    keeps them).
    Errors of the file are `FaultError`s naming it; `visit`'s own errors pass through."""
    path = Path(path)
    frame: dict[str, Any] = {}
    per: dict[int, dict[str, list[int]]] = {}
    for position, (channel, m) in enumerate(_stream(path, frame)):
        lists = per.get(channel.id)
        if lists is None:
            lists = per[channel.id] = {"log": [], "pub": [], "seq": [], "order": []}
        lists["log"].append(m.log_time)
        lists["pub"].append(m.publish_time)
        lists["seq"].append(m.sequence)
        lists["order"].append(position)
        if visit is not None:
            visit(channel, frame["summary"].schemas.get(channel.schema_id), m.data)
    summary = frame["summary"]
    compressions = sorted({c.compression or "none" for c in summary.chunk_indexes})
    topics = {}
    for cid, channel in sorted(summary.channels.items()):
        schema = summary.schemas.get(channel.schema_id)
        lists = per.get(cid, {})
        topics[channel.topic] = TopicMessages(
            channel.topic,
            cid,
            schema_type(schema),
            channel.message_encoding,
            definition(schema),
            np.array(lists.get("log", []), np.int64),
            np.array(lists.get("pub", []), np.int64),
            np.array(lists.get("seq", []), np.uint32),
            None,
            np.array(lists.get("order", []), np.int64),
        )
    header = frame["header"]
    return McapContent(
        header.profile,
        header.library,
        compressions[0] if compressions else "zstd",
        dict(summary.schemas),
        dict(summary.channels),
        frame["metadata"],
        frame["attachments"],
        topics,
    )


def _stream(path: Path, frame: dict[str, Any]) -> Iterator[tuple[Any, RosMessage]]:
    """(MCAP channel record, message) of `path` in file order (`formats.ros` reader: one
    chunk at a time, CRCs validated); header, summary, metadata and attachments into
    `frame`. The reader's errors become `FaultError`s naming the file; the caller's, raised
    between messages, never reach this generator."""
    try:
        with open_recording(path) as recording:
            if not isinstance(recording, McapRecording):
                raise FaultError(f"{path}: not a readable MCAP file: a {recording.kind}")
            frame["header"], frame["summary"] = recording.header, recording.summary
            if recording.summary is None or recording.header is None:
                missing = "summary section" if recording.header else "header record"
                raise FaultError(f"{path}: the MCAP has no {missing}")
            frame["metadata"] = recording.metadata()
            frame["attachments"] = recording.attachments()
            channels = recording.summary.channels
            for m in recording.messages():
                yield channels[m.channel.id], m
    except RecordingError as exc:
        raise FaultError(str(exc)) from exc


# --- raw images --------------------------------------------------------------------------------


def black_image(data: bytes, typename: str, encoding: str) -> bytes:
    """An Image message with every pixel byte zero (black in rgb8/bgr8/mono8...)."""
    if typename not in BLACKABLE:
        raise FaultError(f"black frames need raw images ({', '.join(BLACKABLE)}), not {typename}")
    from bridge_lake.export.messages import typestore

    ros = 2 if encoding == "cdr" else 1
    store = typestore(ros)
    if ros == 2:
        msg = store.deserialize_cdr(data, typename)
        msg.data = np.zeros_like(msg.data)
        return bytes(store.serialize_cdr(msg, typename))
    msg = store.deserialize_ros1(data, typename)
    msg.data = np.zeros_like(msg.data)
    return bytes(store.serialize_ros1(msg, typename))


def image_is_black(data: bytes, encoding: str) -> bool:
    """Whether an Image message's pixels are all zero; a frame that does not decode is not
    black (replay-check's data level reports it)."""
    from bridge_lake.export.messages import typestore

    store = typestore(2 if encoding == "cdr" else 1)
    decode = store.deserialize_cdr if encoding == "cdr" else store.deserialize_ros1
    try:
        pixels = decode(data, "sensor_msgs/msg/Image").data
    except Exception:  # rosbags raises its own errors, and struct/Index errors on bad data
        return False
    return bool(len(pixels)) and not np.any(pixels)


# --- injection -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InjectedFault:
    """One fault on one message: `index` is the message's position in its topic of the clean
    scene; times are log times before and after this fault (new_ns None: dropped)."""

    kind: str
    topic: str
    index: int
    orig_ns: int
    new_ns: int | None
    spec: str
    step: int = 0
    """position of the spec in the variant: effects on one message compose in this order"""


@dataclass
class InjectionResult:
    path: Path
    seed: int
    specs: list[str]
    faults: list[InjectedFault]
    skipped: list[str] = field(default_factory=list)
    """specs whose selector matched no topic (optional variants only)"""
    topics: dict[str, tuple[str, int, int | None, int | None]] = field(default_factory=dict)
    """topic → (type, messages written, first and last log time)"""
    bytes: int = 0

    def grouped(self) -> list[dict[str, Any]]:
        """The faults as the manifest lists them: one entry per (spec, topic), columns of
        message index, original and new log time."""
        groups: dict[tuple[int, str], dict[str, Any]] = {}
        for f in self.faults:
            g = groups.setdefault(
                (f.step, f.topic),
                {
                    "step": f.step,
                    "spec": f.spec,
                    "kind": f.kind,
                    "topic": f.topic,
                    "index": [],
                    "orig_ns": [],
                    "new_ns": [],
                },
            )
            g["index"].append(f.index)
            g["orig_ns"].append(f.orig_ns)
            g["new_ns"].append(f.new_ns)
        return list(groups.values())


@dataclass
class _State:
    """A topic being edited: per message of the clean scene."""

    msgs: TopicMessages
    present: np.ndarray
    log: np.ndarray
    stamp_shift: np.ndarray
    black: np.ndarray


def resolve_selector(selector: str, topics: dict[str, TopicMessages]) -> list[str]:
    """Topics a selector names, in file (channel) order."""
    if selector == "*":
        return [t for t in topics if t not in STATIC_TOPICS]
    if selector.startswith("/"):
        return [t for t in topics if fnmatch.fnmatchcase(t, selector)]
    types = SENSOR_TYPES.get(selector, ())
    return [t for t, m in topics.items() if m.type in types and t not in STATIC_TOPICS]


def inject(
    source: str | os.PathLike,
    out: str | os.PathLike,
    faults: Sequence[FaultSpec],
    *,
    seed: int = 0,
    optional: bool = False,
    source_sha256: str | None = None,
) -> InjectionResult:
    """Write `out`: the scene MCAP `source` with `faults` applied (see the module doc)."""
    content = read_mcap(source)
    start_ns, end_ns = content.window()
    for t in content.topics.values():
        if t.encoding not in ("cdr", "ros1"):
            raise FaultError(
                f"{source}: {t.topic} carries {t.encoding} messages; faults are injected into "
                "ROS 1 or ROS 2 (CDR) scenes"
            )
    result = InjectionResult(Path(out), seed, [f.compact() for f in faults], [])
    states = plan_faults(content.topics, faults, seed, start_ns, end_ns, result, optional=optional)
    _write_variant(content, states, result, source_sha256)
    return result


def plan_faults(
    topics: dict[str, TopicMessages],
    faults: Sequence[FaultSpec],
    seed: int,
    start_ns: int,
    end_ns: int,
    result: InjectionResult,
    *,
    optional: bool = False,
) -> dict[str, _State]:
    """The seeded choices of `faults` on topics of a scene spanning [start_ns, end_ns): per
    topic, which messages survive, their new log times, stamp shifts and black frames; every
    affected message is added to `result.faults` (skipped specs to `result.skipped`). The
    same topics, faults and seed give the same choices, written to a file (`inject`) or
    applied while playing (`bridge-lake play --fault`)."""
    states = {
        name: _State(
            t,
            np.ones(len(t), bool),
            t.log.copy(),
            np.zeros(len(t), np.int64),
            np.zeros(len(t), bool),
        )
        for name, t in topics.items()
    }
    for i, spec in enumerate(faults):
        chosen = resolve_selector(spec.topic, topics)
        chosen = [t for t in chosen if len(topics[t])]
        if not chosen:
            if optional:
                result.skipped.append(spec.compact())
                continue
            raise FaultError(
                f"fault {spec.compact()}: {spec.topic!r} selects no topic with messages; "
                f"topics: {', '.join(topics)}"
            )
        made: list[InjectedFault] = []
        for topic in chosen:
            rng = np.random.default_rng([seed, i, zlib.crc32(topic.encode())])
            made += [
                dataclasses.replace(f, step=i)
                for f in _apply(spec, states[topic], rng, start_ns, end_ns)
            ]
        if not made and not optional:
            raise FaultError(
                f"fault {spec.compact()} affects no message of {', '.join(chosen)} in the scene "
                f"({(end_ns - start_ns) / 1e9:.3f} s long)"
            )
        if not made:
            result.skipped.append(spec.compact())
        result.faults += made
    return states


def _apply(
    spec: FaultSpec, s: _State, rng: np.random.Generator, start_ns: int, end_ns: int
) -> list[InjectedFault]:
    name, kind, text = s.msgs.topic, spec.kind, spec.compact()
    alive = np.flatnonzero(s.present)
    if not len(alive):
        return []

    def record(idx: np.ndarray, new: np.ndarray | None) -> list[InjectedFault]:
        idx = np.asarray(idx, np.int64)
        old = s.log[idx].tolist()
        news = [None] * len(idx) if new is None else np.asarray(new, np.int64).tolist()
        return [
            InjectedFault(kind, name, int(k), int(o), n, text)
            for k, o, n in zip(idx.tolist(), old, news, strict=True)
        ]

    rated = kind in ("drop", "black") and spec.duration_ns is None
    if rated or kind in ("missing", "black"):
        if kind == "black" and s.msgs.type not in BLACKABLE:
            raise FaultError(f"fault {text}: {name} is {s.msgs.type}; black frames need raw images")
        if rated:
            rate_count = spec.count if spec.rate is None else max(1, round(spec.rate * len(alive)))
            k = min(int(rate_count or 1), len(alive))
            idx = np.sort(rng.choice(alive, size=k, replace=False))
        else:
            length = int(spec.duration_ns or 0)
            if spec.at_ns is None:
                room = max(end_ns - start_ns - length, 0) // 1_000_000
                at = start_ns + int(rng.integers(0, room + 1)) * 1_000_000
            else:
                at = start_ns + spec.at_ns
            times = s.log[alive]
            idx = alive[(times >= at) & (times < at + length)]
        if kind == "black":
            out = record(idx, s.log[idx])
            s.black[idx] = True
        else:
            out = record(idx, None)
            s.present[idx] = False
        return out
    if kind == "delay":
        new = s.log[alive] + int(spec.offset_ns or 0)
        out = record(alive, new)
        s.log[alive] = new
        return out
    if kind == "clock_offset":
        off = int(spec.offset_ns or 0)
        new = s.log[alive] + off
        if new.min() < 0:
            raise FaultError(f"fault {text}: {name} would get log times before 1970")
        out = record(alive, new)
        s.log[alive] = new
        s.stamp_shift[alive] += off
        return out
    return _reorder(spec, s, rng, alive, record)


def _reorder(spec: FaultSpec, s: _State, rng, alive: np.ndarray, record) -> list[InjectedFault]:
    """`count` windows, each the messages in [t, t + window) from a seeded message on, none
    sharing a message: the messages of a window arrive in a seeded non-identity order, each
    taking the log time of another message's slot."""
    window = int(spec.window_ns or DEFAULT_REORDER_WINDOW_NS)
    order = alive[np.argsort(s.log[alive], kind="stable")]
    times = s.log[order]
    ends = np.searchsorted(times, times + window, side="left")
    candidates = np.flatnonzero(ends - np.arange(len(order)) >= 2)
    used = np.zeros(len(order), bool)
    groups: list[np.ndarray] = []
    for c in rng.permutation(candidates).tolist():
        span = np.arange(c, ends[c])
        if used[span].any():
            continue
        used[span] = True
        groups.append(span)
        if len(groups) == spec.count:
            break
    if len(groups) < int(spec.count or 1):
        raise FaultError(
            f"fault {spec.compact()}: {s.msgs.topic} has room for only {len(groups)} reorder "
            f"windows of {window / 1e6:g} ms (each needs two messages)"
        )
    out: list[InjectedFault] = []
    for span in sorted(groups, key=lambda g: int(g[0])):
        perm = rng.permutation(len(span))
        if np.array_equal(perm, np.arange(len(span))):
            perm = np.roll(perm, 1)
        slots = times[span]
        idx = order[span]
        new = slots[perm]
        moved = new != slots
        out += record(idx[moved], new[moved])
        s.log[idx] = new
    return out


def _write_variant(
    content: McapContent, states: dict[str, _State], result: InjectionResult, source_sha: str | None
) -> None:
    """Every surviving message ordered by its new log time (ties: the source's file order),
    schemas, channels, metadata and attachments as in the source, plus the faults metadata."""
    out = result.path
    logs, orders, chans, pubs, datas = [], [], [], [], []
    channel_map: dict[int, int] = {}
    tmp = out.parent / f".{out.name}.{secrets.token_hex(4)}.partial"
    writer = McapWriter(
        tmp,
        profile=content.profile,
        library=content.library,
        compression=content.compression if content.compression in ("zstd", "lz4") else "none",
    )
    try:
        schema_map = {
            sid: writer.add_schema(s.name, s.encoding, s.data)
            for sid, s in sorted(content.schemas.items())
        }
        for cid, c in sorted(content.channels.items()):
            channel_map[cid] = writer.add_channel(
                c.topic, c.message_encoding, schema_map.get(c.schema_id, 0), c.metadata
            )
        for name, s in states.items():
            m = s.msgs
            keep = np.flatnonzero(s.present)
            kept = s.log[keep]
            result.topics[name] = (
                m.type,
                len(keep),
                int(kept.min()) if len(keep) else None,
                int(kept.max()) if len(keep) else None,
            )
            for k in keep.tolist():
                data = m.data[k]
                if s.black[k]:
                    data = black_image(data, m.type, m.encoding)
                if s.stamp_shift[k]:
                    positions = stamp_positions(m.type, m.encoding, data, m.definition)
                    data = shift_stamps(data, positions, int(s.stamp_shift[k]), m.encoding)
                datas.append(data)
            logs.append(s.log[keep])
            orders.append(m.order[keep])
            chans.append(np.full(len(keep), channel_map[m.channel_id], np.uint16))
            pub_shift = s.log[keep] - m.log[keep]
            pubs.append(m.publish[keep] + pub_shift)
        if datas:
            log = np.concatenate(logs)
            idx = np.lexsort((np.concatenate(orders), log))
            sizes = np.fromiter((len(d) for d in datas), np.int64, len(datas))[idx]
            offsets = np.zeros(len(idx) + 1, np.int64)
            np.cumsum(sizes, out=offsets[1:])
            buffer = np.frombuffer(b"".join(datas[i] for i in idx.tolist()), np.uint8)
            writer.write_messages(
                np.concatenate(chans)[idx],
                log[idx],
                np.concatenate(pubs)[idx],
                None,
                _Packed(buffer, offsets),
            )
        for name, data in content.metadata:
            if name != FAULTS_METADATA:
                writer.add_metadata(name, data)
        writer.add_metadata(
            FAULTS_METADATA,
            {
                "seed": str(result.seed),
                "specs": json.dumps(result.specs),
                "faults": str(len(result.faults)),
                "source_sha256": source_sha or "",
            },
        )
        for a in content.attachments:
            writer.add_attachment(a.name, a.media_type, a.data, a.log_time, a.create_time)
        writer.finish()
    except BaseException:
        writer.abort()
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)
    result.bytes = out.stat().st_size


@dataclass(frozen=True)
class _Packed:
    data: np.ndarray
    offsets: np.ndarray


def sha256_file(path: str | os.PathLike, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


__all__ = [
    "KINDS",
    "FaultError",
    "FaultSpec",
    "InjectedFault",
    "InjectionResult",
    "McapContent",
    "TopicMessages",
    "VariantSpec",
    "check_variant_name",
    "definition",
    "inject",
    "load_yaml",
    "parse_compact",
    "parse_duration",
    "parse_yaml",
    "plan_faults",
    "read_mcap",
    "scan_mcap",
    "schema_type",
    "specs_from_text",
]

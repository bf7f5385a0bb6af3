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
import re
import secrets
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bridge_lake.clock import NS_PER_S, NS_PER_US, TIME_UNITS_NS
from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.kinds import fault_selectors
from bridge_lake.export.mcap_writer import McapWriter
from bridge_lake.formats.ros.stamps import shift_stamps, stamp_positions
from bridge_lake.yaml_input import safe_load

KINDS = ("drop", "delay", "black", "missing", "reorder", "clock_offset")
DROP_RATE_RANGE = (0.001, 0.05)
"""Drop rates the issue asks for: 0.1 % to 5 %."""
DEFAULT_REORDER_WINDOW_NS = 50_000_000
STATIC_TOPICS = ("/tf_static",)
"""Never selected by `*` or a sensor kind: the latched transforms every replay needs."""
SENSOR_TYPES = fault_selectors()
"""Sensor kind selector → the message types it picks (each message kind names its own)."""
BLACKABLE = ("sensor_msgs/msg/Image",)
"""Raw pixels: zero bytes are black in every encoding the exports write (rgb8, bgr8, mono8)."""
FAULTS_METADATA = "bridge_lake.faults"
_UNITS = {**TIME_UNITS_NS, "µs": NS_PER_US, "min": 60 * NS_PER_S}
"""Duration units of the fault grammar: the clock's, plus `µs` and `min`."""
_DURATION = re.compile(r"^([+-]?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|min)$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


class FaultError(BridgeLakeError):
    """A fault specification that cannot be parsed or applied to the scene as given."""


# --- specifications --------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultSpec:
    """One fault on the topics a selector names; parameters by kind (see the module doc)."""

    kind: str
    topic: str
    """selector: sensor kind, `*`, or a topic glob starting with `/`"""
    rate: float | None = None
    """drop, black: fraction of the topic's messages"""
    count: int | None = None
    """black: frames; reorder: windows"""
    duration_ns: int | None = None
    """missing, black: span length"""
    at_ns: int | None = None
    """missing, black: span start from the scene's start (None: seeded)"""
    offset_ns: int | None = None
    """delay, clock_offset"""
    window_ns: int | None = None
    """reorder"""

    def compact(self) -> str:
        """The canonical compact form (what the manifest lists and `parse_compact` reads)."""
        k = self.kind
        if k == "drop":
            value = _pct(self.rate)
        elif k in ("delay", "clock_offset"):
            value = _dur(self.offset_ns, sign=k == "clock_offset")
        elif k == "reorder":
            value = f"{self.count}@window={_dur(self.window_ns)}"
        elif k == "missing" or (k == "black" and self.duration_ns is not None):
            value = _dur(self.duration_ns) + ("" if self.at_ns is None else f"@{_dur(self.at_ns)}")
        else:
            value = _pct(self.rate) if self.rate is not None else str(self.count)
        return f"{self.topic}:{k}={value}"


@dataclass(frozen=True)
class VariantSpec:
    """A fault-injected variant: its name (in file names), faults, seed and the scenes it is
    made of (scene id globs, `tag:<tag>`, or `first`; empty: every scene)."""

    name: str
    faults: tuple[FaultSpec, ...]
    seed: int = 0
    scenes: tuple[str, ...] = ()
    optional: bool = False
    """faults whose selector matches no topic of a scene are skipped instead of failing
    (the default variant, made for drives whatever their sensors)."""

    def selects(self, scene_id: str, tags: Sequence[str], first: bool) -> bool:
        if not self.scenes:
            return True
        for pattern in self.scenes:
            if pattern == "first" and first:
                return True
            if pattern.startswith("tag:") and pattern[4:] in tags:
                return True
            if fnmatch.fnmatchcase(scene_id, pattern):
                return True
        return False


def parse_duration(text: str | int | float, what: str = "duration") -> int:
    """`30ms`, `2s`, `+20ms`, `-5ms`, `1.5s`, `500us`, `100ns` → ns."""
    if isinstance(text, bool):
        raise FaultError(f"{what}: not a duration: {text!r}")
    m = _DURATION.fullmatch(str(text).strip())
    if not m:
        raise FaultError(f"{what}: not a duration: {text!r} (e.g. 30ms, 2s, +20ms, 500us)")
    return round(float(m.group(1)) * _UNITS[m.group(2)])


def parse_rate(text: str | int | float, what: str = "rate") -> float:
    """`0.5%` (or a YAML number taken as a fraction, 0.005) → 0.005."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise FaultError(f"{what}: not a rate: {text!r} (e.g. 0.5%)") from None
    if not 0 < value <= 1:
        raise FaultError(f"{what}: {text!r} is not a rate in (0, 100 %]")
    return value


def parse_compact(text: str) -> list[FaultSpec]:
    """One or several (comma separated) faults in the compact form."""
    specs = []
    for item in (p.strip() for p in text.split(",")):
        if item:
            specs.append(_parse_one(item))
    if not specs:
        raise FaultError(f"no fault in {text!r}")
    return specs


def _parse_one(item: str) -> FaultSpec:
    selector, colon, rest = item.partition(":")
    kind, eq, value = rest.partition("=")
    kind = kind.strip()
    if not colon or not eq or not selector.strip() or not value.strip():
        raise FaultError(
            f"fault {item!r}: expected SELECTOR:KIND=VALUE, e.g. camera:drop=0.5%, "
            "imu:delay=30ms, lidar:missing=2s@10s, can:reorder=5@window=50ms"
        )
    value, *params = value.strip().split("@")
    named = {}
    for p in params:
        k, e, v = p.partition("=")
        named[(k if e else "at").strip()] = (v if e else k).strip()
    spec = _build(kind, selector.strip(), value.strip(), named, f"fault {item!r}")
    return spec


def _build(kind: str, topic: str, value: str, named: dict[str, Any], where: str) -> FaultSpec:
    """A checked FaultSpec from the compact form's value and @parameters."""
    if kind not in KINDS:
        raise FaultError(f"{where}: unknown fault kind {kind!r}; kinds: {', '.join(KINDS)}")
    _check_selector(topic, where)
    allowed = {"reorder": {"window"}, "missing": {"at"}, "black": {"at"}}.get(kind, set())
    extra = set(named) - allowed
    if extra:
        raise FaultError(f"{where}: {kind} takes no parameter {sorted(extra)[0]!r}")
    if kind == "drop":
        rate = parse_rate(value, where)
        lo, hi = DROP_RATE_RANGE
        if not lo - 1e-12 <= rate <= hi + 1e-12:
            raise FaultError(f"{where}: drop rate {_pct(rate)} outside 0.1-5 %")
        return FaultSpec(kind, topic, rate=rate)
    if kind in ("delay", "clock_offset"):
        offset = parse_duration(value, where)
        if kind == "delay" and offset <= 0:
            raise FaultError(f"{where}: a delay must be positive")
        if offset == 0:
            raise FaultError(f"{where}: a clock offset of 0 changes nothing")
        return FaultSpec(kind, topic, offset_ns=offset)
    if kind == "reorder":
        count = _count(value, where)
        window = parse_duration(named.get("window", "50ms"), where)
        if window <= 0:
            raise FaultError(f"{where}: the reorder window must be positive")
        return FaultSpec(kind, topic, count=count, window_ns=window)
    at = parse_duration(named["at"], where) if "at" in named else None
    if at is not None and at < 0:
        raise FaultError(f"{where}: a span starts at or after the scene's start (@0s or later)")
    if kind == "missing":
        duration = parse_duration(value, where)
        if duration <= 0:
            raise FaultError(f"{where}: the missing span must be positive")
        return FaultSpec(kind, topic, duration_ns=duration, at_ns=at)
    # black: a count, a rate or a span
    if value.endswith("%"):
        return FaultSpec(kind, topic, rate=parse_rate(value, where))
    if value.isdigit():
        if at is not None:
            raise FaultError(f"{where}: black=N takes no @start (use black=DURATION@START)")
        return FaultSpec(kind, topic, count=_count(value, where))
    duration = parse_duration(value, where)
    if duration <= 0:
        raise FaultError(f"{where}: the black span must be positive")
    return FaultSpec(kind, topic, duration_ns=duration, at_ns=at)


def _count(value: str | int, where: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise FaultError(f"{where}: expected a count, got {value!r}") from None
    if n < 1:
        raise FaultError(f"{where}: the count must be at least 1")
    return n


def _check_selector(topic: str, where: str) -> None:
    if topic == "*" or topic.startswith("/") or topic in SENSOR_TYPES:
        return
    raise FaultError(
        f"{where}: unknown selector {topic!r}; use *, a topic glob starting with /, or one of "
        + ", ".join(SENSOR_TYPES)
    )


YAML_KEYS = {
    "drop": {"rate"},
    "delay": {"by"},
    "clock_offset": {"by"},
    "reorder": {"count", "window"},
    "missing": {"duration", "at"},
    "black": {"count", "rate", "duration", "at"},
}


def parse_yaml(text: str, path: str = "<faults>") -> list[VariantSpec]:
    """Fault variants of a scene set:

    version: 1
    seed: 42                          # default seed of every variant
    variants:
      - name: sensor-faults           # in file names: <scene>--sensor-faults.mcap
        scenes: [first]               # scene id globs, tag:<tag>, first (default: all)
        seed: 7                       # optional
        faults:
          - camera:drop=0.5%          # the compact form, or
          - {topic: lidar, kind: missing, duration: 2s, at: 1s}
          - {topic: can, kind: reorder, count: 5, window: 50ms}
          - {topic: "*", kind: clock_offset, by: +20ms}
    """
    try:
        doc = safe_load(text)
    except yaml.YAMLError as exc:
        raise FaultError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise FaultError(f"{path}: expected a mapping with `variants`")
    unknown = set(doc) - {"version", "seed", "variants", "notes"}
    if unknown:
        raise FaultError(f"{path}: {sorted(unknown)[0]}: unknown key")
    if doc.get("version", 1) != 1:
        raise FaultError(f"{path}: version: unsupported {doc.get('version')!r} (expected 1)")
    seed = _seed(doc.get("seed", 0), f"{path}: seed")
    entries = doc.get("variants")
    if not isinstance(entries, list) or not entries:
        raise FaultError(f"{path}: variants: expected a non-empty list")
    out, names = [], set()
    for i, entry in enumerate(entries):
        key = f"{path}: variants[{i}]"
        if not isinstance(entry, dict):
            raise FaultError(f"{key}: expected a mapping")
        extra = set(entry) - {"name", "scenes", "seed", "faults"}
        if extra:
            raise FaultError(f"{key}.{sorted(extra)[0]}: unknown key")
        name = check_variant_name(entry.get("name"), f"{key}.name")
        if name in names:
            raise FaultError(f"{key}.name: {name} is given twice")
        names.add(name)
        scenes = entry.get("scenes", [])
        scenes = [scenes] if isinstance(scenes, str) else scenes
        if not isinstance(scenes, list) or not all(isinstance(s, str) for s in scenes):
            raise FaultError(f"{key}.scenes: expected a list of scene ids, tag:<tag> or first")
        faults = entry.get("faults")
        if not isinstance(faults, list) or not faults:
            raise FaultError(f"{key}.faults: expected a non-empty list")
        specs: list[FaultSpec] = []
        for j, f in enumerate(faults):
            specs += _yaml_fault(f, f"{key}.faults[{j}]")
        out.append(
            VariantSpec(
                name,
                tuple(specs),
                _seed(entry.get("seed", seed), f"{key}.seed"),
                tuple(scenes),
            )
        )
    return out


def load_yaml(path: str | os.PathLike) -> list[VariantSpec]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise FaultError(f"{p}: cannot be read: {exc.strerror or exc}") from exc
    return parse_yaml(text, str(p))


def _yaml_fault(entry: Any, key: str) -> list[FaultSpec]:
    if isinstance(entry, str):
        try:
            return parse_compact(entry)
        except FaultError as exc:
            raise FaultError(f"{key}: {exc}") from None
    if not isinstance(entry, dict):
        raise FaultError(f"{key}: expected a compact string or a mapping")
    kind, topic = entry.get("kind"), entry.get("topic")
    if kind not in KINDS:
        raise FaultError(f"{key}.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(topic, str):
        raise FaultError(f"{key}.topic: expected a selector (camera, *, /topic/glob, ...)")
    extra = set(entry) - {"kind", "topic"} - YAML_KEYS[kind]
    if extra:
        raise FaultError(
            f"{key}.{sorted(extra)[0]}: not a parameter of {kind} "
            f"(parameters: {', '.join(sorted(YAML_KEYS[kind]))})"
        )
    p = {k: entry[k] for k in YAML_KEYS[kind] if k in entry}
    named: dict[str, Any] = {}
    if kind == "drop":
        value = _rate_text(p.get("rate"), key)
    elif kind in ("delay", "clock_offset"):
        value = str(p.get("by", ""))
    elif kind == "reorder":
        value = str(p.get("count", ""))
        if "window" in p:
            named["window"] = str(p["window"])
    elif kind == "missing":
        value = str(p.get("duration", ""))
    else:
        given = [k for k in ("count", "rate", "duration") if k in p]
        if len(given) != 1:
            raise FaultError(f"{key}: black takes one of count, rate or duration")
        value = _rate_text(p["rate"], key) if given == ["rate"] else str(p[given[0]])
    if "at" in p:
        named["at"] = str(p["at"])
    if not value:
        raise FaultError(f"{key}: {kind} needs {', '.join(sorted(YAML_KEYS[kind]))}")
    return [_build(kind, topic, value, named, key)]


def _rate_text(value: Any, key: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value * 100!r}%"
    if isinstance(value, str):
        return value
    raise FaultError(f"{key}.rate: expected e.g. 0.5% or 0.005")


def _seed(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FaultError(f"{key}: expected a non-negative integer seed")
    return value


def check_variant_name(name: Any, key: str = "variant name") -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name == "clean":
        raise FaultError(
            f"{key}: {name!r} is not a variant name (lower-case letters, digits, '_', '-', "
            "at most 40; not 'clean')"
        )
    return name


def _pct(rate: float | None) -> str:
    return f"{float(rate or 0) * 100:.6g}%"


def _dur(ns: int | None, *, sign: bool = False) -> str:
    ns = int(ns or 0)
    prefix = "+" if sign and ns > 0 else ""
    for unit in ("s", "ms", "us"):
        if ns % _UNITS[unit] == 0:
            return f"{prefix}{ns // _UNITS[unit]}{unit}"
    return f"{prefix}{ns}ns"


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


def definition(schema: Any) -> str:
    """A schema record's ROS message definition, "" when it holds none."""
    if schema is None or schema.encoding not in ("ros1msg", "ros2msg"):
        return ""
    return schema.data.decode("utf-8", "replace")


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
    for position, (schema, channel, m) in enumerate(_stream(path, frame)):
        lists = per.get(channel.id)
        if lists is None:
            lists = per[channel.id] = {"log": [], "pub": [], "seq": [], "order": []}
        lists["log"].append(m.log_time)
        lists["pub"].append(m.publish_time)
        lists["seq"].append(m.sequence)
        lists["order"].append(position)
        if visit is not None:
            visit(channel, schema, m.data)
    summary = frame["summary"]
    if summary is None:
        raise FaultError(f"{path}: the MCAP has no summary section")
    strays = sorted(set(per) - set(summary.channels))
    if strays:
        raise FaultError(
            f"{path}: not a readable MCAP file: messages on channel {strays[0]}, "
            "which the summary does not list"
        )
    compressions = sorted({c.compression or "none" for c in summary.chunk_indexes})
    topics = {}
    for cid, channel in sorted(summary.channels.items()):
        schema = summary.schemas.get(channel.schema_id)
        lists = per.get(cid, {})
        topics[channel.topic] = TopicMessages(
            channel.topic,
            cid,
            ros2_name(schema.name) if schema else "",
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


def _stream(path: Path, frame: dict[str, Any]) -> Iterator[tuple[Any, Any, Any]]:
    """(schema, channel, message) of `path` in file order; header, summary, metadata and
    attachments into `frame`. The mcap library's errors become `FaultError`s naming the file;
    the caller's, raised between messages, never reach this generator."""
    from mcap.reader import NonSeekingReader, make_reader

    from bridge_lake.formats.ros.files import BoundedFile

    try:
        with BoundedFile(path) as f:
            reader = make_reader(f, validate_crcs=True)
            frame["header"] = reader.get_header()
            frame["summary"] = reader.get_summary()
            frame["metadata"] = [(m.name, dict(m.metadata)) for m in reader.iter_metadata()]
            frame["attachments"] = list(reader.iter_attachments())
            # one chunk at a time: the seeking reader's file-order mode queues every message
            # of the file before it yields the first (mcap 1.6; see export.health)
            f.seek(0)
            yield from NonSeekingReader(f, validate_crcs=True).iter_messages(log_time_order=False)
    except OSError as exc:
        raise FaultError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except Exception as exc:  # the mcap library's own errors (bad magic, CRC, truncation)
        raise FaultError(f"{path}: not a readable MCAP file: {type(exc).__name__}: {exc}") from exc


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
    from bridge_lake.export.messages import typestore

    store = typestore(2 if encoding == "cdr" else 1)
    decode = store.deserialize_cdr if encoding == "cdr" else store.deserialize_ros1
    pixels = decode(data, "sensor_msgs/msg/Image").data
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

    if kind in ("drop", "black") and spec.duration_ns is None:
        if kind == "black" and s.msgs.type not in BLACKABLE:
            raise FaultError(f"fault {text}: {name} is {s.msgs.type}; black frames need raw images")
        rate_count = spec.count if spec.rate is None else max(1, round(spec.rate * len(alive)))
        k = min(int(rate_count or 1), len(alive))
        idx = np.sort(rng.choice(alive, size=k, replace=False))
        if kind == "drop":
            out = record(idx, None)
            s.present[idx] = False
            return out
        out = record(idx, s.log[idx])
        s.black[idx] = True
        return out
    if kind in ("missing", "black"):
        if kind == "black" and s.msgs.type not in BLACKABLE:
            raise FaultError(f"fault {text}: {name} is {s.msgs.type}; black frames need raw images")
        length = int(spec.duration_ns or 0)
        if spec.at_ns is None:
            room = max(end_ns - start_ns - length, 0) // 1_000_000
            at = start_ns + int(rng.integers(0, room + 1)) * 1_000_000
        else:
            at = start_ns + spec.at_ns
        times = s.log[alive]
        idx = alive[(times >= at) & (times < at + length)]
        if kind == "missing":
            out = record(idx, None)
            s.present[idx] = False
            return out
        out = record(idx, s.log[idx])
        s.black[idx] = True
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


def specs_from_text(items: Iterable[str]) -> list[FaultSpec]:
    """`--inject` values (each one or several comma-separated compact faults)."""
    out: list[FaultSpec] = []
    for item in items:
        out += parse_compact(item)
    return out


__all__ = [
    "KINDS",
    "FaultError",
    "FaultSpec",
    "InjectedFault",
    "InjectionResult",
    "McapContent",
    "TopicMessages",
    "VariantSpec",
    "definition",
    "inject",
    "load_yaml",
    "parse_compact",
    "parse_duration",
    "parse_yaml",
    "plan_faults",
    "read_mcap",
    "scan_mcap",
    "specs_from_text",
]

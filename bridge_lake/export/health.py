"""Health of a bag or MCAP file, judged by readers we did not write.

`check_file` opens ROS 1 bags and ROS 2 bag folders with rosbags' AnyReader, and MCAP files
with the `mcap` reader (CRCs validated) and the decoders for their schema encodings
(`mcap_ros2` for ros2msg, rosbags for ros1msg, `mcap_protobuf` for protobuf, json), decodes
every message and reports per topic: count, first/last time, mean rate, gaps, time going
backwards, header stamps against log times, decode failures; plus the file's compression and
size. It works on any bag or MCAP; given the expectations of one of our exports (counts per
topic, nominal rates), it also checks those, like `mcap doctor` and `rosbag info` in one.
"""

from __future__ import annotations

import html
import os
from array import array
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np

from bridge_lake.clock import NS_PER_S
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.ros.bag1_recover import scan_bag1
from bridge_lake.formats.ros.bag2_recover import scan_bag2, storage_files
from bridge_lake.formats.ros.damage import RosFormatError, ScanReport, recovered_name
from bridge_lake.formats.ros.decoding import McapDecoder, RosbagsDecoder, file_types
from bridge_lake.formats.ros.files import RecordingError, recording_kind
from bridge_lake.formats.ros.mcap_recover import scan_mcap
from bridge_lake.formats.ros.readers import (
    BagRecording,
    McapRecording,
    Recording,
    RosChannel,
    RosMessage,
    open_recording,
)
from bridge_lake.report_page import density_bars

GAP_FACTOR = 5.0
"""A step longer than 5 median periods of its topic is a gap."""
RATE_TOLERANCE = 0.3
MAX_GAPS_LISTED = 20


class HealthError(BridgeLakeError):
    """A file that cannot be opened as a bag or MCAP at all."""


class Kind(StrEnum):
    """What a health problem is about: the checks that report them pick them by kind."""

    DAMAGE = "damage"
    """the file is damaged: the damage, what is readable, what is lost, how to recover"""
    DROPPED = "dropped"
    """messages of a topic in damaged chunks"""
    MISSING = "missing"
    """a topic the file should have and has not"""
    COUNT = "count"
    """a topic with another number of messages than expected"""
    DECODE = "decode"
    """messages that do not decode"""
    BACKWARDS = "backwards"
    """log times going backwards"""
    STAMPS_BACKWARDS = "stamps_backwards"
    """header stamps going backwards"""
    STAMP_MISMATCH = "stamp_mismatch"
    """header stamps that differ from the log time"""
    RATE = "rate"
    """a topic's mean rate away from its nominal rate"""
    UNEXPORTED = "unexported"
    """a lake stream with rows that no topic carries"""


@dataclass(frozen=True)
class Problem:
    """One finding of a health check: what kind, how bad, which topic (None: the file)."""

    kind: Kind
    message: str
    topic: str | None = None
    severity: str = "error"
    """error | warn (a rate away from nominal: the data is whole)"""

    def __str__(self) -> str:
        return self.message


@dataclass
class TopicHealth:
    topic: str
    type: str
    messages: int = 0
    decoded: int = 0
    decode_errors: int = 0
    first_error: str | None = None
    first_ns: int | None = None
    last_ns: int | None = None
    backwards: int = 0
    """log times earlier than the message before them on the topic."""
    stamp_mismatches: int = 0
    """messages with a header whose stamp differs from the log time."""
    stamps_backwards: int = 0
    """header stamps earlier than the previous message's on the topic (in reading order)."""
    last_stamp: int | None = field(default=None, repr=False)
    stamped: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)
    """(start_ns, length_ns) of steps longer than GAP_FACTOR median periods."""
    gap_count: int = 0
    mean_rate_hz: float | None = None
    expected_messages: int | None = None
    expected_rate_hz: float | None = None
    problems: list[Problem] = field(default_factory=list)
    times: np.ndarray | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, kind: Kind, message: str, severity: str = "error") -> None:
        self.problems.append(Problem(kind, message, self.topic, severity))


@dataclass
class FileHealth:
    path: str
    format: str
    """mcap | bag1 | bag2"""
    bytes: int
    compression: str
    topics: dict[str, TopicHealth]
    problems: list[Problem] = field(default_factory=list)
    """file-level problems (missing topics, unreadable parts)."""
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems and all(t.ok for t in self.topics.values())

    @property
    def messages(self) -> int:
        return sum(t.messages for t in self.topics.values())

    def to_json(self) -> dict:
        out = {
            "path": self.path,
            "format": self.format,
            "bytes": self.bytes,
            "compression": self.compression,
            "ok": self.ok,
            "messages": self.messages,
            "problems": [p.message for p in self.problems],
            "details": self.details,
            "topics": {},
        }
        for name, t in self.topics.items():
            d = asdict(t)
            d.pop("times")
            d.pop("last_stamp")
            d["gaps"] = [[a, b] for a, b in t.gaps]
            d["problems"] = [p.message for p in t.problems]
            d["ok"] = t.ok
            out["topics"][name] = d
        return out


def file_format(path: Path) -> str:
    """mcap | bag1 | bag2 by content (`formats.ros.files`); a folder of MCAP storage files
    without metadata.yaml is a crashed ROS 2 bag, diagnosed by the scan."""
    if path.is_dir() and not (path / "metadata.yaml").is_file() and storage_files(path):
        return "bag2"
    try:
        return recording_kind(path)
    except RecordingError as exc:
        raise HealthError(str(exc)) from exc


def scan_structure(path: Path, fmt: str) -> ScanReport | None:
    """One pass over the records (no decoding) that finds where the valid data ends; None
    for storage the scanners do not read (a ROS 2 bag in SQLite)."""
    try:
        if fmt == "mcap":
            return scan_mcap(path)
        if fmt == "bag1":
            return scan_bag1(path)
        return scan_bag2(path) if storage_files(path) else None
    except RosFormatError as exc:
        raise HealthError(str(exc)) from exc


def diagnosed(path: Path, fmt: str, scan: ScanReport) -> FileHealth:
    """The health of a damaged file: its damage, what is readable, what is lost, and the
    command that recovers it; per topic the messages a recovery keeps."""
    topics = {
        name: TopicHealth(name, t.type, messages=t.kept, first_ns=t.first_ns, last_ns=t.last_ns)
        for name, t in scan.topics.items()
    }
    for t in topics.values():
        dropped = scan.topics[t.topic].dropped
        if dropped:
            t.add(Kind.DROPPED, f"{dropped} messages in damaged chunks")
    size = scan.file_size
    lines = [*scan.diagnosis(), f"run: bridge-lake recover {path} {recovered_name(path)}"]
    problems = [Problem(Kind.DAMAGE, line) for line in lines]
    return FileHealth(
        str(path), fmt, size, "unknown (damaged file)", topics, problems, {"scan": scan.to_json()}
    )


def check_file(
    path: str | os.PathLike,
    *,
    expected_counts: Mapping[str, int] | None = None,
    expected_rates: Mapping[str, float] | None = None,
) -> FileHealth:
    """Decode every message of `path` and judge it (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise HealthError(f"{path}: no such file or folder")
    fmt = file_format(path)
    scan = scan_structure(path, fmt)
    if scan is not None and not scan.ok:
        return diagnosed(path, fmt, scan)
    topics: dict[str, TopicHealth] = {}
    times: dict[str, array] = {}  # int64 log times, 8 bytes a message (a list: ~40)
    try:
        with open_recording(path) as recording:
            compression, details = _describe(recording)
            decode = _decoder(recording)
            for m in recording.messages():
                topic = m.channel.topic
                t = topics.get(topic)
                if t is None:
                    t = topics[topic] = TopicHealth(topic, _type_of(m.channel, fmt))
                    times[topic] = array("q")
                t.messages += 1
                times[topic].append(m.log_time)
                try:
                    message = decode(m)
                except Exception as exc:  # any decoder failure is a finding, not a crash
                    t.decode_errors += 1
                    t.first_error = t.first_error or f"{type(exc).__name__}: {exc}"[:300]
                    continue
                t.decoded += 1
                stamp = _header_stamp(message)
                if stamp is not None:
                    t.stamped += 1
                    t.stamp_mismatches += int(stamp != m.log_time)
                    if t.last_stamp is not None and stamp < t.last_stamp:
                        t.stamps_backwards += 1
                    t.last_stamp = stamp
    except HealthError:
        raise
    except Exception as exc:
        raise HealthError(f"{path}: cannot be read: {type(exc).__name__}: {exc}") from exc
    size = (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else path.stat().st_size
    )
    health = FileHealth(str(path), fmt, size, compression, topics, details=details)
    for name, t in topics.items():
        _judge(t, np.frombuffer(times[name], dtype=np.int64), expected_rates or {})
    for name, count in (expected_counts or {}).items():
        t = topics.get(name)
        if t is None:
            if count:
                health.problems.append(
                    Problem(Kind.MISSING, f"{name}: missing (expected {count} messages)", name)
                )
            continue
        t.expected_messages = count
        if t.messages != count:
            t.add(Kind.COUNT, f"{t.messages} messages, expected {count}")
    return health


def _judge(t: TopicHealth, times: np.ndarray, rates: Mapping[str, float]) -> None:
    t.times = times
    if len(times):
        t.first_ns, t.last_ns = int(times[0]), int(times[-1])
    steps = np.diff(times)
    t.backwards = int((steps < 0).sum())
    if len(times) > 1 and t.last_ns > t.first_ns:
        t.mean_rate_hz = (len(times) - 1) / ((t.last_ns - t.first_ns) / NS_PER_S)
    positive = steps[steps > 0]
    if len(positive) >= 3:
        limit = GAP_FACTOR * float(np.median(positive))
        gap_at = np.flatnonzero(steps > limit)
        t.gap_count = len(gap_at)
        t.gaps = [(int(times[i]), int(steps[i])) for i in gap_at[:MAX_GAPS_LISTED]]
    if t.decode_errors:
        t.add(Kind.DECODE, f"{t.decode_errors} messages do not decode ({t.first_error})")
    if t.backwards:
        t.add(Kind.BACKWARDS, f"log time goes backwards {t.backwards} times")
    if t.stamps_backwards:
        t.add(Kind.STAMPS_BACKWARDS, f"header stamps go backwards {t.stamps_backwards} times")
    if t.stamp_mismatches:
        t.add(Kind.STAMP_MISMATCH, f"{t.stamp_mismatches} header stamps differ from the log time")
    expected = rates.get(t.topic)
    if expected:
        t.expected_rate_hz = expected
        if t.mean_rate_hz is not None and abs(t.mean_rate_hz / expected - 1) > RATE_TOLERANCE:
            message = f"rate {t.mean_rate_hz:.2f} Hz, expected {expected:.2f} Hz"
            t.add(Kind.RATE, message, "warn")


def _header_stamp(message: object) -> int | None:
    """The header stamp in ns of a decoded message (ROS 1, ROS 2 or foxglove protobuf), or
    None. A TFMessage's stamp is its first transform's; /tf_static is stamped at its log time."""
    header = getattr(message, "header", None)
    if header is None:
        transforms = getattr(message, "transforms", None)
        if transforms:
            first = transforms[0]
            header = getattr(first, "header", None)
            if header is None and hasattr(first, "timestamp"):
                return _time_ns(first.timestamp)
        if header is None:
            ts = getattr(message, "timestamp", None)
            return _time_ns(ts) if ts is not None else None
    return _time_ns(header.stamp)


def _time_ns(t: object) -> int | None:
    for sec, nsec in (("sec", "nanosec"), ("secs", "nsecs"), ("seconds", "nanos"), ("sec", "nsec")):
        if hasattr(t, sec) and hasattr(t, nsec):
            return int(getattr(t, sec)) * NS_PER_S + int(getattr(t, nsec))
    return None


def _type_of(channel: RosChannel, fmt: str) -> str:
    """The type name a report shows: bags in rosbags' ROS 2 spelling, MCAP as its schema
    names it."""
    if fmt != "mcap":
        return channel.type
    return channel.schema_name or "(no schema)"


def _decoder(recording: Recording) -> Callable[[RosMessage], object]:
    """Bags: rosbags with the file's own definitions (as its AnyReader does), else the
    export's typestore; MCAP: the MCAP decoders (`formats.ros.decoding`)."""
    if recording.kind == "mcap":
        return McapDecoder()
    from bridge_lake.export.messages import typestore

    ros = 1 if recording.kind == "bag1" else 2
    has = any(c.schema_data for c in recording.channels.values())
    store = file_types(recording.channels.values()) if has else typestore(ros)
    return RosbagsDecoder({"ros1" if ros == 1 else "cdr": store})


def _describe(recording: Recording) -> tuple[str, dict]:
    """The recording's compression and what else its index says (chunks, profile, ...)."""
    if isinstance(recording, McapRecording):
        summary, header = recording.summary, recording.header
        if summary is None:
            return "unknown (no summary: readers must scan the whole file)", {
                "profile": header.profile
            }
        comps = sorted({c.compression or "none" for c in summary.chunk_indexes})
        details = {
            "profile": header.profile,
            "library": header.library,
            "chunks": len(summary.chunk_indexes),
            "indexed": bool(summary.chunk_indexes),
            "attachments": len(summary.attachment_indexes),
            "metadata": len(summary.metadata_indexes),
        }
        return ",".join(comps) or "none", details
    assert isinstance(recording, BagRecording)
    path = recording.path
    if recording.kind == "bag2":
        import yaml

        info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        mode, fmt = info.get("compression_mode") or "none", info.get("compression_format")
        comp = f"{fmt} ({mode.lower()})" if fmt else _bag2_storage_compression(path, info)
        return comp, {
            "storage": info.get("storage_identifier"),
            "version": info.get("version"),
            "files": info.get("relative_file_paths"),
        }
    chunks = recording.reader.chunks.values()
    names = {_compression_of(c.decompressor) for c in chunks}
    return ",".join(sorted(names)) or "none", {"chunks": len(chunks)}


def _bag2_storage_compression(path: Path, info: dict) -> str:
    """rosbag2 does not record chunk compression of MCAP storage in metadata.yaml: read it
    from the storage files' chunk indexes."""
    names = set()
    for rel in info.get("relative_file_paths") or []:
        if rel.endswith(".mcap") and (path / rel).is_file():
            summary = McapRecording(path / rel).summary
            names |= {c.compression or "none" for c in (summary.chunk_indexes if summary else [])}
    return ",".join(sorted(names)) + " (mcap storage chunks)" if names else "none"


def _compression_of(decompressor: object) -> str:
    module = getattr(decompressor, "__module__", "") or ""
    return "lz4" if "lz4" in module else "bz2" if "bz2" in module else "none"


# --- reports -------------------------------------------------------------------------------


def render_table(h: FileHealth) -> str:
    lines = [
        f"{h.path}: {h.format}, {h.bytes / 1e6:.1f} MB, compression {h.compression}, "
        f"{h.messages} messages, {len(h.topics)} topics — {'OK' if h.ok else 'PROBLEMS'}",
        f"  {'topic':40} {'type':34} {'msgs':>8} {'rate Hz':>8} {'gaps':>5}  status",
    ]
    for name in sorted(h.topics):
        t = h.topics[name]
        rate = f"{t.mean_rate_hz:.2f}" if t.mean_rate_hz else ""
        status = "ok" if t.ok else "; ".join(map(str, t.problems))
        lines.append(
            f"  {name:40} {t.type:34} {t.messages:8d} {rate:>8} {t.gap_count:5d}  {status}"
        )
    lines += [f"  PROBLEM: {p}" for p in h.problems]
    return "\n".join(lines)


def render_html(h: FileHealth, bins: int = 200) -> str:
    """Per-topic timeline: message density over time (bars) with gaps marked red."""
    topics = [t for t in h.topics.values() if t.times is not None and len(t.times)]
    t0 = min((t.first_ns for t in topics), default=0)
    t1 = max((t.last_ns for t in topics), default=1)
    span = max(t1 - t0, 1)
    width, label, row = 960, 260, 26
    svg = [f'<svg id="timeline" width="{width}" height="{row * len(topics) + 30}">']
    for i, t in enumerate(sorted(topics, key=lambda t: t.topic)):
        y = 5 + i * row
        svg.append(f'<text x="0" y="{y + 15}">{html.escape(t.topic)}</text>')
        svg += density_bars(t.times, t0, span, label, y, width - label, bins, 16)
        for a, length in t.gaps:
            x = label + (a - t0) / span * (width - label)
            gw = max(length / span * (width - label), 1.5)
            svg.append(
                f'<rect class="gap" x="{x:.1f}" y="{y}" width="{gw:.1f}" height="20" '
                'fill="#e15759" opacity="0.5"/>'
            )
    svg.append(f'<text x="{label}" y="{row * len(topics) + 25}">0 s</text>')
    svg.append(
        f'<text x="{width - 60}" y="{row * len(topics) + 25}">{span / NS_PER_S:.1f} s</text></svg>'
    )
    rows = "".join(
        f"<tr><td>{html.escape(t.topic)}</td><td>{html.escape(t.type)}</td>"
        f'<td class="num">{t.messages}</td><td class="num">{(t.mean_rate_hz or 0):.2f}</td>'
        f'<td class="num">{t.gap_count}</td>'
        f'<td class="{"" if t.ok else "bad"}">'
        f"{html.escape('; '.join(map(str, t.problems)) or 'ok')}</td></tr>"
        for t in sorted(h.topics.values(), key=lambda t: t.topic)
    )
    problems = "".join(f'<li class="bad">{html.escape(str(p))}</li>' for p in h.problems)
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>health: {html.escape(h.path)}</title><style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; }} .bad {{ color: #b00; }}
td, th {{ padding: 2px 8px; border-bottom: 1px solid #ddd; }} td.num {{ text-align: right; }}
svg text {{ font: 11px system-ui, sans-serif; }}</style></head><body>
<h1>{html.escape(Path(h.path).name)}: {"OK" if h.ok else "problems"}</h1>
<p>{h.format}, {h.bytes / 1e6:.1f} MB, compression {html.escape(h.compression)},
{h.messages} messages in {len(h.topics)} topics.</p><ul>{problems}</ul>
<h2>Timeline (bars: messages per time bin; red: gaps)</h2>{"".join(svg)}
<h2>Topics</h2><table id="topics"><tr><th>topic</th><th>type</th><th>messages</th>
<th>rate Hz</th><th>gaps</th><th>status</th></tr>{rows}</table></body></html>
"""

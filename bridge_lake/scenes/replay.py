"""Replay validation of a scene MCAP at three levels, as validation teams check a replay.

- **data**: the file opens (CRCs validated) and every message decodes with readers we did
  not write (`export.health`); every topic of the manifest is there with exactly its
  message count, and no other topic.
- **timing**: per topic, log times never go backwards in the file and the first and last
  log times are the manifest's; against the *source* (the clean scene a variant was made
  from, or the lake with `against`) every message is matched to its source message and its
  deviations (dropped, arriving at another time, stamps shifted, payload changed) must be
  exactly the faults the manifest lists: each listed fault found on its message and
  nothing else. Inter-message intervals, stamps going backwards (reordering) and gaps are
  reported per topic. Without a source, a clean scene must have stamps equal to log times
  and no reordering; a variant cannot be verified (a failure: keep the clean scene beside
  it or give the lake).
- **content**: the file's sha256 is the manifest's; against the source every message's
  payload is identical except the listed black frames, which must decode to all-zero
  pixels. Against the lake the source is the window exported again from the lake rows
  through the same mapping (byte-identical serialization, so equal checksums mean equal
  decoded values), and the lake snapshot is compared with the manifest's (a warning: the
  lake may have changed outside the scene).

Matching a message to its source: the payload digest with the header stamps masked plus
the stamp (after the topic's common stamp shift, a clock offset, estimated from messages
whose masked payload is unique), then the stamp alone (changed payloads: black frames),
then the masked payload alone (individually restamped messages).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from array import array
from collections import Counter, defaultdict, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.health import GAP_FACTOR, HealthError, check_file
from bridge_lake.formats.ros.stamps import read_stamp, stamp_positions
from bridge_lake.scenes.faults import (
    BLACKABLE,
    FaultError,
    McapContent,
    definition,
    image_is_black,
    scan_mcap,
    schema_type,
    sha256_file,
)
from bridge_lake.scenes.sets import load_manifest, manifest_path_for

LEVELS = ("data", "timing", "content")
MAX_FINDINGS_LISTED = 500
NO_STAMP = np.iinfo(np.int64).min
DROPPED = ("drop", "missing")


class ReplayError(BridgeLakeError):
    """A replay check that cannot start: no manifest, no such file, an unusable source."""


@dataclass
class Check:
    level: str
    name: str
    ok: bool
    detail: str
    warning: bool = False
    """passed, but worth a look (e.g. the lake changed since the scene was cut)"""


@dataclass
class TopicReport:
    topic: str
    type: str
    messages: int = 0
    expected: int | None = None
    decode_errors: int = 0
    backwards: int = 0
    """log times earlier than the previous message's in the file"""
    stamps_backwards: int = 0
    """header stamps earlier than the previous message's (reordering)"""
    gaps: int = 0
    max_step_ns: int = 0
    interval_error_ns: int | None = None
    """largest |interval - source interval| over consecutive messages present in both"""
    listed: int = 0
    found: int = 0
    unexpected: int = 0


@dataclass
class Finding:
    """A listed fault (found or not) or an unlisted deviation, on one source message."""

    status: str
    """found | not found | unexpected"""
    kind: str
    """the manifest's kind (listed), else what the deviation looks like"""
    topic: str
    index: int | None
    """message index in the source topic (None: a message the source does not have)"""
    orig_ns: int | None
    expected_ns: int | None
    observed_ns: int | None
    detail: str = ""


@dataclass
class ReplayReport:
    path: str
    manifest: str
    variant: str
    reference: str
    """what the file was compared with"""
    window: tuple[int, int]
    checks: list[Check] = field(default_factory=list)
    topics: dict[str, TopicReport] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    times: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def level_ok(self, level: str) -> bool:
        return all(c.ok for c in self.checks if c.level == level)

    def count(self, status: str) -> int:
        return sum(f.status == status for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "manifest": self.manifest,
            "variant": self.variant,
            "reference": self.reference,
            "window": list(self.window),
            "ok": self.ok,
            "levels": {
                lv: {
                    "ok": self.level_ok(lv),
                    "checks": [asdict(c) for c in self.checks if c.level == lv],
                }
                for lv in LEVELS
            },
            "topics": [asdict(t) for t in sorted(self.topics.values(), key=lambda t: t.topic)],
            "faults": {
                "found": self.count("found"),
                "not_found": self.count("not found"),
                "unexpected": self.count("unexpected"),
                "findings": [asdict(f) for f in self.findings[:MAX_FINDINGS_LISTED]],
                "listed_in_report": min(len(self.findings), MAX_FINDINGS_LISTED),
            },
        }


# --- per message facts -----------------------------------------------------------------------


@dataclass
class _Facts:
    """One topic's messages reduced to what matching needs."""

    log: np.ndarray
    stamp: np.ndarray
    """first header stamp (NO_STAMP where the type has none)"""
    masked: list[bytes]
    """digest of the payload with every header stamp zeroed"""
    full: list[bytes]
    has_stamps: bool
    black: np.ndarray | None = None
    """per message: all-zero pixels (image types in BLACKABLE of the checked file, else None)"""


class _FactsBuilder:
    """The facts of one channel's messages, a payload at a time (none is kept)."""

    def __init__(self, typename: str, encoding: str, definition: str, black: bool) -> None:
        self.type, self.encoding, self.definition = typename, encoding, definition
        self.stamps = array("q")
        self.masked: list[bytes] = []
        self.full: list[bytes] = []
        self.black = array("b") if black and typename in BLACKABLE else None

    def add(self, data: bytes) -> None:
        positions = stamp_positions(self.type, self.encoding, data, self.definition)
        full = hashlib.blake2b(data, digest_size=16).digest()
        self.full.append(full)
        if positions:
            self.stamps.append(read_stamp(data, positions[0], self.encoding))
            h = hashlib.blake2b(digest_size=16)
            view, at = memoryview(data), 0
            for p in positions:
                h.update(view[at:p])
                h.update(b"\0" * 8)
                at = p + 8
            h.update(view[at:])
            self.masked.append(h.digest())
        else:
            self.stamps.append(NO_STAMP)
            self.masked.append(full)
        if self.black is not None:
            self.black.append(image_is_black(data, self.encoding))

    def facts(self, log: np.ndarray) -> _Facts:
        stamps = np.frombuffer(self.stamps, np.int64).copy()
        has = bool(len(stamps)) and bool((stamps != NO_STAMP).all())
        black = None if self.black is None else np.frombuffer(self.black, np.int8).astype(bool)
        return _Facts(log, stamps, self.masked, self.full, has, black)


def _read_facts(path: Path, *, black: bool) -> tuple[McapContent, dict[str, _Facts]]:
    """`path` read once, streaming: its records and per topic the facts of its messages, in
    memory independent of the payloads' size (`faults.FaultError` if it is not readable).
    `black`: also whether each raw image is black (the checked file; a source needs not)."""
    builders: dict[int, _FactsBuilder] = {}

    def visit(channel: Any, schema: Any, data: bytes) -> None:
        b = builders.get(channel.id)
        if b is None:
            typename, encoding = schema_type(schema), channel.message_encoding
            b = builders[channel.id] = _FactsBuilder(typename, encoding, definition(schema), black)
        b.add(data)

    content = scan_mcap(path, visit)
    facts = {}
    for topic, t in content.topics.items():
        b = builders.get(t.channel_id) or _FactsBuilder(t.type, t.encoding, t.definition, black)
        facts[topic] = b.facts(t.log)
    return content, facts


def _match(ref: _Facts, obs: _Facts) -> tuple[np.ndarray, list[int]]:
    """match[i] = observed index of source message i (-1: none); observed indices left."""
    n, m = len(ref.log), len(obs.log)
    match = np.full(n, -1, np.int64)
    taken = np.zeros(m, bool)
    shift = 0
    if ref.has_stamps and obs.has_stamps:
        rc, oc = Counter(ref.masked), Counter(obs.masked)
        where = {d: i for i, d in enumerate(ref.masked) if rc[d] == 1}
        diffs = [
            int(obs.stamp[j] - ref.stamp[where[d]])
            for j, d in enumerate(obs.masked)
            if oc[d] == 1 and d in where
        ]
        if diffs:
            shift = Counter(diffs).most_common(1)[0][0]

    def run(ref_key, obs_key) -> None:
        pool: dict[Any, deque[int]] = defaultdict(deque)
        for i in range(n):
            if match[i] < 0:
                pool[ref_key(i)].append(i)
        for j in range(m):
            if taken[j]:
                continue
            q = pool.get(obs_key(j))
            if q:
                match[q.popleft()] = j
                taken[j] = True

    if ref.has_stamps and obs.has_stamps:
        run(
            lambda i: (int(ref.stamp[i]), ref.masked[i]),
            lambda j: (int(obs.stamp[j]) - shift, obs.masked[j]),
        )
        run(lambda i: int(ref.stamp[i]), lambda j: int(obs.stamp[j]) - shift)
    run(lambda i: ref.masked[i], lambda j: obs.masked[j])
    return match, np.flatnonzero(~taken).tolist()


@dataclass
class _Expected:
    present: bool = True
    log: int = 0
    stamp_shift: int = 0
    black: bool = False
    kinds: list[str] = field(default_factory=list)
    entries: list[tuple[str, int, int | None]] = field(default_factory=list)
    """(kind, orig_ns, new_ns) as listed"""


def _expected(manifest: dict, ref: dict[str, _Facts]) -> tuple[dict, list[str]]:
    """Per (topic, source index): the state the listed faults leave the message in, composed
    in the order listed; and listing problems (entries naming no source message)."""
    out: dict[tuple[str, int], _Expected] = {}
    problems = []
    groups = (manifest.get("faults") or {}).get("injected", [])
    for g in sorted(groups, key=lambda g: g.get("step", 0)):
        topic, kind = g["topic"], g["kind"]
        facts = ref.get(topic)
        for k, o, new in zip(g["index"], g["orig_ns"], g["new_ns"], strict=True):
            if facts is None or not 0 <= k < len(facts.log):
                problems.append(f"{topic} #{k}: listed but the source has no such message")
                continue
            e = out.get((topic, k))
            if e is None:
                e = out[(topic, k)] = _Expected(log=int(facts.log[k]))
            if o != e.log:
                problems.append(
                    f"{topic} #{k}: listed with original time {o}, the source says {e.log}"
                )
            e.kinds.append(kind)
            e.entries.append((kind, o, new))
            if kind in DROPPED:
                e.present = False
            elif kind == "delay":  # shifts compose as deltas, a reorder takes its slot
                e.log += int(new) - o
            elif kind == "reorder":
                e.log = int(new)
            elif kind == "clock_offset":
                e.stamp_shift += int(new) - o
                e.log += int(new) - o
            elif kind == "black":
                e.black = True
    return out, problems


def _looks_like(
    dropped: bool, dlog: int, dstamp: int, changed: bool, black: bool, new_log: int, slots: set
) -> str:
    """What an unlisted deviation looks like, judged from the data alone."""
    if dropped:
        return "drop"
    if changed:
        return "black" if black else "data"
    if dstamp and dstamp == dlog:
        return "clock_offset"
    if dstamp:
        return "stamp"
    return "reorder" if new_log in slots else "delay"


# --- the check -------------------------------------------------------------------------------


def replay_check(
    path: str | os.PathLike,
    *,
    manifest: str | os.PathLike | None = None,
    against: str | os.PathLike | None = None,
    storage_options: dict | None = None,
    decode: bool = True,
) -> ReplayReport:
    """Check a scene file at the three levels (module doc); `against` is a lake root.
    `decode=False` skips decoding every message (the scene_sets asset: the exports' health
    check decodes the same messages; payloads are still compared with the source)."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError(f"{path}: no such file")
    mpath = Path(manifest) if manifest else manifest_path_for(path)
    if not mpath.is_file():
        raise ReplayError(f"{path}: no manifest {mpath.name} beside it; give --manifest FILE")
    doc = load_manifest(mpath)
    window = (int(doc["window"]["start_ns"]), int(doc["window"]["end_ns"]))
    report = ReplayReport(str(path), str(mpath), str(doc.get("variant")), "none", window)
    listed_topics = doc.get("topics") or {}
    for topic, info in listed_topics.items():
        report.topics[topic] = TopicReport(topic, info["type"], expected=int(info["messages"]))
    read = _data_level(report, path, listed_topics, decode)
    if read is None:
        for level in ("timing", "content"):
            report.checks.append(Check(level, "not run", False, "the file is not readable"))
        return report
    observed, obs = read
    for t, m in observed.topics.items():
        report.times[t] = m.log
    source, reference = _reference(report, path, doc, observed, against, storage_options)
    report.reference = reference
    _intrinsic(report, observed, obs, listed_topics, source is not None, doc)
    _content_sha(report, path, doc)
    if source is None:
        if doc.get("faults"):
            report.checks.append(
                Check(
                    "timing",
                    "faults",
                    False,
                    "no source to verify the listed faults against: "
                    "keep the clean scene beside the variant or give --against LAKE",
                )
            )
        report.checks.sort(key=lambda c: LEVELS.index(c.level))
        return report
    ref_content, ref = source
    _against_source(report, doc, ref, obs, observed, ref_content)
    if against is not None:
        _snapshot(report, doc, against, storage_options)
    report.checks.sort(key=lambda c: LEVELS.index(c.level))
    return report


def _data_level(
    report: ReplayReport, path: Path, listed: dict, decode: bool
) -> tuple[McapContent, dict[str, _Facts]] | None:
    """Readable (CRCs), every message decoded by independent readers (`export.health`;
    skipped without `decode`), topics and counts as listed. The file's records and facts
    (`_read_facts`), or None."""
    health = None
    if decode:
        try:
            health = check_file(path)
        except HealthError as exc:
            report.checks.append(Check("data", "readable", False, str(exc)))
            return None
    try:
        observed, facts = _read_facts(path, black=True)
    except FaultError as exc:
        report.checks.append(Check("data", "readable", False, str(exc)))
        return None
    counts = {t: len(m) for t, m in observed.topics.items() if len(m)}
    total = sum(counts.values())
    report.checks.append(Check("data", "readable", True, f"mcap, CRCs valid, {total} messages"))
    for name, n in counts.items():
        r = report.topics.setdefault(name, TopicReport(name, observed.topics[name].type))
        r.messages = n
    if health is None:
        report.checks.append(Check("data", "decodes", True, "not decoded (decode off)"))
    else:
        bad = []
        for t in health.topics.values():
            report.topics[t.topic].decode_errors = t.decode_errors
            if t.decode_errors:
                bad.append(f"{t.topic}: {t.decode_errors} ({t.first_error})")
        detail = "; ".join(bad[:5]) or f"every message decodes ({health.messages})"
        report.checks.append(Check("data", "decodes", not bad, detail))
    wanted = {t for t, v in listed.items() if v["messages"]}
    missing, extra = sorted(wanted - set(counts)), sorted(set(counts) - set(listed))
    problems = [f"missing {', '.join(missing)}"] * bool(missing)
    problems += [f"not in the manifest: {', '.join(extra)}"] * bool(extra)
    detail = "; ".join(problems) or f"the manifest's {len(wanted)} topics"
    report.checks.append(Check("data", "topics", not problems, detail))
    wrong = [
        f"{t}: {counts.get(t, 0)}, manifest {v['messages']}"
        for t, v in sorted(listed.items())
        if counts.get(t, 0) != v["messages"]
    ]
    detail = "; ".join(wrong[:5]) or "every count as the manifest says"
    report.checks.append(Check("data", "counts", not wrong, detail))
    return observed, facts


_Source = tuple[McapContent, dict[str, _Facts]]


def _reference(
    report: ReplayReport, path: Path, doc: dict, observed: McapContent, against, storage_options
) -> tuple[_Source | None, str]:
    if against is not None:
        return _lake_reference(doc, against, storage_options)
    source = doc.get("source")
    if not source:
        return None, "none (a clean scene: the manifest; give --against LAKE to compare rows)"
    clean = path.parent / source["file"]
    if not clean.is_file():
        return None, f"none ({source['file']} is not beside the file)"
    sha = sha256_file(clean)
    if sha != source["sha256"]:
        report.checks.append(
            Check(
                "content",
                "source file",
                False,
                f"{clean.name} has sha256 {sha[:12]}…, the manifest says {source['sha256'][:12]}…",
            )
        )
        return None, f"none ({clean.name} is not the file the variant was made from)"
    return _read_facts(clean, black=False), f"clean scene {clean.name}"


def _lake_reference(doc: dict, against, storage_options) -> tuple[_Source, str]:
    from bridge_lake.export.exporter import ExportRequest, export_drive
    from bridge_lake.export.lake_exports import drive_mapping
    from bridge_lake.export.mapping import MAPPINGS
    from bridge_lake.lake import Lake

    lake = Lake(str(against), storage_options or {})
    if not doc.get("format") or not doc.get("drive") or not doc.get("lake_snapshot"):
        raise ReplayError("the manifest lacks the drive, format or lake snapshot to re-export")
    ref = doc["format"]["mapping"]
    with tempfile.TemporaryDirectory(prefix="bridge_lake_replay_") as tmp:
        candidates = [MAPPINGS / ref["file"]] if ref.get("shipped") else []
        own = drive_mapping(lake, doc["drive"], Path(tmp))  # as the raw layer captured it
        candidates += [own] if own is not None else []
        mapping = next(
            (p for p in candidates if p.is_file() and _sha(p) == ref.get("sha256")), None
        )
        if mapping is None:
            raise ReplayError(
                f"the mapping {ref['file']} the scene was exported with (sha256 "
                f"{str(ref.get('sha256'))[:12]}…) is not available (any more)"
            )
        out = Path(tmp) / "source.mcap"
        export_drive(
            lake,
            doc["drive"],
            out,
            ExportRequest(
                spans=[(doc["window"]["start_ns"], doc["window"]["end_ns"])],
                encoding=doc["format"]["encoding"],
                mapping=mapping,
            ),
        )
        source = _read_facts(out, black=False)
    return source, f"lake {against} (the window exported again)"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _intrinsic(
    report: ReplayReport,
    observed: McapContent,
    obs: dict[str, _Facts],
    listed: dict,
    has_source: bool,
    doc: dict,
) -> None:
    backwards, ends, stamps = [], [], []
    for topic, f in obs.items():
        r = report.topics.setdefault(topic, TopicReport(topic, observed.topics[topic].type))
        steps = np.diff(f.log)
        r.backwards = int((steps < 0).sum())
        positive = steps[steps > 0]
        r.max_step_ns = int(steps.max()) if len(steps) else 0
        if len(positive) >= 3:
            r.gaps = int((steps > GAP_FACTOR * float(np.median(positive))).sum())
        if f.has_stamps:
            r.stamps_backwards = int((np.diff(f.stamp) < 0).sum())
            if not doc.get("faults") and not has_source:
                off = int((f.stamp != f.log).sum())
                if off or r.stamps_backwards:
                    stamps.append(
                        f"{topic}: {off} stamps differ from the log time, "
                        f"{r.stamps_backwards} go backwards"
                    )
        if r.backwards:
            backwards.append(f"{topic}: {r.backwards}")
        info = listed.get(topic)
        if info and len(f.log):
            first, last = int(f.log.min()), int(f.log.max())
            if (first, last) != (info.get("first_ns"), info.get("last_ns")):
                ends.append(
                    f"{topic}: {first}..{last}, manifest "
                    f"{info.get('first_ns')}..{info.get('last_ns')}"
                )
    report.checks.append(
        Check(
            "timing",
            "order",
            not backwards,
            "; ".join(backwards[:5]) or "log times never go backwards",
        )
    )
    report.checks.append(
        Check(
            "timing",
            "span",
            not ends,
            "; ".join(ends[:5]) or "first and last log times as the manifest says",
        )
    )
    if not has_source and not doc.get("faults"):
        report.checks.append(
            Check(
                "timing",
                "stamps",
                not stamps,
                "; ".join(stamps[:5]) or "header stamps equal log times, none goes backwards",
            )
        )


def _content_sha(report: ReplayReport, path: Path, doc: dict) -> None:
    sha = sha256_file(path)
    want = doc["file"]["sha256"]
    report.checks.append(
        Check(
            "content",
            "sha256",
            sha == want,
            "the file's sha256 is the manifest's"
            if sha == want
            else f"sha256 {sha[:16]}…, the manifest says {want[:16]}…",
        )
    )


@dataclass(frozen=True)
class _Seen:
    """A source message as the checked file has it."""

    present: bool
    log: int | None
    dlog: int
    dstamp: int
    changed: bool
    """payload differs beyond the header stamps"""
    black: bool


def _seen(rf: _Facts, of: _Facts, i: int, j: int) -> _Seen:
    if j < 0:
        return _Seen(False, None, 0, 0, False, False)
    stamps = rf.has_stamps and of.has_stamps
    changed = of.masked[j] != rf.masked[i]
    black = changed and of.black is not None and bool(of.black[j])
    return _Seen(
        True,
        int(of.log[j]),
        int(of.log[j] - rf.log[i]),
        int(of.stamp[j] - rf.stamp[i]) if stamps else 0,
        changed,
        black,
    )


def _unlisted(topic: str, i: int, source_ns: int, s: _Seen, slots: set) -> Finding | None:
    if s.present and not s.dlog and not s.dstamp and not s.changed:
        return None
    kind = _looks_like(not s.present, s.dlog, s.dstamp, s.changed, s.black, s.log or 0, slots)
    detail = _describe(s.present, s.dlog, s.dstamp, s.changed, s.black)
    return Finding("unexpected", kind, topic, i, source_ns, source_ns, s.log, detail)


def _listed(
    topic: str, i: int, source_ns: int, e: _Expected, s: _Seen, slots: set
) -> list[Finding]:
    """The listed faults of one message (found or not), and what none of them accounts for."""
    log_ok = s.present and s.log == e.log
    stamp_ok = s.present and s.dstamp == e.stamp_shift
    out = []
    for kind, orig, new in e.entries:
        ok = {
            "drop": not s.present,
            "missing": not s.present,
            "black": s.present and s.changed and s.black,
            "clock_offset": stamp_ok,
        }.get(kind, log_ok)  # delay, reorder: the arrival time
        ok = ok or (not e.present and not s.present)  # moot: dropped later, as listed
        detail = "" if ok else _describe(s.present, s.dlog, s.dstamp, s.changed, s.black)
        out.append(
            Finding("found" if ok else "not found", kind, topic, i, orig, new, s.log, detail)
        )
    residual = None
    if e.present and not s.present:
        residual = "drop"
    elif s.present and e.present:
        rlog = (s.log or 0) - e.log
        if s.changed and not e.black:
            residual = "black" if s.black else "data"
        elif not stamp_ok and "clock_offset" not in e.kinds:
            residual = "clock_offset" if s.dstamp - e.stamp_shift == rlog else "stamp"
        elif not log_ok and stamp_ok and not {"delay", "reorder"} & set(e.kinds):
            residual = "reorder" if s.log in slots else "delay"
    if residual is not None:
        detail = "beyond the listed faults: " + _describe(
            s.present,
            (s.log or 0) - e.log,
            s.dstamp - e.stamp_shift,
            s.changed and not e.black,
            s.black,
        )
        out.append(Finding("unexpected", residual, topic, i, source_ns, e.log, s.log, detail))
    return out


def _against_source(
    report: ReplayReport,
    doc: dict,
    ref: dict[str, _Facts],
    obs: dict[str, _Facts],
    observed: McapContent,
    ref_content: McapContent,
) -> None:
    """Match every message to its source and judge the deviations against the listing."""
    expected, problems = _expected(doc, ref)
    content_bad: list[str] = []
    empty = _Facts(np.zeros(0, np.int64), np.zeros(0, np.int64), [], [], False)
    for topic in sorted(set(ref) | set(obs)):
        msgs = observed.topics.get(topic)
        typename = (msgs if msgs is not None else ref_content.topics[topic]).type
        r = report.topics.setdefault(topic, TopicReport(topic, typename))
        rf, of = ref.get(topic) or empty, obs.get(topic) or empty
        match, extra = _match(rf, of)
        slots = set(rf.log.tolist())
        for i in range(len(rf.log)):
            s = _seen(rf, of, i, int(match[i]))
            e = expected.get((topic, i))
            if e is None:
                found = _unlisted(topic, i, int(rf.log[i]), s, slots)
                findings = [found] if found else []
            else:
                findings = _listed(topic, i, int(rf.log[i]), e, s, slots)
                r.listed += len(e.entries)
                if e.black and s.present and s.changed and not s.black:
                    content_bad.append(f"{topic} #{i}: listed as a black frame, pixels not zero")
            for f in findings:
                r.found += f.status == "found"
                r.unexpected += f.status == "unexpected"
                if f.status == "unexpected" and f.kind == "data":
                    content_bad.append(f"{topic} #{i}: payload differs from the source")
            report.findings += findings
        for j in extra:
            report.findings.append(
                Finding(
                    "unexpected",
                    "extra",
                    topic,
                    None,
                    None,
                    None,
                    int(of.log[j]),
                    "a message the source does not have",
                )
            )
            r.unexpected += 1
        idx = np.flatnonzero(match >= 0)
        if len(idx) > 1:
            pairs = np.flatnonzero(np.diff(idx) == 1)
            a, b = idx[pairs], idx[pairs + 1]
            err = (of.log[match[b]] - of.log[match[a]]) - (rf.log[b] - rf.log[a])
            r.interval_error_ns = int(np.abs(err).max()) if len(err) else 0
    found, missed = report.count("found"), report.count("not found")
    # a payload changed in place (not a black frame) is a content finding, not a timing one
    unexpected = sum(f.status == "unexpected" and f.kind != "data" for f in report.findings)
    listed = found + missed
    detail = (
        f"{found} listed faults found where the manifest says, nothing else"
        if listed and not missed and not unexpected
        else "every message as in the source, no fault listed"
        if not listed and not unexpected
        else f"{found}/{listed} listed faults found, {missed} not found, {unexpected} "
        "unlisted deviations"
    )
    if problems:
        detail += "; manifest: " + "; ".join(problems[:3])
    report.checks.append(
        Check("timing", "faults", not missed and not unexpected and not problems, detail)
    )
    report.checks.append(
        Check(
            "content",
            "messages",
            not content_bad,
            "; ".join(content_bad[:5])
            or "every payload equals the source's (listed black frames: all-zero pixels)",
        )
    )


def _describe(present: bool, dlog: int, dstamp: int, changed: bool, black: bool) -> str:
    if not present:
        return "dropped"
    parts = []
    if dlog:
        parts.append(f"log time {dlog / 1e6:+.3f} ms")
    if dstamp:
        parts.append(f"stamp {dstamp / 1e6:+.3f} ms")
    if changed:
        parts.append("black pixels" if black else "payload changed")
    return ", ".join(parts) or "as in the source"


def _snapshot(report: ReplayReport, doc: dict, against, storage_options) -> None:
    from bridge_lake.lake import Lake
    from bridge_lake.scenes.sets import table_snapshot

    lake = Lake(str(against), storage_options or {})
    changed = []
    for table, snap in doc["lake_snapshot"]["tables"].items():
        now = table_snapshot(lake, table, doc["drive"])
        if now.fingerprint != snap["fingerprint"]:
            changed.append(table)
    report.checks.append(
        Check(
            "content",
            "lake snapshot",
            True,
            f"the lake changed since the scene was cut: {', '.join(changed)}"
            if changed
            else "the lake partitions are those the scene was cut from",
            warning=bool(changed),
        )
    )


__all__ = ["LEVELS", "Check", "Finding", "ReplayError", "ReplayReport", "replay_check"]

"""The fault grammar of scene variants: `FaultSpec` (one fault on the topics of a selector)
and `VariantSpec` (a named, seeded set of faults and the scenes it is made of), parsed from
the compact form (`--inject camera:drop=0.5%`) or a YAML file per scene set; see
`scenes.faults` for what each kind does to a scene.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bridge_lake.clock import NS_PER_S, NS_PER_US, TIME_UNITS_NS
from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.kinds import fault_selectors
from bridge_lake.yaml_input import safe_load

KINDS = ("drop", "delay", "black", "missing", "reorder", "clock_offset")
DROP_RATE_RANGE = (0.001, 0.05)
"""Drop rates the issue asks for: 0.1 % to 5 %."""
DEFAULT_REORDER_WINDOW_NS = 50_000_000
SENSOR_TYPES = fault_selectors()
"""Sensor kind selector → the message types it picks (each message kind names its own)."""
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


def specs_from_text(items: Iterable[str]) -> list[FaultSpec]:
    """`--inject` values (each one or several comma-separated compact faults)."""
    out: list[FaultSpec] = []
    for item in items:
        out += parse_compact(item)
    return out


__all__ = [
    "KINDS",
    "SENSOR_TYPES",
    "FaultError",
    "FaultSpec",
    "VariantSpec",
    "check_variant_name",
    "load_yaml",
    "parse_compact",
    "parse_duration",
    "parse_rate",
    "parse_yaml",
    "specs_from_text",
]

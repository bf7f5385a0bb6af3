"""The ADTF stream → normalized table mapping: YAML files of rules, loaded, validated, layered.

ADTF recordings name their streams freely and describe payloads with DDL structs of their own
design, so which table a stream feeds cannot be code: it is data (`adtf_mapping.yaml` beside
this module is the default). A rule says *which streams* it takes (stream name glob, meta type
glob, DDL struct glob, stream-type properties; every given criterion must hold, the first
matching rule wins) and *how* their samples become rows (a decoder, the table, a field
mapping DDL element → column with a scale factor, the device-time element with its unit, the
default topic and nominal rate).

Mappings are the user's. Up to three files are layered, and a stream takes the first rule
that matches in this order (`Mapping.layered`, built by `resolve_mapping`):

1. `drive`: the drive's own file, `mapping: FILE` in its `drive.yaml`, relative to the drive
   folder (absolute paths, `..` and symlinks leading outside the folder are refused with a
   `DriveMappingError` naming the drive and the key);
2. `user`: a file named by the `adtf_mapping` field of the landing resource (Dagster) or by
   `$BRIDGE_LAKE_ADTF_MAPPING`, or `--mapping` of `bridge-lake info` / `mapping check`;
3. `default`: the shipped `adtf_mapping.yaml`.

`Mapping.lookup` says which layer and file the chosen rule came from. A stream that no layer
maps is not lost: it lands in the generic table of its DDL struct (or, without a DDL, as raw
payload rows); `bridge-lake mapping suggest FILE.dat` writes a starting mapping for a
recording and `bridge-lake mapping check FILE.dat` shows where each stream would land.

Loading validates everything that can be checked without a recording (keys, tables, columns,
decoders, units) and raises `AdtfMappingError` naming the file and the rule, because a typo in
a mapping would otherwise surface as a whole stream quietly going to quarantine. Whether the
named DDL elements exist is only known per stream; a mismatch there quarantines that stream's
samples with the reason spelled out (see `bridge_lake.normalize.adtf`).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from bridge_lake import settings
from bridge_lake.clock import TIME_UNITS_NS
from bridge_lake.drive_meta import (
    DRIVE_YAML,
    MAX_DRIVE_YAML_BYTES,
    MAX_MAPPING_BYTES,
    parse_drive_yaml,
)
from bridge_lake.errors import BridgeLakeError, DriveMetadataError
from bridge_lake.lake.schemas import NORMALIZED, SENSOR_TABLES
from bridge_lake.yaml_input import safe_load

DEFAULT_MAPPING = "adtf_mapping.yaml"
"""Package data file of `bridge_lake.normalize` holding the default rules."""
LAYERS = ("drive", "user", "default")
"""Mapping layers in match order: the first rule that matches, in this order, wins."""
DRIVE_KEY = "mapping"
"""drive.yaml key naming the drive's own ADTF mapping file (relative to the drive folder)."""

"""Device time units a rule may give, as integer ns factors (no float seconds anywhere)."""

DECODER_TABLES: dict[str, frozenset[str]] = {
    "struct": frozenset(t.name for t in SENSOR_TABLES) - {"lidar_points", "lidar_scans"},
    "can": frozenset({"can_frames"}),
    "lidar": frozenset({"lidar_scans"}),
    "video": frozenset({"camera_frames"}),
}
"""Decoder → the tables it can fill. `struct` maps DDL elements 1:1 onto columns; the others
add what a plain field mapping cannot say (CAN id bits and payload slicing, one scan row plus
many point rows, keyframes and picture size of an H.264 stream)."""

CAN_FIELDS = frozenset({"channel", "can_id", "dlc", "data", "flags", "tag"})
LIDAR_POINT_FIELDS = frozenset({"x", "y", "z", "intensity", "ring", "time_offset_ns"})
VIDEO_ENCODINGS = frozenset({"h264"})
MATCH_KEYS = frozenset({"stream", "meta_type", "struct", "properties"})
NOT_MAPPABLE = ("streams", "quarantine", "lidar_points")
"""Normalized tables no rule fills directly (the sink's own, and the lidar decoder's points)."""
RULE_KEYS = frozenset(
    {
        "name",
        "match",
        "table",
        "decoder",
        "topic",
        "expected_rate_hz",
        "frame_id",
        "sensor_time",
        "fields",
        "can",
        "points",
        "sensor_scan_id",
        "encoding",
        "width",
        "height",
    }
)
CAN_OPTION_DEFAULTS: dict[str, Any] = {
    "extended_bit": 31,
    "standard_mask": 0x7FF,
    "extended_mask": 0x1FFFFFFF,
    "extended_flag": 0,
    "remote_flag": 0x2,
    "error_flag": 0x1,
    "data_tags": [0],
}
"""tCANData conventions (spec §10.4): bit 31 of the id marks an extended frame, flag 2 a
remote frame, flag 1 an error frame, tag 0 a data message (1 = bus status)."""


class AdtfMappingError(BridgeLakeError):
    """An ADTF mapping file that is not valid YAML or whose rules are malformed."""

    def __init__(self, message: str, *, path: str, rule: str | None = None) -> None:
        where = f"{path}: rule {rule!r}" if rule is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.rule = rule
        self.reason = message


class DriveMappingError(DriveMetadataError):
    """drive.yaml's `mapping` key names no usable file inside the drive folder."""

    def __init__(self, message: str, *, drive: str, key: str = DRIVE_KEY) -> None:
        super().__init__(f"drive {drive}: {DRIVE_YAML} key {key!r}: {message}")
        self.drive = drive
        self.key = key
        self.reason = message


@dataclass(frozen=True)
class FieldMap:
    """One column from one DDL element: `value = element * scale + offset`."""

    column: str
    element: str
    """Element path in the struct: `a.b` for nested structs, `arr[2]` for a fixed array item."""
    scale: float = 1.0
    offset: float = 0.0

    @property
    def identity(self) -> bool:
        return self.scale == 1.0 and self.offset == 0.0


@dataclass(frozen=True)
class SensorTime:
    element: str
    unit_ns: int


@dataclass(frozen=True)
class Match:
    stream: str | None = None
    meta_type: str | None = None
    struct: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def matches(
        self,
        stream: str,
        meta_type: str | None,
        struct: str | None,
        properties: dict[str, str],
    ) -> bool:
        """Globs (fnmatch, case-sensitive) on every criterion given; absent values never match."""

        def ok(pattern: str | None, value: str | None) -> bool:
            return pattern is None or (value is not None and fnmatch.fnmatchcase(value, pattern))

        return (
            ok(self.stream, stream)
            and ok(self.meta_type, meta_type)
            and ok(self.struct, struct)
            and all(ok(p, properties.get(k)) for k, p in self.properties.items())
        )


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    table: str
    decoder: str
    topic: str | None
    """Default export topic; `{stream}` and (CAN) `{channel}` are filled in per stream."""
    expected_rate_hz: float | None
    """Nominal rate; None = measured from the stream's first batch."""
    frame_id: str | None
    """Sensor frame; None = the stream name."""
    sensor_time: SensorTime | None
    fields: tuple[FieldMap, ...]
    can: dict[str, Any] = field(default_factory=dict)
    points_element: str | None = None
    point_fields: tuple[FieldMap, ...] = ()
    sensor_scan_id: str | None = None
    """Element holding the sensor's scan / frame counter (lidar_scans.sensor_scan_id)."""
    encoding: str | None = None
    width: int | None = None
    height: int | None = None


@dataclass(frozen=True)
class Origin:
    """Where rules come from: the layer (drive, user, default) and the file."""

    layer: str
    path: str

    def __str__(self) -> str:
        return f"{self.layer}: {self.path}"


@dataclass(frozen=True)
class Placement:
    """The rule a stream takes and where that rule was written."""

    rule: Rule
    origin: Origin

    @property
    def layer(self) -> str:
        return self.origin.layer

    @property
    def path(self) -> str:
        return self.origin.path

    def describe(self) -> str:
        """e.g. `rule imu_timudata (default: .../adtf_mapping.yaml)`."""
        return f"rule {self.rule.name} ({self.origin})"


@dataclass(frozen=True)
class Mapping:
    """Rules in match order. One file's rules (`layer` says which layer the file is), or
    several files' rules layered (`Mapping.layered`), each rule knowing its origin."""

    rules: tuple[Rule, ...]
    path: str
    layer: str = "user"
    origins: tuple[Origin, ...] = ()
    """Per rule, where it was written; empty: every rule comes from (layer, path)."""
    sources: tuple[Origin, ...] = ()
    """The files layered, in match order (empty: this one file)."""

    @classmethod
    def layered(cls, *mappings: Mapping | None) -> Mapping:
        """One mapping matching the rules of `mappings` in the order given (None skipped):
        the first rule that matches in the first mapping that has one wins. Rule names only
        need to be unique within their file."""
        given = [m for m in mappings if m is not None]
        rules: list[Rule] = []
        origins: list[Origin] = []
        sources: list[Origin] = []
        for m in given:
            rules += m.rules
            origins += m.rule_origins
            sources += m.layers
        path = " > ".join(o.path for o in sources) or "<no mapping>"
        return cls(tuple(rules), path, "layered", tuple(origins), tuple(sources))

    @property
    def rule_origins(self) -> tuple[Origin, ...]:
        return self.origins or (Origin(self.layer, self.path),) * len(self.rules)

    @property
    def layers(self) -> tuple[Origin, ...]:
        """The files whose rules this mapping holds, in match order."""
        return self.sources or (Origin(self.layer, self.path),)

    def lookup(
        self,
        stream: str,
        meta_type: str | None,
        struct: str | None,
        properties: dict[str, str],
    ) -> Placement | None:
        """The first rule whose match criteria all hold and where it came from, or None."""
        for rule, origin in zip(self.rules, self.rule_origins, strict=True):
            if rule.match.matches(stream, meta_type, struct, properties):
                return Placement(rule, origin)
        return None

    def rule_for(
        self,
        stream: str,
        meta_type: str | None,
        struct: str | None,
        properties: dict[str, str],
    ) -> Rule | None:
        """The first rule whose match criteria all hold, or None (the stream is unmapped)."""
        found = self.lookup(stream, meta_type, struct, properties)
        return found.rule if found is not None else None

    def origin_of(self, rule: Rule) -> Origin | None:
        """Where `rule` (an object this mapping returned) was written."""
        for r, origin in zip(self.rules, self.rule_origins, strict=True):
            if r is rule:
                return origin
        return None


def default_mapping_path() -> Path:
    return Path(str(resources.files("bridge_lake.normalize").joinpath(DEFAULT_MAPPING)))


def load_mapping(path: str | Path | None = None, *, layer: str | None = None) -> Mapping:
    """Load and validate a mapping file (the packaged default when `path` is None); `layer`
    defaults to `default` for the packaged file and `user` for any other."""
    p = Path(path) if path is not None else default_mapping_path()
    layer = layer or ("default" if path is None else "user")
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_MAPPING_BYTES + 1)
    except OSError as exc:
        raise AdtfMappingError(f"cannot read: {exc.strerror or exc}", path=str(p)) from None
    if len(data) > MAX_MAPPING_BYTES:
        raise AdtfMappingError(f"larger than {MAX_MAPPING_BYTES} bytes", path=str(p))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdtfMappingError(f"not UTF-8 text (byte {exc.start})", path=str(p)) from None
    return parse_mapping(text, path=str(p), layer=layer)


def drive_mapping_file(drive_dir: str | Path, drive: str | None = None) -> Path | None:
    """The file drive.yaml's `mapping` key names, checked to stay inside the drive folder;
    None when the folder has no drive.yaml or the key is absent."""
    root = Path(drive_dir)
    drive = drive or root.name
    meta_path = root / DRIVE_YAML
    if not meta_path.is_file():
        return None
    with open(meta_path, "rb") as f:
        text = f.read(MAX_DRIVE_YAML_BYTES + 1)
    meta = parse_drive_yaml(text, where=f"{drive}/{DRIVE_YAML}")
    rel = meta.extra.get(DRIVE_KEY)
    if rel is None:
        return None
    if not isinstance(rel, str) or not rel.strip():
        raise DriveMappingError(f"must be a file name, got {rel!r}", drive=drive)
    posix = rel.replace("\\", "/")
    if posix.startswith("/") or re.match(r"[A-Za-z]:(/|$)", posix):
        raise DriveMappingError(
            f"{rel!r} is an absolute path; give a file relative to the drive folder", drive=drive
        )
    if ".." in posix.split("/"):
        raise DriveMappingError(f"{rel!r} leaves the drive folder ('..')", drive=drive)
    path = root / posixpath.normpath(posix)
    real_root = root.resolve()
    real = path.resolve()
    if not real.is_relative_to(real_root):
        raise DriveMappingError(
            f"{rel!r} resolves to {real}, outside the drive folder (symlink)", drive=drive
        )
    if not real.is_file():
        raise DriveMappingError(f"{rel!r}: no such file in the drive folder", drive=drive)
    return path


def resolve_mapping(
    drive_dir: str | Path | None = None,
    *,
    user: str | Path | None = None,
    use_env: bool = True,
    default: bool = True,
    drive: str | None = None,
) -> Mapping:
    """The layered mapping for a drive: drive.yaml's `mapping` file (if `drive_dir` names a
    folder with one), the user file (`user`, else `$BRIDGE_LAKE_ADTF_MAPPING` when
    `use_env`), and the shipped default (unless `default` is False), in that match order."""
    drive_file = drive_mapping_file(drive_dir, drive) if drive_dir is not None else None
    if user is None and use_env:
        user = settings.adtf_mapping()
    return Mapping.layered(
        load_mapping(drive_file, layer="drive") if drive_file is not None else None,
        load_mapping(user, layer="user") if user is not None else None,
        load_mapping() if default else None,
    )


def parse_mapping(text: str, *, path: str = "<mapping>", layer: str = "user") -> Mapping:
    """Validate mapping YAML text (yaml.safe_load: no object construction from tags)."""
    try:
        doc = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise AdtfMappingError(f"not valid YAML{where}: {problem}", path=path) from None
    if not isinstance(doc, dict):
        raise AdtfMappingError("top level must be a mapping with 'rules'", path=path)
    unknown = set(doc) - {"version", "rules"}
    if unknown:
        raise AdtfMappingError(f"unknown top-level keys {sorted(unknown, key=str)}", path=path)
    if doc.get("version", 1) != 1:
        raise AdtfMappingError(f"unsupported version {doc.get('version')!r} (1 known)", path=path)
    rules = doc.get("rules")
    if not isinstance(rules, list):
        raise AdtfMappingError(
            "'rules' must be a list (empty: this file maps nothing itself)", path=path
        )
    parsed: list[Rule] = []
    names: set[str] = set()
    for i, raw in enumerate(rules):
        rule = _parse_rule(raw, i, path)
        if rule.name in names:
            raise AdtfMappingError("duplicate rule name", path=path, rule=rule.name)
        names.add(rule.name)
        parsed.append(rule)
    return Mapping(tuple(parsed), path, layer)


def _parse_rule(raw: object, index: int, path: str) -> Rule:
    label = f"#{index + 1}"
    if not isinstance(raw, dict):
        raise AdtfMappingError("a rule must be a mapping", path=path, rule=label)
    name = raw.get("name", label)
    if not isinstance(name, str) or not name:
        raise AdtfMappingError("'name' must be a non-empty string", path=path, rule=label)

    def fail(message: str) -> AdtfMappingError:
        return AdtfMappingError(message, path=path, rule=name)

    unknown = set(raw) - RULE_KEYS
    if unknown:
        raise fail(f"unknown keys {sorted(unknown, key=str)}")
    match = _parse_match(raw.get("match"), fail)
    table = raw.get("table")
    if not isinstance(table, str) or table not in NORMALIZED or table in NOT_MAPPABLE:
        choices = sorted(DECODER_TABLES["struct"] | {"lidar_scans"})
        raise fail(f"table {table!r} is not a sensor table (one of {choices})")
    decoder = raw.get("decoder", "struct")
    if not isinstance(decoder, str) or decoder not in DECODER_TABLES:
        raise fail(f"decoder {decoder!r} unknown (one of {sorted(DECODER_TABLES)})")
    if table not in DECODER_TABLES[decoder]:
        raise fail(f"decoder {decoder!r} cannot fill table {table!r}")
    rate = raw.get("expected_rate_hz")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0
    ):
        raise fail(f"expected_rate_hz must be a positive number or null, got {rate!r}")
    for key in ("topic", "frame_id", "sensor_scan_id", "encoding", "points"):
        if key != "points" and raw.get(key) is not None and not isinstance(raw[key], str):
            raise fail(f"{key!r} must be a string")
    columns = set(NORMALIZED[table].schema.names) - {"time_ns", "sensor_time_ns", "stream"}
    fields = _parse_fields(raw.get("fields", {}), fail, "fields")
    sensor_time = _parse_sensor_time(raw.get("sensor_time"), fail)
    rule_kw: dict[str, Any] = {}
    if decoder == "can":
        bad = {f.column for f in fields} - CAN_FIELDS
        if bad:
            raise fail(f"CAN fields {sorted(bad)} unknown (one of {sorted(CAN_FIELDS)})")
        missing = {"channel", "can_id", "dlc", "data"} - {f.column for f in fields}
        if missing:
            raise fail(f"CAN rule needs fields {sorted(missing)}")
        rule_kw["can"] = _parse_can(raw.get("can", {}), fail)
    elif decoder == "lidar":
        points = raw.get("points")
        if not isinstance(points, dict) or not isinstance(points.get("element"), str):
            raise fail("lidar rule needs 'points: {element: <array element>, fields: {...}}'")
        if set(points) - {"element", "fields"}:
            raise fail(
                f"unknown keys in 'points': {sorted(set(points) - {'element', 'fields'}, key=str)}"
            )
        pfields = _parse_fields(points.get("fields", {}), fail, "points.fields")
        bad = {f.column for f in pfields} - LIDAR_POINT_FIELDS
        if bad:
            raise fail(f"point fields {sorted(bad)} unknown (one of {sorted(LIDAR_POINT_FIELDS)})")
        if {"x", "y", "z"} - {f.column for f in pfields}:
            raise fail("point fields need x, y and z")
        rule_kw.update(points_element=points["element"], point_fields=pfields)
        bad = {f.column for f in fields} - (
            columns - {"scan_id", "sensor_scan_id", "point_count", "end_time_ns"}
        )
        if bad:
            raise fail(f"fields {sorted(bad)} are not columns the lidar decoder lets you map")
        rule_kw["sensor_scan_id"] = raw.get("sensor_scan_id")
    elif decoder == "video":
        encoding = raw.get("encoding", "h264")
        if not isinstance(encoding, str) or encoding not in VIDEO_ENCODINGS:
            raise fail(
                f"video encoding {encoding!r} unsupported (one of {sorted(VIDEO_ENCODINGS)})"
            )
        for key in ("width", "height"):
            v = raw.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise fail(f"{key!r} must be a positive integer")
        if fields:
            raise fail("a video rule has no field mapping (the payload is the frame)")
        rule_kw.update(encoding=encoding, width=raw.get("width"), height=raw.get("height"))
    else:
        bad = {f.column for f in fields} - columns
        if bad:
            raise fail(f"fields {sorted(bad)} are not columns of {table}")
        if not fields:
            raise fail("a struct rule needs at least one field")
    for key, allowed in (("can", "can"), ("points", "lidar"), ("sensor_scan_id", "lidar")):
        if key in raw and decoder != allowed:
            raise fail(f"{key!r} only applies to decoder {allowed!r}")
    return Rule(
        name=name,
        match=match,
        table=table,
        decoder=decoder,
        topic=raw.get("topic"),
        expected_rate_hz=float(rate) if rate is not None else None,
        frame_id=raw.get("frame_id"),
        sensor_time=sensor_time,
        fields=fields,
        **rule_kw,
    )


def _parse_match(raw: object, fail) -> Match:
    if not isinstance(raw, dict) or not raw:
        raise fail("'match' must be a non-empty mapping (stream, meta_type, struct, properties)")
    unknown = set(raw) - MATCH_KEYS
    if unknown:
        raise fail(f"unknown match keys {sorted(unknown, key=str)}")
    for key in ("stream", "meta_type", "struct"):
        if key in raw and not isinstance(raw[key], str):
            raise fail(f"match.{key} must be a string (a glob)")
    props = raw.get("properties", {})
    if not isinstance(props, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in props.items()
    ):
        raise fail("match.properties must map property names to string globs")
    return Match(raw.get("stream"), raw.get("meta_type"), raw.get("struct"), dict(props))


def _parse_fields(raw: object, fail, what: str) -> tuple[FieldMap, ...]:
    if not isinstance(raw, dict):
        raise fail(f"{what!r} must map column names to elements")
    out = []
    for column, spec in raw.items():
        if not isinstance(column, str):
            raise fail(f"{what}: column {column!r} is not a string")
        if isinstance(spec, str):
            out.append(FieldMap(column, spec))
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get("element"), str):
            raise fail(f"{what}.{column}: give an element name or {{element, scale, offset}}")
        extra = set(spec) - {"element", "scale", "offset"}
        if extra:
            raise fail(f"{what}.{column}: unknown keys {sorted(extra, key=str)}")
        nums = {}
        for key in ("scale", "offset"):
            v = spec.get(key, 1.0 if key == "scale" else 0.0)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise fail(f"{what}.{column}.{key} must be a number, got {v!r}")
            nums[key] = float(v)
        out.append(FieldMap(column, spec["element"], nums["scale"], nums["offset"]))
    return tuple(out)


def _parse_sensor_time(raw: object, fail) -> SensorTime | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("element"), str):
        raise fail("'sensor_time' must be {element: <name>, unit: ns|us|ms|s}")
    if set(raw) - {"element", "unit"}:
        raise fail(f"sensor_time: unknown keys {sorted(set(raw) - {'element', 'unit'}, key=str)}")
    unit = raw.get("unit", "ns")
    if not isinstance(unit, str) or unit not in TIME_UNITS_NS:
        raise fail(f"sensor_time.unit {unit!r} unknown (one of {sorted(TIME_UNITS_NS)})")
    return SensorTime(raw["element"], TIME_UNITS_NS[unit])


def _parse_can(raw: object, fail) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise fail("'can' must be a mapping of CAN options")
    unknown = set(raw) - set(CAN_OPTION_DEFAULTS)
    if unknown:
        raise fail(f"unknown CAN options {sorted(unknown, key=str)}")
    out = dict(CAN_OPTION_DEFAULTS) | raw
    for key, value in out.items():
        if key == "data_tags":
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                raise fail("can.data_tags must be a list of integers")
        elif key == "extended_bit":
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 31
            ):
                raise fail("can.extended_bit must be 0..31 or null")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(f"can.{key} must be a non-negative integer")
    return out


__all__ = [
    "LAYERS",
    "AdtfMappingError",
    "DriveMappingError",
    "FieldMap",
    "Mapping",
    "Match",
    "Origin",
    "Placement",
    "Rule",
    "SensorTime",
    "default_mapping_path",
    "drive_mapping_file",
    "load_mapping",
    "parse_mapping",
    "resolve_mapping",
]

"""The topic mapping: which lake rows become which topic, of which message type (YAML data).

A mapping file lists topics; each names a message type, the lake table its rows come from,
an optional row selection (`where: {column: glob}`) and an optional `split_by` column whose
values make one topic each (`/vehicle/can_{channel}`). Two defaults ship, one per source
(`mappings/adtf.yaml`, `mappings/nclt.yaml`), picked by the drive's drive.yaml `source`; a
drive.yaml `export_mapping: FILE` (relative to the drive folder) or `--mapping FILE`
replaces it. Every key is validated on load; errors name the file and the key.

    version: 1
    topics:
      - topic: /imu/data                  # ROS topic name; {value} of split_by allowed
        type: sensor_msgs/msg/Imu         # one of MESSAGE_TYPES (the kinds)
        table: imu                        # lake table (layer: normalized unless given)
        where: {stream: ms25}             # optional: column -> glob; rows that match
        split_by: channel                 # optional: one topic per distinct value
        frame_id: imu_link                # optional: default the rows' frame_id (cameras:
                                          # its *_optical frame when the rig has one)
        options: {...}                    # per type, see OPTIONS
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bridge_lake.drive_meta import MAX_MAPPING_BYTES
from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.kinds import KINDS
from bridge_lake.export.kinds.ddl import DDL_TYPE
from bridge_lake.export.messages.ddl_types import FIELD_PATTERN, PACKAGE_PATTERN
from bridge_lake.lake.schemas import CALIBRATED, NORMALIZED
from bridge_lake.yaml_input import safe_load

MAPPINGS = Path(__file__).parent / "mappings"
"""The shipped default mapping of each source: mappings/<source>.yaml."""
TOPIC_PATTERN = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


MESSAGE_TYPES = KINDS
"""The types a rule may name: the message kinds (`export.kinds`), each with the tables it is
made from and its options. `ddl` and `json` carry the generic ADTF tables: `table` may then
be a glob (`normalized/ddl_*`), one lane per table and stream."""
GENERIC_COLUMNS = frozenset({"time_ns", "sample_time_ns", "stream"})
"""Columns every generic ADTF table has (for `where` and `split_by` of json rules)."""
SHORT_NAMES = {name.replace("/msg/", "/"): name for name in MESSAGE_TYPES}
"""ROS 1 spellings (sensor_msgs/Imu) are accepted and mean the same type."""
LAYER_TABLES = {
    **{f"normalized/{n}": spec for n, spec in NORMALIZED.items()},
    **{f"calibrated/{n}": spec for n, spec in CALIBRATED.items()},
}


class MappingError(BridgeLakeError):
    """A mapping file that is unreadable or invalid; names the file and the key."""


@dataclass(frozen=True)
class TopicRule:
    topic: str
    type: str
    table: str
    """layer/table"""
    where: dict[str, str] = field(default_factory=dict)
    split_by: str | None = None
    frame_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def topic_for(self, value: object) -> str:
        """The topic of one split value (the rule's topic when it has no split). Characters a
        ROS name cannot hold become `_` (`stream1@rec.dat` → `stream1_rec_dat`; `/` in a
        value, as in ADTF substreams, stays a namespace separator)."""
        if self.split_by is None:
            return self.topic
        parts = [re.sub(r"[^A-Za-z0-9_]", "_", p) for p in str(value).split("/") if p]
        topic = self.topic.replace("{" + self.split_by + "}", "/".join(parts) or "_")
        return "/".join(p if not p[:1].isdigit() else f"_{p}" for p in topic.split("/"))

    def selects(self, column: str, value: object) -> bool:
        pattern = self.where.get(column)
        return pattern is None or fnmatch.fnmatchcase(str(value), pattern)


@dataclass(frozen=True)
class Mapping:
    path: str
    topics: tuple[TopicRule, ...]

    def reference(self) -> dict[str, Any]:
        """What names this mapping in an output, the same wherever the file lies (a temp copy
        of a drive's captured mapping, an install path): its file name, the sha256 of its
        bytes, and whether it is one the project ships (`MAPPINGS`)."""
        path = Path(self.path)
        sha = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        shipped = path.parent.resolve() == MAPPINGS.resolve()
        return {"file": path.name, "sha256": sha, "shipped": shipped}


def default_mapping_path(source: str) -> Path:
    path = MAPPINGS / f"{source}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in MAPPINGS.glob("*.yaml"))
        raise MappingError(f"no default topic mapping for source {source!r} (known: {known})")
    return path


def load_mapping(path: str | os.PathLike) -> Mapping:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_MAPPING_BYTES:
            raise MappingError(f"{path}: larger than {MAX_MAPPING_BYTES} bytes")
        doc = safe_load(path.read_bytes())
    except OSError as exc:
        raise MappingError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise MappingError(f"{path}: not valid YAML: {exc}") from exc
    return parse_mapping(doc, str(path))


def parse_mapping(doc: Any, path: str) -> Mapping:
    def fail(key: str, message: str) -> MappingError:
        return MappingError(f"{path}: {key}: {message}")

    if not isinstance(doc, dict):
        raise MappingError(f"{path}: expected a mapping with `topics`")
    unknown = set(doc) - {"version", "topics", "notes"}
    if unknown:
        raise fail(
            str(sorted(unknown, key=str)[0]), "unknown key (expected version, topics, notes)"
        )
    if doc.get("version", 1) != 1:
        raise fail("version", f"unsupported version {doc.get('version')!r} (expected 1)")
    entries = doc.get("topics")
    if not isinstance(entries, list) or not entries:
        raise fail("topics", "expected a non-empty list")
    rules = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        key = f"topics[{i}]"
        if not isinstance(entry, dict):
            raise fail(key, "expected a mapping")
        extra = set(entry) - {"topic", "type", "table", "where", "split_by", "frame_id", "options"}
        if extra:
            raise fail(f"{key}.{sorted(extra, key=str)[0]}", "unknown key")
        topic = entry.get("topic")
        split_by = entry.get("split_by")
        if split_by is not None and not isinstance(split_by, str):
            raise fail(f"{key}.split_by", "expected a column name")
        plain = (
            topic.replace("{" + split_by + "}", "x")
            if isinstance(topic, str) and split_by
            else topic
        )
        if not isinstance(plain, str) or not TOPIC_PATTERN.fullmatch(plain):
            raise fail(f"{key}.topic", f"not a ROS topic name: {topic!r}")
        if topic in seen:
            raise fail(f"{key}.topic", f"{topic} is mapped twice")
        seen.add(topic)
        typename = entry.get("type")
        typename = SHORT_NAMES.get(typename, typename) if isinstance(typename, str) else typename
        if not isinstance(typename, str) or typename not in MESSAGE_TYPES:
            raise fail(
                f"{key}.type",
                f"unknown message type {entry.get('type')!r}; supported: "
                + ", ".join(MESSAGE_TYPES),
            )
        mtype = MESSAGE_TYPES[typename]
        table = entry.get("table")
        table = table if isinstance(table, str) and "/" in table else f"normalized/{table}"
        if not any(fnmatch.fnmatchcase(table, t) for t in mtype.tables):
            raise fail(
                f"{key}.table",
                f"{typename} is made from {' or '.join(mtype.tables)}, not {entry.get('table')!r}",
            )
        spec = LAYER_TABLES.get(table)
        columns = {c.name for c in spec.columns} if spec else set(GENERIC_COLUMNS)
        where = entry.get("where") or {}
        if not isinstance(where, dict):
            raise fail(f"{key}.where", "expected a mapping column -> glob")
        for col, pattern in where.items():
            if col not in columns:
                raise fail(f"{key}.where.{col}", f"{table} has no column {col!r}")
            if not isinstance(pattern, str | int):
                raise fail(f"{key}.where.{col}", "expected a glob pattern")
        if split_by is not None:
            if split_by not in columns:
                raise fail(f"{key}.split_by", f"{table} has no column {split_by!r}")
            if "{" + split_by + "}" not in topic:
                raise fail(f"{key}.topic", f"must contain {{{split_by}}} to split by it")
        options = entry.get("options") or {}
        if not isinstance(options, dict):
            raise fail(f"{key}.options", "expected a mapping")
        for name, value in options.items():
            want = mtype.options.get(name)
            if want is None:
                raise fail(
                    f"{key}.options.{name}",
                    f"not an option of {typename} (options: {', '.join(mtype.options) or 'none'})",
                )
            if not isinstance(value, want):
                raise fail(f"{key}.options.{name}", f"expected {want.__name__}")
        if typename == DDL_TYPE:
            _check_ddl_options(options, f"{key}.options", fail)
        frame_id = entry.get("frame_id")
        if frame_id is not None and not isinstance(frame_id, str):
            raise fail(f"{key}.frame_id", "expected a string")
        rules.append(
            TopicRule(
                topic,
                typename,
                table,
                {k: str(v) for k, v in where.items()},
                split_by,
                frame_id,
                dict(options),
            )
        )
    return Mapping(path, tuple(rules))


def _check_ddl_options(options: dict, where: str, fail) -> None:
    """`package` a ROS package name; `rename` DDL element -> ROS 2 field name."""
    package = options.get("package")
    if package is not None and not PACKAGE_PATTERN.fullmatch(package):
        raise fail(f"{where}.package", f"{package!r} is not a ROS package name (a-z0-9_)")
    for element, name in (options.get("rename") or {}).items():
        if not isinstance(name, str) or not FIELD_PATTERN.fullmatch(name):
            raise fail(f"{where}.rename.{element}", f"{name!r} is not a ROS field name")

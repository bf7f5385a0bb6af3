"""The message type of every generic lane of an export, decided once before writing.

A `ddl` lane (a stream of a `ddl_<struct>` table) gets the type generated from the DDL the
stream catalog keeps for it (`normalized/streams.ddl`, `ddl_struct`); all lanes' types are
named together (`ddl_types.TypeSet`), so names and collisions do not depend on the order of
streams. A stream whose struct cannot become a ROS type (`DDLTypeError`, or a DDL that no
longer parses) goes out as `bridge_lake_msgs/msg/AdtfSample` holding its rows as JSON, with
a warning naming the stream and the reason: nothing is dropped. A stream whose DDL the
reader already refused (a struct containing itself, an unknown type) is in adtf_payloads:
its AdtfSample topic carries the bytes, and a warning quotes the reader's DDLError.
Generic lanes get the stream as their header frame unless the rule names one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bridge_lake.export.context import DriveContext
from bridge_lake.export.kinds.ddl import DDL_TYPE, FALLBACK
from bridge_lake.export.kinds.json_rows import JSON_TYPE
from bridge_lake.export.mapping import MappingError, TopicRule
from bridge_lake.export.messages import ExportTypes
from bridge_lake.export.messages.ddl_types import (
    DEFAULT_PACKAGE,
    DDLTypeError,
    RosStruct,
    TypeSet,
    build,
)
from bridge_lake.export.messages.typestore import ADTF_SAMPLE_TYPE
from bridge_lake.export.source import Lane
from bridge_lake.formats.adtf.ddl import DDL, parse_ddl
from bridge_lake.formats.adtf.errors import DDLError
from bridge_lake.formats.adtf.reader import DDL_UNUSABLE
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas import QUARANTINE


def lane_type(lane: Lane) -> str:
    """The message type a lane writes: its generated or fallback type, else the rule's."""
    return lane.extra.get("type", lane.rule.type)


@dataclass
class GenericPlan:
    types: ExportTypes
    warnings: list[str] = field(default_factory=list)


def plan_types(ctx: DriveContext, lanes: list[Lane]) -> GenericPlan:
    """Resolve the type of every `ddl` lane (see the module docstring)."""
    generic = [lane for lane in lanes if lane.rule.type in (DDL_TYPE, JSON_TYPE, ADTF_SAMPLE_TYPE)]
    sample_lanes = [x for x in generic if lane_type(x) == ADTF_SAMPLE_TYPE]
    warnings = _unusable_ddl(ctx.lake, ctx.drive, sample_lanes)
    plan = plan_generic(
        lanes, lambda: {r["stream"]: (r["ddl_struct"], r["ddl"]) for r in ctx.streams}, warnings
    )
    _check_renames([(lane, lane.extra["struct"]) for lane in lanes if "struct" in lane.extra])
    return plan


def plan_generic(
    lanes: list[Lane],
    catalog: Callable[[], dict[str, tuple[str | None, str | None]]],
    warnings: list[str] | None = None,
) -> GenericPlan:
    """`plan_types` with the streams' DDL (stream -> (struct, DDL text)) from `catalog`,
    called only when a `ddl` lane needs it: the lake's catalog offline, the streams the
    live bridge has met online."""
    warnings = list(warnings or [])
    generic = [lane for lane in lanes if lane.rule.type in (DDL_TYPE, JSON_TYPE, ADTF_SAMPLE_TYPE)]
    for lane in generic:
        if not lane.rule.frame_id and "stream" in lane.selection:
            lane.frame_id = str(lane.selection["stream"])
    ddl_lanes = [lane for lane in generic if lane.rule.type == DDL_TYPE]
    if not ddl_lanes:
        return GenericPlan(ExportTypes(), warnings)
    streams = catalog()
    parsed: dict[str, DDL] = {}
    sets: dict[str, TypeSet] = {}
    roots: list[tuple[Lane, RosStruct]] = []
    for lane in ddl_lanes:
        stream = str(lane.selection.get("stream"))
        package = lane.rule.options.get("package", DEFAULT_PACKAGE)
        if package not in sets:
            sets[package] = TypeSet(package)
        try:
            root = _root(lane, stream, streams, parsed)
        except (DDLTypeError, DDLError) as exc:
            reason = getattr(exc, "reason", None) or str(exc)
            lane.extra[FALLBACK] = reason
            lane.extra["type"] = ADTF_SAMPLE_TYPE
            warnings.append(
                f"{lane.topic}: stream {stream} goes out as {ADTF_SAMPLE_TYPE} (its rows as "
                f"JSON): {exc}"
            )
            continue
        sets[package].add(root)
        roots.append((lane, root))
    texts: dict[str, str] = {}
    for type_set in sets.values():
        texts.update(type_set.resolve())
    structs = {}
    for lane, root in roots:
        lane.extra["type"] = root.name
        lane.extra["struct"] = root
        structs[root.name] = root
    return GenericPlan(ExportTypes(texts, structs), warnings)


def _check_renames(roots: list[tuple[Lane, RosStruct]]) -> None:
    """A `rename` key that names no top-level element of any struct its rule covers is a
    typo, not a choice: fail naming it rather than export the field under its old name.
    Offline only, where every stream of the drive is known (the live bridge meets streams one
    at a time, and a key may be for a struct still to come)."""
    elements: dict[int, tuple[TopicRule, set[str]]] = {}
    for lane, root in roots:
        _, names = elements.setdefault(id(lane.rule), (lane.rule, set()))
        names.update(f.ddl_name for f in root.fields)
    for rule, names in elements.values():
        unknown = sorted(set(rule.options.get("rename") or {}) - names)
        if unknown:
            raise MappingError(
                f"topic rule {rule.topic}: options.rename.{unknown[0]}: no element "
                f"{unknown[0]!r} in the structs of its streams (elements: "
                f"{', '.join(sorted(names))})"
            )


def _unusable_ddl(lake: Lake, drive: str, lanes: list[Lane]) -> list[str]:
    """A warning for each AdtfSample lane whose stream had a DDL that did not parse (the
    reader's quarantine row names the stream and the DDLError)."""
    if not lanes or not lake.has_partition("normalized", QUARANTINE.name, drive):
        return []
    reasons = lake.read_partition("normalized", QUARANTINE.name, drive, columns=["reason"])
    found: dict[str, str] = {}
    for reason in reasons.column("reason").to_pylist():
        match = _UNUSABLE.search(reason or "")
        if match:
            found.setdefault(match.group(1), match.group(2))
    return [
        f"{lane.topic}: stream {lane.selection['stream']} goes out as {ADTF_SAMPLE_TYPE} "
        f"(bytes as recorded): its DDL is not usable: {found[lane.selection['stream']]}"
        for lane in lanes
        if lane.selection.get("stream") in found
    ]


_UNUSABLE = re.compile(r"stream '(.+?)': " + re.escape(DDL_UNUSABLE) + r": (.*)$")


def _root(
    lane: Lane, stream: str, catalog: dict[str, tuple[str | None, str | None]], parsed: dict
) -> RosStruct:
    struct, text = catalog.get(stream, (None, None))
    if not struct or not text:
        raise DDLTypeError(struct or "?", None, f"stream {stream} has no DDL in the catalog")
    if text not in parsed:
        parsed[text] = parse_ddl(text)
    rename = lane.rule.options.get("rename") or {}
    return build(parsed[text], struct, rename={str(k): str(v) for k, v in rename.items()})


__all__ = ["FALLBACK", "GenericPlan", "lane_type", "plan_generic", "plan_types"]

"""The registry of message kinds: one record (`Kind`) per exported message type.

Adding a kind is one module here (its columns, encoders, builder and `KIND` record, see
ARCHITECTURE.md "Adding a message kind") plus its line in `_RECORDS`, and its test. Every
other part of the project reads the kinds from here: the mapping (type names, tables,
options), the exporter (builders, encoders, what bags can carry, prefetching), the MCAP
writer (protobuf schemas), `messages.TYPENAMES` / `protobuf.SCHEMA_NAMES`, and the fault
selectors of scene variants.
"""

from __future__ import annotations

from collections.abc import Callable

from bridge_lake.export.kinds import (
    adtf_sample,
    can_frame,
    compressed,
    ddl,
    image,
    imu,
    json_rows,
    laser_scan,
    nav_sat_fix,
    odometry,
    point_cloud2,
    tf_message,
)
from bridge_lake.export.kinds.kind import Kind
from bridge_lake.export.messages.serialized import Serialized

_RECORDS = (
    image.KIND,
    compressed.IMAGE_KIND,
    compressed.VIDEO_KIND,
    point_cloud2.KIND,
    imu.KIND,
    can_frame.KIND,
    nav_sat_fix.KIND,
    laser_scan.KIND,
    odometry.KIND,
    tf_message.KIND,
    adtf_sample.KIND,
    json_rows.KIND,
    ddl.KIND,
)
KINDS: dict[str, Kind] = {k.typename: k for k in _RECORDS}
"""type name (ROS 2 spelling, or `json` / `ddl`) → its kind"""
BY_SHORT: dict[str, Kind] = {k.codec.short: k for k in _RECORDS if k.codec.short}
"""name of the plain-argument encoders (`imu`, ...) → its kind"""
GENERATED = frozenset({json_rows.JSON_TYPE, ddl.DDL_TYPE})
"""Kinds whose type is decided per lane and whose `table` may be a glob (`normalized/ddl_*`)."""
TYPENAMES = {
    k.codec.short: k.typename for k in _RECORDS if k.codec.short and k.typename not in GENERATED
}
"""The ROS message type of each plain-argument encoder."""
SCHEMA_NAMES = {k.typename: k.codec.protobuf_schema for k in _RECORDS if k.codec.protobuf_schema}
"""The protobuf message (full name) each ROS message type is exported as."""


def fault_selectors() -> dict[str, tuple[str, ...]]:
    """Fault selector (camera, imu, ...) → the message types it picks, in registry order."""
    out: dict[str, tuple[str, ...]] = {}
    for k in _RECORDS:
        for selector in k.faults:
            out[selector] = (*out.get(selector, ()), k.typename)
    return out


def encoder(short: str, protobuf: bool) -> Callable[..., Serialized]:
    """A kind's encoder with plain arguments (`messages.imu`, `protobuf.imu`)."""
    return BY_SHORT[short].call(protobuf)


__all__ = ["BY_SHORT", "GENERATED", "KINDS", "SCHEMA_NAMES", "TYPENAMES", "Kind", "encoder"]

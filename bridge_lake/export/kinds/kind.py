"""A message kind as one record: everything the project knows about one exported type.

A kind names its ROS type, the lake tables (and mapping options) a topic of it may be made
from, its builder (a lane's rows → validated columns), the validation itself (`columns`: the
one place its arguments are checked), the ROS 1 / CDR encoder and the protobuf encoder of
those columns with the protobuf message the MCAP schema names, and the fault selectors that
pick its topics in scene variants. The registry (`bridge_lake.export.kinds`) lists them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized

if TYPE_CHECKING:
    from bridge_lake.export.source import Builder, Lane

RosEncoder = Callable[[Any, int, int], Serialized]
"""(validated columns, ROS version 1 | 2, ROS 1 Header.seq of the first message)"""
ProtobufEncoder = Callable[[Any], Serialized]
Encode = Callable[[Any], Serialized]
"""A kind's encoder bound to one export's encoding: validated columns → messages."""


@dataclass(frozen=True)
class Codec:
    """How a kind's messages are checked and written."""

    columns: Callable[..., Any]
    """plain arguments (stamp_ns, frame_id, fields...) → validated columns; raises
    ValueError naming the argument"""
    ros: RosEncoder
    protobuf: ProtobufEncoder
    protobuf_schema: str | None
    """full name of the protobuf message it is exported as (foxglove.* or bridge_lake.*);
    None where the kind's protobuf schema is generated per export (DDL types)"""
    short: str | None = None
    """name of its plain-argument encoders (`messages.imu`, `protobuf.imu`)"""


@dataclass(frozen=True)
class Kind:
    typename: str
    """ROS 2 type name (sensor_msgs/msg/Imu), or the mapping's name of a family (`ddl`)"""
    tables: tuple[str, ...]
    """lake tables (layer/table, globs for the generic tables) a topic of it is made from"""
    codec: Codec
    builder: type[Builder] | None = None
    options: dict[str, type] = field(default_factory=dict)
    """mapping option name → expected YAML type"""
    pick: Callable[[Lane], tuple[type[Builder], Kind]] | None = None
    """for kinds whose lanes differ (tf_static / poses; DDL struct / its JSON fallback): the
    builder of a lane and the kind whose encoders it uses"""
    faults: tuple[str, ...] = ()
    """fault selectors (camera, imu, ...) that pick topics of this kind"""
    in_bags: bool = True
    """a ROS bag can carry it (JSON rows need MCAP's schema records)"""
    prefetch: bool = False
    """lanes read one batch ahead on a thread (Parquet and video decoding release the GIL)"""

    def encoder(self, encoding: str) -> Encode:
        """The encoder of one export: `ros1`, `ros2` or `protobuf`."""
        if encoding == "protobuf":
            return self.codec.protobuf
        ros, encode = (2 if encoding == "ros2" else 1), self.codec.ros
        return lambda columns: encode(columns, ros, 0)

    def open(self, lake: Any, drive: str, lane: Lane, encoding: str, shift_ns: int) -> Builder:
        """The builder of one lane, encoding as the export asks."""
        cls, kind = self.pick(lane) if self.pick else (self.builder, self)
        if cls is None:
            raise ValueError(f"{self.typename} has no builder")
        return cls(lake, drive, lane, kind.encoder(encoding), shift_ns)

    def call(self, protobuf: bool) -> Callable[..., Serialized]:
        """The kind's encoder with plain arguments (validated, then encoded): `ros` (1 or 2)
        and `seq_start` keyword-only, both ignored by protobuf."""
        codec = self.codec
        validate = codec.columns

        def encode(*args: Any, ros: int, seq_start: int = 0, **kwargs: Any) -> Serialized:
            if protobuf:
                return codec.protobuf(validate(*args, **kwargs))
            ros = arg.ros_version(ros)
            return codec.ros(validate(*args, **kwargs), ros, seq_start)

        params = list(inspect.signature(validate).parameters.values())
        params += [
            inspect.Parameter("ros", inspect.Parameter.KEYWORD_ONLY, annotation="int"),
            inspect.Parameter(
                "seq_start", inspect.Parameter.KEYWORD_ONLY, default=0, annotation="int"
            ),
        ]
        encode.__signature__ = inspect.Signature(params, return_annotation="Serialized")  # type: ignore[attr-defined]
        encode.__name__ = encode.__qualname__ = codec.short or "encode"
        encode.__doc__ = validate.__doc__
        return encode


__all__ = ["Codec", "Encode", "Kind", "ProtobufEncoder", "RosEncoder"]

"""Protobuf schemas of the exported messages: the FileDescriptorSet an MCAP Schema record
(encoding "protobuf") carries for each (the kinds name the message, `export.kinds`).

Foxglove's schemas come from foxglove_schemas_protobuf. The project's own messages
(bridge_lake.proto, next to this file, for users to compile) are built here as a
FileDescriptorProto in Python, so no protoc runs at export time; a test parses the .proto text
and checks both agree field by field.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable

from google.protobuf import descriptor_pb2, timestamp_pb2
from google.protobuf.descriptor import FileDescriptor

from bridge_lake.export.messages import arguments as arg

FILE_NAME = "bridge_lake.proto"
"""Name of the project's file in descriptors: its path relative to protoc's -I directory."""

_Field = descriptor_pb2.FieldDescriptorProto
_DOUBLE, _BOOL, _UINT32 = _Field.TYPE_DOUBLE, _Field.TYPE_BOOL, _Field.TYPE_UINT32
_STRING, _BYTES, _MESSAGE = _Field.TYPE_STRING, _Field.TYPE_BYTES, _Field.TYPE_MESSAGE
_TIMESTAMP, _VECTOR3, _QUATERNION = (
    ".google.protobuf.Timestamp",
    ".foxglove.Vector3",
    ".foxglove.Quaternion",
)
_REPEATED = "repeated"

_MESSAGES: dict[str, list[tuple]] = {
    "Imu": [
        ("timestamp", 1, _MESSAGE, _TIMESTAMP),
        ("frame_id", 2, _STRING),
        ("orientation", 3, _MESSAGE, _QUATERNION),
        ("orientation_covariance", 4, _DOUBLE, _REPEATED),
        ("angular_velocity", 5, _MESSAGE, _VECTOR3),
        ("angular_velocity_covariance", 6, _DOUBLE, _REPEATED),
        ("linear_acceleration", 7, _MESSAGE, _VECTOR3),
        ("linear_acceleration_covariance", 8, _DOUBLE, _REPEATED),
    ],
    "CanFrame": [
        ("timestamp", 1, _MESSAGE, _TIMESTAMP),
        ("frame_id", 2, _STRING),
        ("id", 3, _UINT32),
        ("is_extended", 4, _BOOL),
        ("is_rtr", 5, _BOOL),
        ("is_error", 6, _BOOL),
        ("dlc", 7, _UINT32),
        ("data", 8, _BYTES),
    ],
    "AdtfSample": [
        ("timestamp", 1, _MESSAGE, _TIMESTAMP),
        ("frame_id", 2, _STRING),
        ("stream", 3, _STRING),
        ("meta_type", 4, _STRING),
        ("data", 5, _BYTES),
    ],
}
"""The messages of bridge_lake.proto: (name, number, type[, message type | "repeated"])."""


def _foxglove(name: str) -> FileDescriptor:
    return importlib.import_module(f"foxglove_schemas_protobuf.{name}_pb2").DESCRIPTOR


def own_file() -> descriptor_pb2.FileDescriptorProto:
    """bridge_lake.proto as a FileDescriptorProto (proto3, so repeated doubles are packed)."""
    proto = descriptor_pb2.FileDescriptorProto(
        name=FILE_NAME,
        package="bridge_lake",
        syntax="proto3",
        dependency=[
            "foxglove/Quaternion.proto",
            "foxglove/Vector3.proto",
            "google/protobuf/timestamp.proto",
        ],
    )
    for message, fields in _MESSAGES.items():
        out = proto.message_type.add(name=message)
        for name, number, kind, *extra in fields:
            repeated = extra == [_REPEATED]
            out.field.add(
                name=name,
                number=number,
                type=kind,
                type_name=extra[0] if extra and not repeated else None,
                label=_Field.LABEL_REPEATED if repeated else _Field.LABEL_OPTIONAL,
            )
    return proto


def _with_dependencies(
    files: Iterable[FileDescriptor],
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """FileDescriptorProtos of `files` and everything they import, dependencies first."""
    out: dict[str, descriptor_pb2.FileDescriptorProto] = {}

    def visit(file: FileDescriptor) -> None:
        if file.name in out:
            return
        for dependency in file.dependencies:
            visit(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        out[file.name] = proto

    for file in files:
        visit(file)
    return out


@functools.cache
def schema(typename: str) -> tuple[str, bytes]:
    """(protobuf full name, serialized FileDescriptorSet with all dependencies) for a ROS type
    ("sensor_msgs/msg/Imu", or the ROS 1 spelling "sensor_msgs/Imu"): the name and data of
    the MCAP Schema record, encoding "protobuf"."""
    package, _, name = arg.text("typename", typename).partition("/")
    full = f"{package}/msg/{name.removeprefix('msg/')}"
    from bridge_lake.export.kinds import SCHEMA_NAMES  # the kinds import this package

    if full not in SCHEMA_NAMES:
        raise ValueError(
            f"typename {typename!r} has no protobuf schema; known: {list(SCHEMA_NAMES)}"
        )
    message = SCHEMA_NAMES[full]
    namespace, _, short = message.partition(".")
    if namespace == "foxglove":
        files = _with_dependencies([_foxglove(short)])
    else:
        own = own_file()
        files = _with_dependencies(
            [_foxglove("Quaternion"), _foxglove("Vector3"), timestamp_pb2.DESCRIPTOR]
        )
        files[own.name] = own
    return message, descriptor_pb2.FileDescriptorSet(file=files.values()).SerializeToString()

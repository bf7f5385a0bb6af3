"""Protobuf schemas of the exported messages: the FileDescriptorSet an MCAP Schema record
(encoding "protobuf") carries for each (the kinds name the message, `export.kinds`).

Foxglove's schemas come from foxglove_schemas_protobuf. The project's own messages are
defined once, in bridge_lake.proto next to this file (users compile the same file): its text
is read into a FileDescriptorProto (`proto_text`), so no protoc runs at export time.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from pathlib import Path

from google.protobuf import descriptor_pb2, timestamp_pb2
from google.protobuf.descriptor import FileDescriptor

from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.protobuf.proto_text import parse

FILE_NAME = "bridge_lake.proto"
"""Name of the project's file in descriptors: its path relative to protoc's -I directory."""


def _foxglove(name: str) -> FileDescriptor:
    return importlib.import_module(f"foxglove_schemas_protobuf.{name}_pb2").DESCRIPTOR


def own_file() -> descriptor_pb2.FileDescriptorProto:
    """bridge_lake.proto as a FileDescriptorProto (proto3, so repeated doubles are packed)."""
    return parse(Path(__file__).with_name(FILE_NAME).read_text(encoding="utf-8"), FILE_NAME)


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

""".proto text → FileDescriptorProto, for the subset of the language bridge_lake.proto uses:
syntax, package, imports, and flat messages of scalar or message-typed fields, optionally
repeated. The shipped .proto is then the one definition of the project's messages: the
descriptors in the MCAP files are built from the same text users compile, without protoc.

Anything outside that subset (options, enums, nested messages, oneofs, maps) is refused with
the line it is on, never skipped.
"""

from __future__ import annotations

import re

from google.protobuf import descriptor_pb2

_Field = descriptor_pb2.FieldDescriptorProto

SCALARS = {
    name: getattr(_Field, f"TYPE_{name.upper()}")
    for name in (
        "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
        "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
    )
}  # fmt: skip
"""proto3 scalar type names → their descriptor type."""

_COMMENT = re.compile(r"//[^\n]*")
_STATEMENT = re.compile(
    r"""\s*(?:
      syntax \s*=\s* "(?P<syntax>\w+)" \s*;
    | package \s+ (?P<package>[\w.]+) \s*;
    | import \s+ "(?P<import>[^"]+)" \s*;
    | message \s+ (?P<message>\w+) \s*\{
    | (?P<repeated>repeated\s+)? (?P<type>[\w.]+) \s+ (?P<field>\w+) \s*=\s* (?P<number>\d+) \s*;
    | (?P<end>\})
    )""",
    re.VERBOSE,
)


class ProtoSyntaxError(ValueError):
    """A statement the parser does not know; names the file and the line."""


def parse(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of one .proto file named `name` (its path as imported).

    Field types with a dot are fully qualified message names (foxglove.Vector3); a bare
    name other than a scalar is a message of this file's package."""
    text = _COMMENT.sub("", text)
    proto = descriptor_pb2.FileDescriptorProto(name=name)
    message: descriptor_pb2.DescriptorProto | None = None
    pos = 0
    while text[pos:].strip():
        match = _STATEMENT.match(text, pos)
        inside = message is not None
        if match is None or inside != bool(match["type"] or match["end"]):
            raise ProtoSyntaxError(f"{name}:{_line(text, pos)}: not in the subset parsed")
        pos = match.end()
        if match["syntax"]:
            proto.syntax = match["syntax"]
        elif match["package"]:
            proto.package = match["package"]
        elif match["import"]:
            proto.dependency.append(match["import"])
        elif match["message"]:
            message = proto.message_type.add(name=match["message"])
        elif match["end"]:
            message = None
        else:
            kind = match["type"]
            message.field.add(
                name=match["field"],
                number=int(match["number"]),
                type=SCALARS.get(kind, _Field.TYPE_MESSAGE),
                type_name=None if kind in SCALARS else _qualified(kind, proto.package),
                label=_Field.LABEL_REPEATED if match["repeated"] else _Field.LABEL_OPTIONAL,
            )
    if message is not None:
        raise ProtoSyntaxError(f"{name}: message {message.name} is not closed")
    return proto


def _line(text: str, pos: int) -> int:
    """The line number of the first statement at or after `pos`."""
    return text.count("\n", 0, re.compile(r"\s*").match(text, pos).end()) + 1


def _qualified(kind: str, package: str) -> str:
    return f".{kind}" if "." in kind else f".{package}.{kind}"

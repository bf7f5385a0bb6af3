"""Generated DDL messages (`messages.ddl_types`) as protobuf: a FileDescriptorSet per
stream's struct (what Foxglove needs to decode it) and the messages encoded in bulk.

The message of a stream's struct is `<package>.<Name>` (the ROS names): `timestamp`
(google.protobuf.Timestamp, the master time) and `frame_id` first, then one field per DDL
element numbered from 3 in declaration order; a nested struct is a message of its own (its
fields numbered from 1), declared in the same file. Types follow the ROS base type: bool;
int8/16/32 -> int32, uint8/16/32 -> uint32, int64, uint64, float32 -> float, float64 ->
double; fixed and variable arrays -> repeated (packed for scalars, proto3). Enum constants
have no protobuf counterpart (the value is the integer); an element whose name would clash
with timestamp/frame_id gets `_2`.

Encoding is protobuf's canonical form (upb's): zero scalars and empty arrays left out, set
nested messages written even when empty (`protobuf.wire.Fields`).
"""

from __future__ import annotations

import numpy as np
from google.protobuf import descriptor_pb2, timestamp_pb2

from bridge_lake.export.messages.ddl_columns import (
    Ragged,
    RaggedStructs,
    Values,
)
from bridge_lake.export.messages.ddl_types import RosStruct
from bridge_lake.export.messages.serialized import Serialized, ragged_part
from bridge_lake.export.protobuf.wire import Fields, varint_rows

_F = descriptor_pb2.FieldDescriptorProto
PROTO_TYPES = {
    "bool": _F.TYPE_BOOL,
    "int8": _F.TYPE_INT32,
    "int16": _F.TYPE_INT32,
    "int32": _F.TYPE_INT32,
    "uint8": _F.TYPE_UINT32,
    "uint16": _F.TYPE_UINT32,
    "uint32": _F.TYPE_UINT32,
    "int64": _F.TYPE_INT64,
    "uint64": _F.TYPE_UINT64,
    "float32": _F.TYPE_FLOAT,
    "float64": _F.TYPE_DOUBLE,
}
HEADER_FIELDS = ("timestamp", "frame_id")


def _short(st: RosStruct) -> str:
    return st.name.rsplit("/", 1)[1]


def full_name(st: RosStruct) -> str:
    """The protobuf full name of a resolved struct (`adtf_msgs.Mytype`)."""
    return f"{st.name.split('/', 1)[0]}.{_short(st)}"


def field_names(st: RosStruct) -> list[str]:
    """The protobuf field name of each ROS field (header names kept free at the top)."""
    taken = set(HEADER_FIELDS) if st.header else set()
    out = []
    for f in st.fields:
        name, k = f.name, 2
        while name in taken:
            name, k = f"{f.name}_{k}", k + 1
        taken.add(name)
        out.append(name)
    return out


def _first_number(st: RosStruct) -> int:
    return 3 if st.header else 1


def file_descriptor(root: RosStruct) -> descriptor_pb2.FileDescriptorProto:
    """One .proto file (proto3) with the root's message and every nested one."""
    package = root.name.split("/", 1)[0]
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"{package}/{_short(root)}.proto",
        package=package,
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    for st in (*root.children(), root):
        out = proto.message_type.add(name=_short(st))
        if st.header:
            out.field.add(
                name="timestamp",
                number=1,
                type=_F.TYPE_MESSAGE,
                type_name=".google.protobuf.Timestamp",
                label=_F.LABEL_OPTIONAL,
            )
            out.field.add(name="frame_id", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
        for i, (f, name) in enumerate(zip(st.fields, field_names(st), strict=True)):
            label = _F.LABEL_OPTIONAL if f.array is None else _F.LABEL_REPEATED
            number = _first_number(st) + i
            if f.struct is None:
                out.field.add(name=name, number=number, type=PROTO_TYPES[f.base], label=label)
            else:
                out.field.add(
                    name=name,
                    number=number,
                    type=_F.TYPE_MESSAGE,
                    type_name=f".{full_name(f.struct)}",
                    label=label,
                )
    return proto


def schema(root: RosStruct) -> tuple[str, bytes]:
    """(full name, serialized FileDescriptorSet) of a resolved stream struct: the MCAP Schema
    record's name and data, encoding "protobuf"."""
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    files = [timestamp, file_descriptor(root)]
    return full_name(root), descriptor_pb2.FileDescriptorSet(file=files).SerializeToString()


def _packed(fields: Fields, number: int, base: str, flat: np.ndarray, offsets: np.ndarray) -> None:
    """A packed repeated scalar: values flat[offsets[i]:offsets[i + 1]] in message i."""
    if base in ("float32", "float64"):
        size = 4 if base == "float32" else 8
        raw = np.ascontiguousarray(flat, "<f4" if size == 4 else "<f8").view(np.uint8)
        fields.binary(number, ragged_part(raw, offsets * size))
        return
    rows, lengths = varint_rows(flat.astype(np.int64) if base != "uint64" else flat.view(np.int64))
    keep = np.arange(rows.shape[1])[None, :] < lengths[:, None]
    raw = np.ascontiguousarray(rows[keep])
    ends = np.zeros(len(flat) + 1, np.int64)
    np.cumsum(lengths, out=ends[1:])
    fields.binary(number, ragged_part(raw, ends[offsets]))


def _scalar(fields: Fields, number: int, base: str, values: np.ndarray) -> None:
    if base == "float64":
        fields.double(number, values)
    elif base == "float32":
        fields.float32(number, values)
    elif base == "uint64":
        fields.varint(number, np.asarray(values, np.uint64).view(np.int64))
    else:
        fields.varint(number, np.asarray(values).astype(np.int64))


def _struct(fields: Fields, st: RosStruct, values: Values) -> None:
    k = values.k
    for i, f in enumerate(st.fields):
        number = _first_number(st) + i
        v = values.fields[f.name]
        if f.struct is None:
            if f.array is None:
                _scalar(fields, number, f.base or "", np.asarray(v))
            elif isinstance(v, Ragged):
                _packed(fields, number, f.base or "", v.values, v.offsets)
            else:
                flat = np.asarray(v).reshape(-1)
                _packed(fields, number, f.base or "", flat, np.arange(k + 1) * f.array)
        elif f.array is None:
            sub = Fields(k)
            _struct(sub, f.struct, v)  # type: ignore[arg-type]
            fields.message(number, sub)
        elif isinstance(v, RaggedStructs):
            _repeated(fields, number, f.struct, v.values, v.offsets)
        else:
            assert isinstance(v, Values)
            _repeated(fields, number, f.struct, v, np.arange(k + 1, dtype=np.int64) * f.array)


def _repeated(
    fields: Fields, number: int, st: RosStruct, inner: Values, offsets: np.ndarray
) -> None:
    """A repeated message field: elements inner[offsets[i]:offsets[i + 1]] in message i, each
    tagged and length-prefixed (written even when empty)."""
    m = inner.k
    sub = Fields(m)
    _struct(sub, st, inner)
    elements = sub.encode()
    tagged = Fields(m)
    tagged.length_prefix(number, np.diff(elements.offsets))
    tagged.ragged(ragged_part(elements.data, elements.offsets))
    each = tagged.encode()
    fields.ragged(ragged_part(each.data, each.offsets[offsets]))


def encode_values(
    struct: RosStruct, values: Values, stamp: np.ndarray, frame_id: str
) -> Serialized:
    """n protobuf messages of the generated type `struct` from its validated values."""
    fields = Fields(stamp.size)
    fields.timestamp(1, stamp)
    fields.string(2, frame_id)
    _struct(fields, struct, values)
    return fields.encode()


__all__ = ["PROTO_TYPES", "encode_values", "file_descriptor", "full_name", "schema"]

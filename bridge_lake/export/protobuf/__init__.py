"""Vectorized serializers: columns of the lake -> n protobuf messages in one buffer, for MCAP
files with protobuf encoding (what Foxglove reads natively and many AV teams store).

The wire machinery (`wire.Fields`: messages encoded straight from numpy/Arrow columns
without a Python object per message, byte for byte as protobuf (upb) serializes them), the
schemas (`schemas`), and the generated DDL types (`ddl`). Each kind's protobuf encoder lives
with its kind (`export.kinds`), which also names the protobuf message it becomes
(SCHEMA_NAMES: e.g. PointCloud2 -> foxglove.PointCloud, Imu -> bridge_lake.Imu) and says
what it drops. Here the encoders are reachable by their short names with the plain
arguments of `export.messages` (`ros` and `seq_start` accepted and ignored: protobuf has
one encoding and no sequence numbers).

In an MCAP file (profile "", as protobuf files have no ROS profile), per topic, with the mcap
library's Writer:

    name, data = schema(TYPENAMES["imu"])  # "bridge_lake.Imu", serialized FileDescriptorSet
    schema_id = writer.register_schema(name=name, encoding="protobuf", data=data)
    channel_id = writer.register_channel(topic, message_encoding="protobuf", schema_id=schema_id)

or with bridge_lake's McapWriter(path, profile=""): add_schema(name, "protobuf", data) and
add_channel(topic, "protobuf", schema_id). Messages are then written as Serialized batches.
"""

from typing import Any

from bridge_lake.export.protobuf.schemas import schema


def __getattr__(name: str) -> Any:
    from bridge_lake.export import kinds

    if name == "SCHEMA_NAMES":
        return kinds.SCHEMA_NAMES
    if name in kinds.BY_SHORT:
        return kinds.encoder(name, protobuf=True)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["schema"]

"""The files an export writes: MCAP (our streaming writer), ROS 2 bags and ROS 1 bags
(rosbags' writers, fed with messages we serialized in bulk).

Every output takes topics first (`add_topic` → channel id), then merged batches of messages
(`write`: channel ids, log times, Serialized), then metadata and attachments, and is
finished by `close()`. Outputs write where they are told; the exporter gives them a
temporary name and renames the result, so an interrupted export never looks complete.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import numpy as np
import yaml
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin
from rosbags.rosbag2 import Writer as Bag2Writer

from bridge_lake.export.bag1_writer import BulkBag1Writer as Bag1Writer
from bridge_lake.export.mcap_writer import McapWriter
from bridge_lake.export.messages import ExportTypes, Serialized

LIBRARY = "bridge_lake"
ZERO = QosTime(0, 0)
LATCHED_QOS = Qos(
    QosHistory.KEEP_LAST,
    1,
    QosReliability.RELIABLE,
    QosDurability.TRANSIENT_LOCAL,
    ZERO,
    ZERO,
    QosLiveliness.AUTOMATIC,
    ZERO,
    False,
)
"""What `ros2 bag play` needs to republish /tf_static latched (transient local)."""
COMPRESSIONS = {
    "mcap": ("zstd", "lz4", "none"),
    "bag2": ("zstd", "none"),
    "bag1": ("lz4", "bz2", "none"),
}
DEFAULT_COMPRESSION = {"mcap": "zstd", "bag2": "zstd", "bag1": "lz4"}


class Output(Protocol):
    def add_topic(self, topic: str, typename: str, *, latched: bool = False) -> int: ...
    def write(self, channels: np.ndarray, times: np.ndarray, messages: Serialized) -> None: ...
    def add_metadata(self, name: str, data: dict[str, str]) -> None: ...
    def add_attachment(self, name: str, media_type: str, data: bytes) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


def _qos_yaml() -> str:
    """offered_qos_profiles as rosbag2 writes it into MCAP channel metadata (v8 YAML)."""
    q = LATCHED_QOS
    return yaml.safe_dump(
        [
            {
                "history": q.history.value,
                "depth": q.depth,
                "reliability": q.reliability.value,
                "durability": q.durability.value,
                "deadline": {"sec": 0, "nsec": 0},
                "lifespan": {"sec": 0, "nsec": 0},
                "liveliness": q.liveliness.value,
                "liveliness_lease_duration": {"sec": 0, "nsec": 0},
                "avoid_ros_namespace_conventions": False,
            }
        ]
    ).strip()


def write_each(
    write, connections: list, channels: np.ndarray, times: np.ndarray, messages: Serialized
) -> None:
    """Hand merged messages one by one to a rosbags writer (its API takes one at a time)."""
    data, off = messages.data, messages.offsets
    for i, (c, t) in enumerate(zip(channels.tolist(), times.tolist(), strict=True)):
        write(connections[c], t, data[off[i] : off[i + 1]].tobytes())


def channel_schema(
    typename: str, encoding: str, types: ExportTypes | None = None
) -> tuple[str, str, bytes, str, str | None]:
    """(schema name, schema encoding, schema data, message encoding, ROS 1 md5sum) of a
    message type (generated DDL types from `types`) in an export encoding (ros2 | ros1 |
    protobuf): what an MCAP channel or a Foxglove WebSocket advertisement carries."""
    types = types or ExportTypes()
    if encoding == "protobuf":
        from bridge_lake.export.protobuf import ddl, schema

        struct = types.structs.get(typename)
        name, data = ddl.schema(struct) if struct is not None else schema(typename)
        return name, "protobuf", data, "protobuf", None
    d = types.definition(typename, 2 if encoding == "ros2" else 1)
    return d.name, d.encoding, d.text.encode(), "cdr" if encoding == "ros2" else "ros1", d.md5sum


class McapOutput:
    """MCAP with ROS 2 (CDR) or ROS 1 messages, whose schemas carry the full message
    definitions, or with protobuf messages (Foxglove schemas and the project's own), whose
    schemas carry a FileDescriptorSet: what Foxglove and the mcap decoders read."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        encoding: str,
        compression: str,
        chunk_size: int = 4 << 20,
        types: ExportTypes | None = None,
    ) -> None:
        self.encoding = encoding
        self.types = types or ExportTypes()
        self.writer = McapWriter(
            path,
            profile={"ros2": "ros2", "ros1": "ros1"}.get(encoding, ""),
            library=LIBRARY,
            compression=compression,  # type: ignore[arg-type]
            chunk_size=chunk_size,
        )
        self._schemas: dict[str, int] = {}

    def add_topic(self, topic: str, typename: str, *, latched: bool = False) -> int:
        name, schema_encoding, data, message_encoding, md5 = channel_schema(
            typename, self.encoding, self.types
        )
        if name not in self._schemas:
            self._schemas[name] = self.writer.add_schema(name, schema_encoding, data)
        meta = {}
        if latched:
            meta = (
                {"latching": "1"}
                if self.encoding == "ros1"
                else {"offered_qos_profiles": _qos_yaml()}
            )
        if md5:
            meta["md5sum"] = md5
        return self.writer.add_channel(topic, message_encoding, self._schemas[name], meta)

    def add_json_topic(self, topic: str, title: str, schema: bytes) -> int:
        """A channel of JSON messages with a JSON Schema (generic ADTF tables)."""
        if title not in self._schemas:
            self._schemas[title] = self.writer.add_schema(title, "jsonschema", schema)
        return self.writer.add_channel(topic, "json", self._schemas[title], {})

    def write(self, channels: np.ndarray, times: np.ndarray, messages: Serialized) -> None:
        self.writer.write_messages(channels, times, times, None, messages)

    def add_metadata(self, name: str, data: dict[str, str]) -> None:
        self.writer.add_metadata(name, data)

    def add_attachment(self, name: str, media_type: str, data: bytes) -> None:
        self.writer.add_attachment(name, media_type, data)

    def close(self) -> None:
        self.writer.finish()

    def abort(self) -> None:
        self.writer.abort()


class Bag2Output:
    """A ROS 2 bag folder (metadata.yaml + one storage file), MCAP storage by default."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        storage: str,
        compression: str,
        types: ExportTypes | None = None,
    ) -> None:
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self.writer = Bag2Writer(Path(path), version=9, storage_plugin=plugin)
        if compression == "zstd":
            mode = CompressionMode.STORAGE if storage == "mcap" else CompressionMode.MESSAGE
            self.writer.set_compression(mode, CompressionFormat.ZSTD)
        self.writer.open()
        self.connections: list = [None]
        self.store = (types or ExportTypes()).typestore(2)

    def add_topic(self, topic: str, typename: str, *, latched: bool = False) -> int:
        conn = self.writer.add_connection(
            topic,
            typename,
            typestore=self.store,
            offered_qos_profiles=[LATCHED_QOS] if latched else (),
        )
        self.connections.append(conn)
        return len(self.connections) - 1

    def write(self, channels: np.ndarray, times: np.ndarray, messages: Serialized) -> None:
        write_each(self.writer.write, self.connections, channels, times, messages)

    def add_metadata(self, name: str, data: dict[str, str]) -> None:
        self.writer.set_custom_data(name, yaml.safe_dump(data, sort_keys=True))

    def add_attachment(self, name: str, media_type: str, data: bytes) -> None:
        """ROS 2 bags have no attachments; the data goes into metadata.yaml's custom data."""
        self.writer.set_custom_data(f"attachment:{name}", data.decode("utf-8", "replace"))

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.close()


class Bag1Output:
    """A ROS 1 bag (v2.0): LZ4 chunks by default, BZ2 or none; chunk size settable. Messages
    go in a batch at a time (`bag1_writer`)."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        compression: str,
        chunk_size: int,
        types: ExportTypes | None = None,
    ) -> None:
        self.writer = Bag1Writer(Path(path))
        fmt = {
            "lz4": Bag1Writer.CompressionFormat.LZ4,
            "bz2": Bag1Writer.CompressionFormat.BZ2,
        }.get(compression)
        if fmt is not None:
            self.writer.set_compression(fmt)
        self.writer.chunk_threshold = chunk_size
        self.writer.open()
        self.connections: list = [None]
        self.types = types or ExportTypes()
        self.store = self.types.typestore(1)

    def add_topic(self, topic: str, typename: str, *, latched: bool = False) -> int:
        d = self.types.definition(typename, 1)
        conn = self.writer.add_connection(
            topic,
            typename,
            typestore=self.store,
            msgdef=d.text,
            md5sum=d.md5sum,
            callerid="/bridge_lake",
            latching=1 if latched else None,
        )
        self.connections.append(conn)
        return len(self.connections) - 1

    def write(self, channels: np.ndarray, times: np.ndarray, messages: Serialized) -> None:
        ids = np.array([-1] + [c.id for c in self.connections[1:]], np.int64)
        self.writer.write_batch(ids[channels], times, messages)

    def add_metadata(self, name: str, data: dict[str, str]) -> None:
        """ROS 1 bags have no metadata records: kept in the export's sidecar summary."""

    def add_attachment(self, name: str, media_type: str, data: bytes) -> None:
        """ROS 1 bags have no attachments: kept in the export's sidecar summary."""

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.close()

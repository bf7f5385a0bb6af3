"""What `bridge-lake play` plays: a bag or MCAP, a scene by its manifest, or a lake drive.

Every source has `channels` (id → RosChannel), `start_ns`/`end_ns`, `time_ordered` and
`messages(start_ns)` yielding RosMessages with the payload bytes as stored (files) or as the
export serializes them (drives), never decoded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.ros.readers import Recording, RosChannel, RosMessage, open_recording


class SourceError(BridgeLakeError):
    """A source that cannot be played: missing, unreadable, or not what it claims."""


def open_source(path: str | os.PathLike, *, variant: str | None = None) -> Recording:
    """A bag, MCAP or ROS 2 bag folder; a scene manifest (.json) plays its scene file, or
    with `variant` the fault-injected file of that variant beside it."""
    p = Path(path)
    if p.suffix == ".json" and p.is_file():
        return open_recording(scene_file(p, variant))
    if variant is not None:
        raise SourceError(f"--variant needs a scene manifest (.json), not {p}")
    return open_recording(p)


def scene_file(manifest: str | os.PathLike, variant: str | None) -> Path:
    """The file a scene manifest describes (or its variant's), inside the manifest's folder."""
    from bridge_lake.scenes.sets import load_manifest, manifest_path_for, scene_file_name

    manifest = Path(manifest)
    doc = load_manifest(manifest)
    if variant is not None and variant != doc.get("variant"):
        other = manifest.parent / scene_file_name(str(doc["scene_id"]), variant)
        other = manifest_path_for(other)
        if not other.is_file():
            made = sorted(
                q.name for q in manifest.parent.glob(f"{doc['scene_id']}*.json") if q != manifest
            )
            raise SourceError(
                f"{manifest}: scene {doc['scene_id']} has no variant {variant!r} "
                f"({other.name} is missing; beside it: {', '.join(made) or 'no variants'})"
            )
        doc = load_manifest(other)
    name = str(doc["file"].get("name") or "")
    if not name or Path(name).name != name:  # a manifest never points outside its folder
        raise SourceError(f"{manifest}: scene file name {name!r} is not a plain file name")
    return manifest.parent / name


class DriveSource(Recording):
    """A lake drive served through its export topic mapping: the exporter's time-ordered
    merge of every lane (`plan_stream(...).messages()`), no file written."""

    def __init__(
        self,
        lake: Any,
        drive: str,
        *,
        encoding: str = "ros2",
        mapping: str | None = None,
        topics: list[str] | None = None,
    ) -> None:
        from bridge_lake.export.exporter import ExportRequest, plan_stream
        from bridge_lake.export.writers import channel_schema

        self.path, self.kind, self.time_ordered = Path(drive), "drive", True
        self._lake = lake
        self._request = ExportRequest(
            format="mcap", encoding=encoding, mapping=mapping, topics=topics or None
        )
        self._plan = plan_stream
        stream = plan_stream(self._lake, drive, self._request)
        self.drive = drive
        self.channels = {}
        for i, t in enumerate(stream.topics):
            if t.json_title is not None:
                schema = (t.json_title, "jsonschema", t.json_schema or b"", "json", None)
            else:
                schema = channel_schema(t.type, encoding, stream.types)
            name, sch_enc, data, msg_enc, md5 = schema
            meta = {"md5sum": md5} if md5 else {}
            self.channels[i] = RosChannel(i, t.topic, name, sch_enc, data, msg_enc, t.latched, meta)
        self.start_ns, self.end_ns = stream.start_ns, stream.end_ns
        self.message_count = sum(lane.rows for lane in stream.lanes)
        self._first = stream

    def messages(self, start_ns: int | None = None) -> Iterator[RosMessage]:
        import dataclasses

        if start_ns is None or start_ns <= self.start_ns:
            stream, self._first = (
                self._first or self._plan(self._lake, self.drive, self._request),
                None,
            )
        else:
            request = dataclasses.replace(self._request, start=start_ns)
            stream = self._plan(self._lake, self.drive, request)
        index = {t.topic: i for i, t in enumerate(stream.topics)}
        by_index = {i: self.channels[index[t.topic]] for i, t in enumerate(stream.topics)}
        for c, t, m in stream.messages():
            data, off = m.data, m.offsets.tolist()
            for i, (ch, log) in enumerate(zip(c.tolist(), t.tolist(), strict=True)):
                yield RosMessage(by_index[ch], log, data[off[i] : off[i + 1]].tobytes())

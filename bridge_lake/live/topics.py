"""Normalized rows → ROS messages through the export's topic mapping and builders.

The same mapping (`export/mappings/adtf.yaml`, or `--mapping`) and the same builders
(`export.source`, `export.generic`) as the offline export, fed with the rows the live sink
got in one poll instead of rows read back from Parquet. A lane is (rule, stream, split
value), as the exporter plans it; its builder keeps its state across polls (the H.264
decoder of a camera). Generated DDL types are planned when a stream's lane first appears
(`generic_types.plan_generic`, with the DDL the normalizer declared for the stream).

What cannot be live (said in `offline_only`, never dropped silently): rules on the
calibrated layer (/tf: poses are fitted over the whole drive), `json` rules and lidar points
in base_link (they need the lake). /tf_static needs only the rig: with one (`use_rig`) it is
published once, stamped at the first message, and cameras get their optical frame, as the
exporter does. A camera decoded to Images whose lane starts inside a group of pictures (the
next part of a split recording, when the previous part's stream had no name) starts at its
first key frame; the frames before it cannot be decoded and are counted as unpublished.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake.export.generic_types import FALLBACK, lane_type, plan_generic
from bridge_lake.export.kinds import KINDS
from bridge_lake.export.kinds.ddl import RowSampleBuilder
from bridge_lake.export.kinds.image import IMAGE
from bridge_lake.export.kinds.json_rows import JSON_TYPE
from bridge_lake.export.kinds.point_cloud2 import LAYOUTS, PointCloudBuilder
from bridge_lake.export.kinds.tf_message import TfStaticBuilder
from bridge_lake.export.mapping import Mapping, TopicRule
from bridge_lake.export.messages import ExportTypes, Serialized
from bridge_lake.export.source import Builder, ExportError, Lane
from bridge_lake.formats.video import STREAMED
from bridge_lake.live.sink import LiveSink, Written

ENCODING = "ros2"
LIVE_DRIVE = "live"
"""The drive name builders are given (they read nothing from a lake here)."""
POINTS_TABLE = "lidar_points"
TF_STATIC_TABLE = "calibrated/tf_static"
TF_TYPE = "tf2_msgs/msg/TFMessage"
POINT_CLOUD_TYPE = "sensor_msgs/msg/PointCloud2"


@dataclass
class LiveLane:
    lane: Lane
    builder: Builder
    type: str
    messages: int = 0
    awaiting_key: bool = False
    """a lane decoding a camera that has not seen its first key frame yet"""


@dataclass
class Produced:
    """One poll's messages of one topic, in time order."""

    topic: str
    type: str
    times: np.ndarray
    messages: Serialized


@dataclass
class LiveTopics:
    """Turns each poll's rows into messages (see module)."""

    mapping: Mapping
    types: ExportTypes = field(default_factory=ExportTypes)
    lanes: dict[tuple, LiveLane] = field(default_factory=dict)
    offline_only: dict[str, str] = field(default_factory=dict)
    """topic rule -> why it has no live messages"""
    unpublished: dict[str, int] = field(default_factory=dict)
    """stream/table without a topic (no rule of the mapping takes them), or a camera's frames
    before its first key frame -> rows"""
    warnings: list[str] = field(default_factory=list)
    static_frames: set[str] = field(default_factory=set)
    latched: set[str] = field(default_factory=set)
    """topics whose messages every subscriber should get (/tf_static)"""

    def use_rig(self, rows: pa.Table, stamp_ns: int) -> list[Produced]:
        """The rig's /tf_static (every rule on calibrated/tf_static), once, stamped at
        `stamp_ns` as the exporter stamps it at the drive's start."""
        self.static_frames = set(rows.column("child_frame").to_pylist())
        out = []
        for rule in self.mapping.topics:
            if rule.table != TF_STATIC_TABLE:
                continue
            self.offline_only.pop(rule.topic, None)
            lane = Lane(rule.topic, rule, "", {}, extra={"stamp_ns": stamp_ns})
            encode = KINDS[TF_TYPE].encoder(ENCODING)
            data = TfStaticBuilder(None, LIVE_DRIVE, lane, encode).build(rows)
            self.latched.add(rule.topic)
            out.append(Produced(rule.topic, TF_TYPE, np.array([stamp_ns], np.int64), data))
        return out

    def __post_init__(self) -> None:
        for rule in self.mapping.topics:
            if not rule.table.startswith("normalized/"):
                self.offline_only[rule.topic] = f"made from {rule.table} (not live)"
            elif rule.type == JSON_TYPE:
                self.offline_only[rule.topic] = "json topics need the lake's table schema"

    def messages(self, written: list[Written], sink: LiveSink) -> list[Produced]:
        """The messages of one poll's rows, per lane, in the order the rows came."""
        points = _points_by_stream(written)
        out: list[Produced] = []
        for w in written:
            if w.table == POINTS_TABLE:
                continue
            taken = False
            for i, rule in enumerate(self.mapping.topics):
                if rule.topic in self.offline_only:
                    continue
                if not fnmatch.fnmatchcase(f"normalized/{w.table}", rule.table):
                    continue
                for selection, rows in _lane_rows(rule, w):
                    taken = True
                    produced = self._build(i, rule, selection, rows, sink, points.get(w.stream))
                    if produced is not None:
                        out.append(produced)
            if not taken:
                key = f"{w.stream} ({w.table})"
                self.unpublished[key] = self.unpublished.get(key, 0) + w.rows.num_rows
        return out

    def _build(
        self,
        index: int,
        rule: TopicRule,
        selection: dict,
        rows: pa.Table,
        sink: LiveSink,
        points: pa.Table | None,
    ) -> Produced | None:
        key = (index, tuple(sorted(selection.items())))
        live = self.lanes.get(key)
        if live is None:
            live = self.lanes[key] = self._lane(rule, selection, rows, sink)
        if isinstance(live.builder, _LivePointCloud):
            live.builder.points = _ScanPoints(points)
        if live.awaiting_key:
            rows = self._from_key_frame(live, rows)
            if not rows.num_rows:
                return None
        data = live.builder.build(rows)
        live.messages += len(data)
        return Produced(live.lane.topic, live.type, live.builder.t(rows), data)

    def _lane(self, rule: TopicRule, selection: dict, rows: pa.Table, sink: LiveSink) -> LiveLane:
        split = selection.get(rule.split_by) if rule.split_by else None
        frame = rule.frame_id or ""
        if not frame and "frame_id" in rows.column_names and rows.num_rows:
            frame = str(rows.column("frame_id")[0].as_py() or "")
        if rule.table == "normalized/camera_frames" and f"{frame}_optical" in self.static_frames:
            frame = f"{frame}_optical"  # as the exporter: images in the optical frame
        lane = Lane(rule.topic_for(split), rule, frame, selection)
        plan = plan_generic([lane], sink.ddl_catalog)
        self.types.add(plan.types.texts, plan.types.structs)
        self.warnings += plan.warnings
        kind = KINDS[rule.type]
        if FALLBACK in lane.extra:
            _, fallback = kind.pick(lane) if kind.pick else (None, kind)
            builder: Builder = _LiveRowSample(lane, fallback.encoder(ENCODING))
        elif rule.type == POINT_CLOUD_TYPE:
            builder = _LivePointCloud(lane, kind.encoder(ENCODING))
        else:
            builder = kind.open(None, LIVE_DRIVE, lane, ENCODING, 0)
        decodes = rule.type == IMAGE and "is_keyframe" in rows.column_names
        return LiveLane(lane, builder, lane_type(lane), awaiting_key=decodes)

    def _from_key_frame(self, live: LiveLane, rows: pa.Table) -> pa.Table:
        """The rows from the lane's first key frame on (streamed encodings: the frames before
        it cannot be decoded); those before it are counted as unpublished."""
        streamed = pc.is_in(rows.column("encoding"), pa.array(sorted(STREAMED)))
        starts = pc.or_(pc.invert(streamed), pc.fill_null(rows.column("is_keyframe"), False))
        first = np.flatnonzero(starts.to_numpy(zero_copy_only=False))
        skipped = int(first[0]) if len(first) else rows.num_rows
        if skipped:
            stream = live.lane.selection.get("stream", "?")
            key = f"{stream} (camera_frames) before its first key frame, {live.lane.topic}"
            self.unpublished[key] = self.unpublished.get(key, 0) + skipped
        if len(first):
            live.awaiting_key = False
        return rows.slice(skipped)


def _lane_rows(rule: TopicRule, w: Written) -> list[tuple[dict, pa.Table]]:
    """The rows of `w` per lane of `rule`: (selection, rows), as the exporter's lanes select
    them (stream, `where` globs, `split_by` value). The rows are one stream's; a column
    with one value in them (the usual case) needs no grouping."""
    keys = [c for c in (*rule.where, rule.split_by) if c and c in w.rows.column_names]
    keys = list(dict.fromkeys(k for k in keys if k != "stream"))
    values = {k: pc.unique(w.rows.column(k)).to_pylist() for k in keys}
    if all(len(v) == 1 for v in values.values()):
        combos = [{"stream": w.stream, **{k: v[0] for k, v in values.items()}}]
    else:
        grouped = w.rows.select(keys).group_by(keys).aggregate([]).to_pylist()
        combos = [{"stream": w.stream, **c} for c in grouped]
    out = []
    for combo in sorted(combos, key=lambda c: [str(c[k]) for k in keys]):
        if not all(rule.selects(k, v) for k, v in combo.items()):
            continue
        rows = w.rows
        if len(combos) > 1:
            mask = None
            for k in keys:
                e = pc.equal(w.rows.column(k), combo[k])
                mask = e if mask is None else pc.and_(mask, e)
            rows = w.rows.filter(mask)
        selection = {k: v for k, v in combo.items() if k in ("stream", rule.split_by)}
        out.append((selection, rows))
    return out


def _points_by_stream(written: list[Written]) -> dict[str, pa.Table]:
    parts: dict[str, list[pa.Table]] = {}
    for w in written:
        if w.table == POINTS_TABLE:
            parts.setdefault(w.stream, []).append(w.rows)
    return {k: pa.concat_tables(v) for k, v in parts.items()}


class _ScanPoints:
    """The points of one poll's scans, read by scan-id range as `source.ScanPoints` does."""

    def __init__(self, points: pa.Table | None) -> None:
        self.points = points

    def read(self, lo: int, hi: int) -> pa.Table:
        if self.points is None:
            raise ExportError(f"scans {lo}..{hi} came without their points")
        ids = self.points.column("scan_id").to_numpy()
        if not len(ids) or (ids.min() >= lo and ids.max() <= hi):
            return self.points  # the poll's points of the lane's scans (usual): no copy
        keep = (ids >= lo) & (ids <= hi)
        return self.points.filter(pa.array(keep))


class _LivePointCloud(PointCloudBuilder):
    """PointCloudBuilder whose points come from the poll, not from a lake partition."""

    def __init__(self, lane: Lane, encode) -> None:
        Builder.__init__(self, None, LIVE_DRIVE, lane, encode)
        if lane.rule.options.get("points", "sensor") != "sensor":
            raise ExportError(f"{lane.topic}: points in base_link need the calibrated layer")
        layout = lane.rule.options.get("layout", "xyzirt")
        if layout not in LAYOUTS:
            raise ExportError(f"{lane.topic}: options.layout must be one of {list(LAYOUTS)}")
        self.layout = LAYOUTS[layout]
        self.points = _ScanPoints(None)


class _LiveRowSample(RowSampleBuilder):
    """Rows of a struct without a ROS type as JSON samples (no lake schema to look up)."""

    def __init__(self, lane: Lane, encode) -> None:
        Builder.__init__(self, None, LIVE_DRIVE, lane, encode)


__all__ = ["LIVE_DRIVE", "LiveTopics", "Produced"]

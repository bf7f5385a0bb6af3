"""tf2_msgs/TFMessage: /tf from calibrated/poses (map → base_link per pose) and /tf_static
from calibrated/tf_static (every static transform in one message); protobuf:
foxglove.FrameTransforms.

A TFMessage holds the same k transforms (same frame ids, in the same order) in every
message of a call, so only stamps and poses vary: fixed size, one (n, size) array.
geometry_msgs Vector3/Quaternion are runs of float64 with no padding between them. ROS 1
TransformStamped headers get seq 0: they are nested, so no publisher numbers them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed
from bridge_lake.export.protobuf.geometry import doubles
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Batch, Builder, Lane, dataset, np_column
from bridge_lake.export.trim import Window
from bridge_lake.formats.ros.wire import F8, U4, Layout, split_stamps

STATIC_TABLE = "calibrated/tf_static"


@dataclass(frozen=True)
class TfColumns:
    stamp: np.ndarray
    """n (one per message) or n * k (one per transform)"""
    parents: list[str]
    children: list[str]
    translation: np.ndarray
    """(n, k, 3)"""
    rotation: np.ndarray
    """(n, k, 4) xyzw"""

    def stamps(self) -> np.ndarray:
        """(n, k): each transform's stamp."""
        n, k = self.translation.shape[:2]
        per_row = 1 if self.stamp.size == n else k
        return np.broadcast_to(self.stamp.reshape(n, per_row), (n, k))


def columns(
    stamp_ns: ArrayLike,
    *,
    parent_frame_ids: Sequence[str],
    child_frame_ids: Sequence[str],
    translation: ArrayLike,
    rotation: ArrayLike,
    transforms_per_message: int,
) -> TfColumns:
    """n = m / k messages of k = transforms_per_message transforms: transform j of every
    message goes from parent_frame_ids[j] to child_frame_ids[j] (k names each); translation
    (m, 3) and rotation (m, 4) xyzw list the transforms message by message. stamp_ns has one
    stamp per message (n) or per transform (m). /tf: k = 1, one message per pose time;
    /tf_static: n = 1 message holding every static transform."""
    k = transforms_per_message
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"transforms_per_message must be a positive int, got {k!r}")
    for name, ids in (("parent_frame_ids", parent_frame_ids), ("child_frame_ids", child_frame_ids)):
        if isinstance(ids, str) or len(ids) != k:
            raise ValueError(f"{name} must be a sequence of {k} frame ids (transforms_per_message)")
    trans = np.asarray(translation)
    if trans.ndim != 2 or trans.shape[0] % k:
        raise ValueError(f"translation must be (m, 3) with m a multiple of {k}, got {trans.shape}")
    k = int(k)
    n = trans.shape[0] // k
    trans = arg.rows("translation", trans, n * k, F8, (3,)).reshape(n, k, 3)
    rot = arg.rows("rotation", rotation, n * k, F8, (4,)).reshape(n, k, 4)
    stamp = arg.stamps(stamp_ns)
    if stamp.size not in (n, n * k):
        raise ValueError(f"stamp_ns must have {n} (per message) or {n * k} (per transform) stamps")
    parents = [arg.text(f"parent_frame_ids[{j}]", p) for j, p in enumerate(parent_frame_ids)]
    children = [arg.text(f"child_frame_ids[{j}]", c) for j, c in enumerate(child_frame_ids)]
    return TfColumns(stamp, parents, children, trans, rot)


def ros(c: TfColumns, ros: int, seq_start: int) -> Serialized:
    """(nested headers only: `seq_start` has nothing to number)"""
    n, k = c.translation.shape[:2]
    per_row = 1 if c.stamp.size == n else k
    sec, nanosec = (
        np.broadcast_to(half.reshape(n, per_row), (n, k)) for half in split_stamps(c.stamp, ros)
    )
    layout = Layout.message(ros)
    layout.constant(U4, k)
    values: dict[str, np.ndarray] = {}
    for j, (parent, child) in enumerate(zip(c.parents, c.children, strict=True)):
        layout.header(parent, prefix=f"{j}.", seq=False)
        layout.string(child)
        layout.field(f"{j}.translation", F8, 3)
        layout.field(f"{j}.rotation", F8, 4)
        values[f"{j}.sec"], values[f"{j}.nanosec"] = sec[:, j], nanosec[:, j]
        values[f"{j}.translation"] = c.translation[:, j]
        values[f"{j}.rotation"] = c.rotation[:, j]
    return fixed(layout.fill(n, values))


def protobuf(c: TfColumns) -> Serialized:
    """foxglove.FrameTransforms of k foxglove.FrameTransform each."""
    n = c.translation.shape[0]
    stamps = c.stamps()
    fields = Fields(n)
    for j, (parent, child) in enumerate(zip(c.parents, c.children, strict=True)):
        transform = Fields(n)
        transform.timestamp(1, stamps[:, j])
        transform.string(2, parent)
        transform.string(3, child)
        transform.message(4, doubles(c.translation[:, j]))
        transform.message(5, doubles(c.rotation[:, j]))
        fields.message(1, transform)
    return fields.encode()


def _pose(rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.stack([np_column(rows, c) for c in ("x_m", "y_m", "z_m")], -1),
        np.stack([np_column(rows, c) for c in ("qx", "qy", "qz", "qw")], -1),
    )


class TfBuilder(Builder):
    """calibrated/poses → one TFMessage (map → base_link) per pose."""

    columns = ["time_ns", "frame_id", "child_frame_id", "x_m", "y_m", "z_m", "qx", "qy", "qz", "qw"]

    def build(self, rows: pa.Table) -> Serialized:
        if not rows.num_rows:
            return Serialized(np.zeros(0, np.uint8), np.zeros(1, np.int64))
        return super().build(rows)

    def columns_of(self, rows: pa.Table) -> TfColumns:
        translation, rotation = _pose(rows)
        return columns(
            self.t(rows),
            parent_frame_ids=["map"],
            child_frame_ids=["base_link"],
            translation=translation,
            rotation=rotation,
            transforms_per_message=1,
        )


class TfStaticBuilder(Builder):
    """calibrated/tf_static → one TFMessage holding every static transform, stamped at the
    export's start (latched: a replay node gets it whenever it subscribes)."""

    columns = ["parent_frame", "child_frame", "x_m", "y_m", "z_m", "qx", "qy", "qz", "qw"]

    def batches(self, windows: list[Window] | None) -> Iterator[Batch]:
        layer, table = self.lane.rule.table.split("/")
        rows = dataset(self.lake, layer, table, self.drive).to_table(columns=self.columns)
        if rows.num_rows:
            stamp = int(self.lane.extra["stamp_ns"]) - self.shift_ns
            yield Batch(np.array([stamp], np.int64), self.build(rows))

    def columns_of(self, rows: pa.Table) -> TfColumns:
        k = rows.num_rows
        stamp = int(self.lane.extra["stamp_ns"]) - self.shift_ns
        translation, rotation = _pose(rows)
        return columns(
            np.full(k, stamp, np.int64),
            parent_frame_ids=rows.column("parent_frame").to_pylist(),
            child_frame_ids=rows.column("child_frame").to_pylist(),
            translation=translation,
            rotation=rotation,
            transforms_per_message=k,
        )


def _pick(lane: Lane) -> tuple[type[Builder], Kind]:
    return (TfStaticBuilder if lane.rule.table == STATIC_TABLE else TfBuilder), KIND


CODEC = Codec(columns, ros, protobuf, "foxglove.FrameTransforms", "tf_message")
TABLES = (STATIC_TABLE, "calibrated/poses")
KIND = Kind("tf2_msgs/msg/TFMessage", TABLES, CODEC, pick=_pick, faults=("tf",))

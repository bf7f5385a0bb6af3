"""Generated DDL messages (`ddl_types`) serialized in bulk to ROS 1 or CDR from a generic
table's rows: no Python object per message.

The walk over the message's fields computes where each field goes and records it as an
operation on all instances at once (a column of values, a constant, ragged bytes):

- a message without variable-length arrays has one layout for every message, so positions
  are plain integers and every operation is one strided copy into an (n, size) array (the
  same approach as the fixed-layout messages of `wire.py`: ~ a memcpy per field);
- otherwise positions are per-message numpy arrays (a dynamic array moves everything after
  it, and in CDR the padding after it depends on where it ended), operations scatter into
  one flat buffer, and arrays of structs of variable length are walked in rounds: round j
  places the j-th element of every message that has more than j.

Rules (as rosbags' serializers, checked byte for byte by the tests): ROS 1 packs everything
without padding; CDR aligns every primitive to its size counted from the byte after the
4-byte encapsulation header, a sequence is a uint32 count (aligned to 4) and its elements
aligned to their size only when there is at least one; strings are uint32 length + bytes
(+ NUL in CDR).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bridge_lake.export.messages.ddl_columns import Ragged, RaggedStructs, Values
from bridge_lake.export.messages.ddl_types import RosStruct
from bridge_lake.export.messages.serialized import Serialized, fixed
from bridge_lake.formats.ros.wire import ENCAPSULATION_CDR_LE, split_stamps

Position = int | np.ndarray


@dataclass
class _Op:
    pos: Position
    rows: np.ndarray | None
    """message index of each instance; None: instance i is message i"""
    data: np.ndarray | bytes
    """(k, s) uint8 rows, constant bytes, or flat ragged bytes (with `lengths`)"""
    lengths: np.ndarray | None = None


class _Walk:
    def __init__(self, ros: int) -> None:
        self.cdr = ros == 2
        self.ops: list[_Op] = []

    def align(self, pos: Position, size: int) -> Position:
        if not self.cdr or size == 1:
            return pos
        return (pos + size - 1) // size * size

    def put(self, pos: Position, rows, data) -> None:
        self.ops.append(_Op(pos, rows, data))

    def struct(self, st: RosStruct, values: Values, pos: Position, rows) -> Position:
        for f in st.fields:
            v = values.fields[f.name]
            if f.struct is None:
                dt = np.dtype(f.dtype)
                size = dt.itemsize
                if f.array == -1:
                    assert isinstance(v, Ragged)
                    pos = self.count(pos, rows, v.counts)
                    if size > 4 and self.cdr:
                        pos = np.where(v.counts > 0, self.align(pos, size), pos)
                    raw = np.ascontiguousarray(v.values.astype(dt, copy=False)).view(np.uint8)
                    self.ops.append(_Op(pos, rows, raw, v.counts * size))
                    pos = pos + v.counts * size
                    continue
                pos = self.align(pos, size)
                arr = np.ascontiguousarray(np.asarray(v).astype(dt, copy=False))
                width = size * (f.array or 1)
                self.put(pos, rows, arr.view(np.uint8).reshape(values.k, width))
                pos = pos + width
            elif f.array is None:
                assert isinstance(v, Values)
                pos = self.struct(f.struct, v, pos, rows)
            elif f.array == -1:
                assert isinstance(v, RaggedStructs)
                pos = self.count(pos, rows, v.counts)
                pos = self.rounds(f.struct, v, np.asarray(pos), rows, values.k)
            else:
                assert isinstance(v, Values)
                for j in range(f.array):
                    pos = self.struct(f.struct, v.every(j, f.array), pos, rows)
        return pos

    def count(self, pos: Position, rows, counts: np.ndarray) -> np.ndarray:
        pos = self.align(pos, 4)
        self.put(pos, rows, counts.astype("<u4").view(np.uint8).reshape(-1, 4))
        return np.broadcast_to(np.asarray(pos) + 4, counts.shape).copy()

    def rounds(self, st: RosStruct, v: RaggedStructs, pos: np.ndarray, rows, k: int) -> np.ndarray:
        counts = v.counts
        rows = np.arange(k, dtype=np.int64) if rows is None else rows
        for j in range(int(counts.max()) if len(counts) else 0):
            sel = np.flatnonzero(counts > j)
            inst = v.values.take(v.offsets[:-1][sel] + j)
            pos[sel] = self.struct(st, inst, pos[sel], rows[sel])
        return pos


def _header(walk: _Walk, n: int, stamp_ns: np.ndarray, frame_id: str, seq_start: int) -> int:
    """std_msgs/Header at the message start; returns the position after it."""
    sec, nanosec = split_stamps(stamp_ns, 2 if walk.cdr else 1)
    pos = 0
    if not walk.cdr:
        seq = (np.arange(n, dtype=np.int64) + seq_start) % 2**32
        walk.put(0, None, seq.astype("<u4").view(np.uint8).reshape(n, 4))
        pos = 4
    stamp = np.empty((n, 2), "<u4")
    stamp[:, 0] = sec.astype(np.int64) & 0xFFFFFFFF
    stamp[:, 1] = nanosec
    walk.put(pos, None, stamp.view(np.uint8).reshape(n, 8))
    raw = frame_id.encode() + (b"\0" if walk.cdr else b"")
    walk.put(pos + 8, None, len(raw).to_bytes(4, "little") + raw)
    return pos + 12 + len(raw)


def serialize_values(
    st: RosStruct,
    values: Values,
    stamp: np.ndarray,
    frame_id: str,
    *,
    ros: int,
    seq_start: int = 0,
) -> Serialized:
    """n messages of the generated type `st` (with its header) from its validated values."""
    walk = _Walk(ros)
    n = values.k
    start = _header(walk, n, stamp, frame_id, seq_start) if st.header else 0
    end = walk.struct(st, values, start, None)
    enc = len(ENCAPSULATION_CDR_LE) if walk.cdr else 0
    if isinstance(end, int):
        out = np.zeros((n, enc + end), np.uint8)
        if enc:
            out[:, :enc] = np.frombuffer(ENCAPSULATION_CDR_LE, np.uint8)
        for op in walk.ops:
            p = enc + int(op.pos)
            if isinstance(op.data, bytes):
                out[:, p : p + len(op.data)] = np.frombuffer(op.data, np.uint8)
            else:
                out[:, p : p + op.data.shape[1]] = op.data
        return fixed(out)
    sizes = np.broadcast_to(np.asarray(end, np.int64) + enc, (n,))
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), np.uint8)
    if enc:
        out[(offsets[:-1, None] + np.arange(enc)).reshape(-1)] = np.tile(
            np.frombuffer(ENCAPSULATION_CDR_LE, np.uint8), n
        )
    base = offsets[:-1] + enc
    for op in walk.ops:
        _scatter(out, base, op, n)
    return Serialized(out, offsets)


def _scatter(out: np.ndarray, base: np.ndarray, op: _Op, n: int) -> None:
    rows = np.arange(n, dtype=np.int64) if op.rows is None else op.rows
    dst = base[rows] + np.broadcast_to(np.asarray(op.pos, np.int64), rows.shape)
    if op.lengths is not None:
        lengths = np.asarray(op.lengths, np.int64)
        total = int(lengths.sum())
        if total:
            starts = np.cumsum(lengths) - lengths
            out[np.repeat(dst - starts, lengths) + np.arange(total)] = op.data
        return
    data = np.frombuffer(op.data, np.uint8)[None, :] if isinstance(op.data, bytes) else op.data
    width = data.shape[1]
    if width and len(dst):
        out[dst[:, None] + np.arange(width)] = data


__all__ = ["serialize_values"]

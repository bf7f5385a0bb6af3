"""Protobuf wire format for n messages at once, in the canonical form protobuf itself writes.

A message is its set fields in field-number order; a field is a tag (varint of
number << 3 | wire type) then its value: a varint, 4 or 8 little-endian bytes, or a varint
length and that many bytes (strings, bytes, packed repeated scalars, nested messages). proto3
leaves out scalar fields holding their default (0, bitwise +0.0, "", empty) but writes a set
nested message even when it is empty. upb, protobuf's Python backend, serializes exactly so;
the tests check that re-serializing every decoded message gives back our bytes.

`Fields` gathers one field at a time for all n messages as parts: per-call constants, (n, k)
rows of fixed size, or ragged bytes. A nested message's parts are spliced into its parent's
behind its length prefix, so `encode` assembles all messages with one join (serialized.join)
and copies large payloads (points, pixels, ranges) once. No Python object per message.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from bridge_lake.clock import ns_to_ros
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized, fixed_part, join, ragged_part

VARINT, I64, LEN, I32 = 0, 1, 2, 5  # wire types
MAX_VARINT_BYTES = 10


def varint(value: int) -> bytes:
    """One varint; negative values as their 64-bit two's complement (10 bytes), as protobuf."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def varint_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints of int64 values (negative ones as uint64): (n, width) uint8 rows, each holding
    its varint left-aligned, and the varints' lengths (1 .. 10)."""
    v = values.astype(np.int64).view(np.uint64)
    lengths = np.ones(v.size, np.int64)
    for k in range(1, MAX_VARINT_BYTES):
        lengths += v >= np.uint64(1 << 7 * k)
    width = int(lengths.max()) if v.size else 1
    rows = np.empty((v.size, width), np.uint8)
    for k in range(width):
        more = np.where(k < lengths - 1, 0x80, 0).astype(np.uint8)
        rows[:, k] = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) | more
    return rows, lengths


class Fields:
    """The fields of n messages of one type, added in field-number order."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.size = np.zeros(n, np.int64)  # bytes so far, per message
        self._parts: list[bytes | np.ndarray | pa.LargeBinaryArray] = []

    # -- raw parts -------------------------------------------------------------------------

    def constant(self, raw: bytes) -> None:
        """The same bytes in every message, e.g. fields pre-serialized by protobuf."""
        if raw:
            self._parts.append(raw)
            self.size += len(raw)

    def rows(self, rows: np.ndarray, lengths: np.ndarray | None = None) -> None:
        """Row i of (n, width) uint8 in message i: its first lengths[i] bytes, or all of it."""
        width = rows.shape[1]
        if lengths is None or np.all(lengths == width):
            self._parts.append(rows)
            self.size += width
        elif lengths.any():
            offsets = np.zeros(self.n + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            self._parts.append(ragged_part(rows[np.arange(width) < lengths[:, None]], offsets))
            self.size += lengths

    def ragged(self, part: pa.LargeBinaryArray) -> None:
        """Element i of an Arrow binary array in message i."""
        self._parts.append(part)
        self.size += arg.binary_lengths(part)

    # -- fields ----------------------------------------------------------------------------

    def double(self, number: int, values: ArrayLike) -> None:
        """A double field, left out where it is +0.0 (bitwise zero; -0.0 is written)."""
        self._fixed_width(number, I64, np.asarray(values, "<f8"))

    def float32(self, number: int, values: ArrayLike) -> None:
        """A float field, left out where it is +0.0 (bitwise zero)."""
        self._fixed_width(number, I32, np.asarray(values, "<f4"))

    def fixed32(self, number: int, values: ArrayLike) -> None:
        """A fixed32 field (foxglove's sizes and strides), left out where 0."""
        self._fixed_width(number, I32, np.asarray(values, "<u4"))

    def varint(self, number: int, values: ArrayLike) -> None:
        """An int32/int64/uint32/enum/bool field, left out where 0."""
        v = np.broadcast_to(np.asarray(values), (self.n,)).astype(np.int64)
        body, lengths = varint_rows(v)
        self._tagged(tag(number, VARINT), body, np.where(v != 0, lengths, -1))

    def string(self, number: int, text: str) -> None:
        """A string field with the same text in every message, left out when empty."""
        raw = text.encode()
        if raw:
            self.constant(tag(number, LEN) + varint(len(raw)) + raw)

    def binary(self, number: int, payload: pa.LargeBinaryArray) -> None:
        """A bytes field (or any length-delimited one), element i in message i; left out where
        empty. The payload is copied once, by `encode`."""
        lengths = arg.binary_lengths(payload)
        self._prefix(number, lengths, lengths > 0)
        self.ragged(payload)

    def doubles(self, number: int, values: np.ndarray) -> None:
        """A packed repeated double with k values per message: (k,) for all or (n, k)."""
        values = np.ascontiguousarray(values, "<f8")
        k = values.shape[-1]
        if k == 0:
            return
        head = tag(number, LEN) + varint(8 * k)
        if values.ndim == 1:
            self.constant(head + values.tobytes())
        else:
            self.constant(head)
            self.rows(values.view(np.uint8).reshape(self.n, 8 * k))

    def ragged_doubles(self, number: int, values: np.ndarray, offsets: np.ndarray) -> None:
        """A packed repeated double, values[offsets[i]:offsets[i + 1]] in message i."""
        values = np.ascontiguousarray(values, "<f8")
        self.binary(number, ragged_part(values.view(np.uint8), offsets * 8))

    def length_prefix(self, number: int, lengths: np.ndarray) -> None:
        """Tag and varint length of a length-delimited field in every message (the bytes
        follow as a part of their own): an element of a repeated message field, which is
        written even when empty."""
        self._prefix(number, lengths, np.ones(self.n, bool))

    def message(self, number: int, sub: Fields, present: np.ndarray | None = None) -> None:
        """A nested message, set in every message or where `present` (sub must be empty
        elsewhere): written even when empty, as a set message field is."""
        if present is None:
            present = np.ones(self.n, bool)
        elif sub.size[~present].any():
            raise AssertionError("nested message has fields where it is not present")
        self._prefix(number, sub.size, present)
        self._parts += sub._parts
        self.size += sub.size

    def timestamp(self, number: int, stamp_ns: np.ndarray) -> None:
        """A google.protobuf.Timestamp from int64 ns: seconds by floor division, so nanos is
        0 .. 999,999,999 also before 1970, as the Timestamp type requires."""
        seconds, nanos = ns_to_ros(stamp_ns)
        stamp = Fields(self.n)
        stamp.varint(1, seconds)
        stamp.varint(2, nanos)
        self.message(number, stamp)

    # -- assembly --------------------------------------------------------------------------

    def encode(self) -> Serialized:
        """The n messages in one buffer. Runs of constants and fixed rows are laid side by side
        into one (n, k) block first, so the join has few parts."""
        blocks: list[pa.Array | pa.Scalar] = []
        run: list[bytes | np.ndarray] = []
        for part in [*self._parts, None]:
            if isinstance(part, bytes | np.ndarray):
                run.append(part)
                continue
            if run:
                blocks.append(self._block(run, scalar=len(blocks) > 0 or part is not None))
                run = []
            if part is not None:
                blocks.append(part)
        if not blocks:
            return Serialized(np.zeros(0, np.uint8), np.zeros(self.n + 1, np.int64))
        return join(blocks)

    def _block(self, run: list[bytes | np.ndarray], scalar: bool) -> pa.Array | pa.Scalar:
        """Constants alone become one Arrow scalar (if other parts give the join its length);
        otherwise one (n, k) array of rows: a template row holding the constants copied to
        every row, then each array part stored whole-row-wide (as one void item per row)."""
        if scalar and all(isinstance(p, bytes) for p in run):
            return pa.scalar(b"".join(run), pa.large_binary())
        widths = [len(p) if isinstance(p, bytes) else p.shape[1] for p in run]
        template = np.frombuffer(
            b"".join(
                p if isinstance(p, bytes) else bytes(w) for p, w in zip(run, widths, strict=True)
            ),
            np.uint8,
        )
        rows = np.empty((self.n, template.size), np.uint8)
        rows[:] = template
        start = 0
        for part, width in zip(run, widths, strict=True):
            if isinstance(part, np.ndarray) and width:
                item = np.dtype(f"V{width}")
                rows[:, start : start + width].view(item)[:, 0] = np.ascontiguousarray(part).view(
                    item
                )[:, 0]
            start += width
        return fixed_part(rows)

    def _fixed_width(self, number: int, wire_type: int, values: np.ndarray) -> None:
        values = np.ascontiguousarray(np.broadcast_to(values, (self.n,)))
        raw = values.view(np.uint8).reshape(self.n, values.itemsize)
        nonzero = values.view(f"<u{values.itemsize}") != 0
        self._tagged(tag(number, wire_type), raw, np.where(nonzero, values.itemsize, -1))

    def _prefix(self, number: int, lengths: np.ndarray, present: np.ndarray) -> None:
        """Tag and varint length of a length-delimited field where `present`."""
        body, varint_lengths = varint_rows(lengths)
        self._tagged(tag(number, LEN), body, np.where(present, varint_lengths, -1))

    def _tagged(self, head: bytes, body: np.ndarray, lengths: np.ndarray) -> None:
        """`head` then the first lengths[i] bytes of body row i; nothing where lengths[i] < 0.
        When every row is whole, head and body stay separate parts: no copy until `encode`."""
        if np.all(lengths == body.shape[1]):
            self.constant(head)
            self.rows(body)
            return
        rows = np.empty((self.n, len(head) + body.shape[1]), np.uint8)
        rows[:, : len(head)] = np.frombuffer(head, np.uint8)
        rows[:, len(head) :] = body
        self.rows(rows, np.where(lengths < 0, 0, lengths + len(head)))

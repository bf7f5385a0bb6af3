"""Wire layouts of ROS 1 and ROS 2 (CDR, little endian) messages as numpy structured dtypes
(written by the exports, `bridge_lake.export.kinds`; stamps read back and patched in
`stamps`).

Within one call every string of a message (frame ids, encodings, field names) is the same for all
n messages, so the fixed-size stretch of a message has the same length and the same field
offsets in every message: one structured dtype describes it, one (n, size) uint8 array holds all
n of them, and filling a field is one vectorized assignment.

Rules implemented here (checked byte for byte against rosbags in the tests):

- ROS 1: primitives packed with no padding; a string is uint32 byte length + bytes (no NUL);
  `time` is uint32 secs, uint32 nsecs; `Header` is uint32 seq, time stamp, string frame_id.
- ROS 2 CDR: each message starts with the 4-byte encapsulation header 00 01 00 00 (CDR, little
  endian); every primitive is aligned to its own size (1, 2, 4 or 8) counted from the byte
  after that header, with zero padding; a string is uint32 length *including* a terminating NUL,
  then the bytes and the NUL; sequences are a uint32 count then the elements, each aligned;
  `builtin_interfaces/Time` is int32 sec, uint32 nanosec; `std_msgs/Header` is stamp, frame_id.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from bridge_lake.clock import ns_to_ros

ENCAPSULATION_CDR_LE = b"\x00\x01\x00\x00"

U1, U2, U4 = np.dtype("<u1"), np.dtype("<u2"), np.dtype("<u4")
I1, I4 = np.dtype("<i1"), np.dtype("<i4")
F4, F8 = np.dtype("<f4"), np.dtype("<f8")

TIME_RANGE = {1: (0, 2**32 - 1), 2: (-(2**31), 2**31 - 1)}


def ros_version(ros: int) -> int:
    """1 or 2, else ValueError."""
    if ros not in (1, 2):
        raise ValueError(f"ros must be 1 or 2, got {ros!r}")
    return int(ros)


def stamps(stamp_ns: ArrayLike) -> np.ndarray:
    """int64 ns as a 1-D array; floats are refused (they cannot hold ns since 1970 exactly)."""
    arr = np.asarray(stamp_ns)
    if arr.ndim != 1 or not (arr.size == 0 or arr.dtype.kind in "iu"):
        raise ValueError(f"stamp_ns must be a 1-D integer array, got {arr.dtype} {arr.shape}")
    if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError("stamp_ns has values beyond int64")
    return arr.astype(np.int64, copy=False)


def split_stamps(stamp_ns: ArrayLike, ros: int) -> tuple[np.ndarray, np.ndarray]:
    """(sec, nanosec) of integer ns stamps by integer floor division, so 0 <= nanosec < 1e9
    also before 1970 (-1.7 s is sec -2, nanosec 3e8, as builtin_interfaces/Time specifies).

    Raises ValueError at the first stamp whose seconds do not fit the wire type: int32 for
    ROS 2, uint32 for ROS 1 (so no time before 1970 in ROS 1).
    """
    stamp_ns = stamps(stamp_ns)
    ros = ros_version(ros)
    sec, nanosec = ns_to_ros(stamp_ns)
    lo, hi = TIME_RANGE[ros]
    bad = np.flatnonzero((sec < lo) | (sec > hi))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"stamp_ns[{i}] = {int(stamp_ns[i])} ns is outside ROS {ros} time "
            f"(seconds {lo} .. {hi})"
        )
    return sec, nanosec


def stamp_values(stamp_ns: np.ndarray, ros: int) -> dict[str, np.ndarray]:
    """Field values for `Layout.stamp()`."""
    sec, nanosec = split_stamps(stamp_ns, ros)
    return {"sec": sec, "nanosec": nanosec}


def header_values(stamp_ns: np.ndarray, ros: int, seq_start: int) -> dict[str, np.ndarray]:
    """Field values for `Layout.header()`: the stamp and, in ROS 1, seq = seq_start,
    seq_start + 1, ... wrapping at 2**32 like the publisher's uint32 counter."""
    values = stamp_values(stamp_ns, ros)
    if ros == 1:
        if not 0 <= seq_start < 2**32:
            raise ValueError(f"seq_start must be in 0 .. 2**32 - 1, got {seq_start}")
        values["seq"] = (np.arange(stamp_ns.size, dtype=np.int64) + seq_start) % 2**32
    return values


class Layout:
    """Builds the fixed-size stretch of a message field by field, in ROS 1 or CDR rules.

    The stretch is kept as a template (constants in place, zeros for padding and fields) plus
    the offset and dtype of each field; `fill` copies the template into n rows (whole-row copies
    are ~3x faster than writing narrow constant columns) and assigns the fields.

    Positions count from the CDR payload origin (the byte after the encapsulation header), which
    is what CDR alignment is relative to. A stretch that follows variable-length data starts at a
    position known only modulo `known_alignment`; asking for a stricter alignment there is a bug.
    """

    def __init__(self, ros: int, *, position: int = 0, known_alignment: int = 8) -> None:
        self.ros = ros
        self._start = position
        self._known_alignment = known_alignment
        self._template = bytearray()
        self._fields: dict[str, tuple[np.dtype, int]] = {}

    @classmethod
    def message(cls, ros: int) -> Layout:
        """A layout for the start of a message (with the CDR encapsulation header for ROS 2)."""
        if ros == 1:
            return cls(1)
        layout = cls(2, position=-len(ENCAPSULATION_CDR_LE))
        layout._template += ENCAPSULATION_CDR_LE
        return layout

    @property
    def size(self) -> int:
        """Bytes of the stretch so far."""
        return len(self._template)

    def align(self, alignment: int) -> None:
        """Zero padding up to a multiple of `alignment` (CDR only)."""
        if self.ros == 2:
            if alignment > self._known_alignment:
                raise AssertionError(f"alignment {alignment} after variable-length data")
            self._template += bytes(-(self._start + self.size) % alignment)

    def field(self, name: str, dtype: DTypeLike, count: int = 0) -> None:
        """A primitive (count 0) or a fixed array of `count` primitives, e.g. float64[9], or a
        struct of equal primitives (Vector3 = 3 float64s: no padding between them)."""
        dt = np.dtype(dtype)
        self.align(dt.itemsize)
        full = np.dtype((dt, (count,))) if count else dt
        self._fields[name] = (full, self.size)
        self._template += bytes(full.itemsize)

    def constant(self, dtype: DTypeLike, value: ArrayLike) -> None:
        """A primitive (or fixed array of them) with the same value in every message."""
        dt = np.dtype(dtype)
        self.align(dt.itemsize)
        self._template += np.asarray(value, dt).tobytes()

    def string(self, text: str) -> None:
        """A string constant across messages."""
        raw = text.encode()
        if self.ros == 2:
            raw += b"\0"
        self.constant(U4, len(raw))
        self._template += raw

    def stamp(self, prefix: str = "") -> None:
        """ROS 1 `time` (uint32 secs, nsecs) or ROS 2 builtin_interfaces/Time (int32, uint32)."""
        self.field(f"{prefix}sec", U4 if self.ros == 1 else I4)
        self.field(f"{prefix}nanosec", U4)

    def header(self, frame_id: str, *, prefix: str = "", seq: bool = True) -> None:
        """std_msgs/Header; ROS 1's seq is a field, or constant 0 when seq is False (headers
        nested in a message, e.g. TFMessage's transforms, which no publisher numbers)."""
        if self.ros == 1:
            if seq:
                self.field(f"{prefix}seq", U4)
            else:
                self.constant(U4, 0)
        self.stamp(prefix)
        self.string(frame_id)

    def fill(self, n: int, values: dict[str, ArrayLike]) -> np.ndarray:
        """(n, size) uint8: n copies of the template with `values` assigned (each broadcast to
        (n,) or (n, count); one for every field, no other)."""
        if values.keys() != self._fields.keys():
            raise AssertionError(f"fields {sorted(self._fields)} vs values {sorted(values)}")
        raw = np.empty((n, self.size), np.uint8)
        raw[:] = np.frombuffer(self._template, np.uint8)
        if self._fields and n:
            dtype = np.dtype(
                {
                    "names": list(self._fields),
                    "formats": [dt for dt, _ in self._fields.values()],
                    "offsets": [offset for _, offset in self._fields.values()],
                    "itemsize": self.size,
                }
            )
            records = raw.view(dtype).reshape(n)
            for name, value in values.items():
                records[name] = value
        return raw

"""H.264 Annex-B bitstreams with numpy: where the NAL units are, which access units are key
frames, and the picture size from the SPS. No decoder is needed for any of it."""

from __future__ import annotations

import numpy as np

NAL_IDR = 5
"""nal_unit_type of a coded slice of an IDR picture (a key frame)."""
NAL_SPS = 7
"""nal_unit_type of a sequence parameter set."""


def nal_units(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of NAL header bytes after Annex-B start codes (00 00 01) and their types."""
    if len(buf) < 4:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8)
    zero = buf[:-3] == 0
    hit = np.flatnonzero(zero & (buf[1:-2] == 0) & (buf[2:-1] == 1)) + 3
    return hit, buf[hit] & 0x1F


def access_units(
    buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, *, size: bool = True
) -> tuple[np.ndarray, tuple[int, int] | None]:
    """For access units laid end to end in `buf` (each at `offsets[i]`, `lengths[i]` bytes):
    whether each holds an IDR slice, and, when `size` is asked, (width, height) from the first
    SPS among them (None when there is none or it is malformed). One NAL scan over the buffer."""
    nal_at, nal_type = nal_units(buf)
    owner = np.searchsorted(offsets, nal_at, side="right") - 1
    key = np.zeros(len(offsets), dtype=bool)
    key[owner[nal_type == NAL_IDR]] = True
    sps = np.flatnonzero(nal_type == NAL_SPS) if size else ()
    if not len(sps):
        return key, None
    first = owner[sps[0]]
    end = offsets[first] + lengths[first]
    return key, sps_size(bytes(buf[nal_at[sps[0]] + 1 : end]))


class _Bits:
    def __init__(self, data: bytes) -> None:
        self.bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
        self.pos = 0

    def u(self, n: int) -> int:
        if self.pos + n > len(self.bits):
            raise IndexError("SPS ends early")
        v = 0
        for b in self.bits[self.pos : self.pos + n].tolist():
            v = (v << 1) | b
        self.pos += n
        return v

    def ue(self) -> int:
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
            if zeros > 31:
                raise ValueError("bad Exp-Golomb code")
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self) -> int:
        k = self.ue()
        return (k + 1) // 2 if k % 2 else -(k // 2)


def sps_size(rbsp_with_epb: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels from an H.264 SPS payload (after the NAL header byte), with
    frame cropping applied; None if the SPS is malformed. Runs once per stream."""
    data = rbsp_with_epb.replace(b"\x00\x00\x03", b"\x00\x00")
    try:
        r = _Bits(data)
        profile = r.u(8)
        r.u(16)  # constraint flags + level
        r.ue()  # seq_parameter_set_id
        chroma = 1
        if profile in (100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135):
            chroma = r.ue()
            if chroma == 3:
                r.u(1)
            r.ue()
            r.ue()
            r.u(1)
            if r.u(1):  # seq_scaling_matrix_present
                for i in range(8 if chroma != 3 else 12):
                    if r.u(1):
                        last, nxt = 8, 8
                        for _ in range(16 if i < 6 else 64):
                            if nxt:
                                nxt = (last + r.se() + 256) % 256
                            last = nxt or last
        r.ue()  # log2_max_frame_num
        poc = r.ue()
        if poc == 0:
            r.ue()
        elif poc == 1:
            r.u(1)
            r.se()
            r.se()
            for _ in range(r.ue()):
                r.se()
        r.ue()  # max_num_ref_frames
        r.u(1)
        mbs_w = r.ue() + 1
        map_h = r.ue() + 1
        frame_mbs_only = r.u(1)
        if not frame_mbs_only:
            r.u(1)
        r.u(1)
        width, height = mbs_w * 16, map_h * 16 * (2 - frame_mbs_only)
        if r.u(1):  # frame_cropping
            left, right, top, bottom = r.ue(), r.ue(), r.ue(), r.ue()
            cx = 1 if chroma in (0, 3) else 2
            cy = (1 if chroma in (0, 3) else (2 if chroma == 1 else 1)) * (2 - frame_mbs_only)
            width -= cx * (left + right)
            height -= cy * (top + bottom)
        return width, height
    except (IndexError, ValueError):
        return None

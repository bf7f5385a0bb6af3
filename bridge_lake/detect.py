"""What a landing-zone file is, from its first bytes and its name.

ADTF recordings are recognised by content (the `IFHD` magic and the version field), whatever
they are called, because recorders name files freely. NCLT files have no magic, so they are
recognised by the file names the dataset uses.
"""

from __future__ import annotations

import posixpath
import struct
from dataclasses import dataclass

from bridge_lake.drive_meta import DRIVE_YAML
from bridge_lake.formats.adtf import RECORDING_SUFFIXES, sniff
from bridge_lake.formats.adtf.errors import HeaderError
from bridge_lake.formats.adtf.ifhd import HEADER_SIZE as IFHD_HEADER_SIZE
from bridge_lake.formats.adtf.ifhd import parse_header
from bridge_lake.formats.adtf.info import GENERATIONS as ADTF_VERSIONS
from bridge_lake.formats.adtf.recover import cut_problem
from bridge_lake.formats.nclt.archives import archive_kind
from bridge_lake.formats.nclt.kinds import nclt_kind

HEAD_BYTES = IFHD_HEADER_SIZE
"""The whole IFHD header: the reader's own header validation runs on it, so a damaged
recording's reason in the manifest is the one the reader gives."""
EMPTY = "empty file (0 bytes)"
"""The problem of a 0-byte file that is named like a recording."""
RECORDING_FORMATS = ("adtf", "nclt")
"""Formats that hold sensor data (as opposed to sidecars and metadata)."""


@dataclass(frozen=True)
class Detected:
    format: str
    """adtf | adtf_description | nclt | drive_yaml | unknown"""
    version: int | None = None
    kind: str | None = None
    """NCLT file kind (gps, velodyne_hits, ...) or the ADTF generation name."""
    problem: str | None = None
    """Set when the file claims a format but is not valid as such (e.g. unknown IFHD version,
    a truncated header, 0 bytes, cut short): a damaged recording, quarantined as a file."""
    cut: bool = False
    """An ADTF recording cut short (its header is valid, its index and stream descriptions
    are missing): damaged, but its complete chunks are recovered when it is normalized
    (normalize/adtf_recovery.py)."""


def detect(rel_path: str, head: bytes, size: int | None = None) -> Detected:
    """What `rel_path` is from its first `HEAD_BYTES` bytes (`head`) and its `size` (None:
    `len(head)` is taken as the size only when it is shorter than HEAD_BYTES)."""
    name = posixpath.basename(rel_path)
    size = len(head) if size is None and len(head) < HEAD_BYTES else size
    if sniff(head)[0]:
        return _detect_ifhd(head, size)
    if size == 0 and name.lower().endswith(RECORDING_SUFFIXES):
        return Detected("adtf", problem=EMPTY)
    if rel_path == DRIVE_YAML:
        return Detected("drive_yaml")
    if name.endswith(".description"):
        return Detected("adtf_description")
    kind = nclt_kind(rel_path)
    if kind is not None:
        return Detected("nclt", kind=kind, problem=EMPTY if size == 0 else None)
    archive = archive_kind(name)
    if archive is not None:
        return Detected("nclt", kind=f"archive:{archive}", problem=EMPTY if size == 0 else None)
    if name.lower().endswith(RECORDING_SUFFIXES):
        return Detected("unknown", problem="named like an ADTF recording but has no IFHD magic")
    return Detected("unknown")


def _detect_ifhd(head: bytes, size: int | None) -> Detected:
    if len(head) < IFHD_HEADER_SIZE or (size is not None and size < IFHD_HEADER_SIZE):
        try:  # the reader's own words: "file has 1024 bytes, the IFHD header alone needs 2048"
            parse_header(head[:size], "")
        except HeaderError as exc:
            return Detected("adtf", problem=exc.reason)
    byte_order = head[72]
    if byte_order not in (1, 2):
        return Detected("adtf", problem=f"IFHD byte order byte is {byte_order}, expected 1 or 2")
    (version,) = struct.unpack_from("<I" if byte_order == 1 else ">I", head, 4)
    if version not in ADTF_VERSIONS:  # ADTF 1 (0x0100/0x0110) has another layout
        return Detected(
            "adtf", version=version, problem=f"unsupported IFHD version 0x{version:04x}"
        )
    kind = ADTF_VERSIONS[version]
    if size is not None:  # the header alone says whether the index it points to is there
        try:
            cut = cut_problem(parse_header(head, ""), size)
        except HeaderError as exc:
            return Detected("adtf", version=version, kind=kind, problem=exc.reason)
        if cut is not None:
            return Detected("adtf", version=version, kind=kind, problem=cut, cut=True)
    return Detected("adtf", version=version, kind=kind)

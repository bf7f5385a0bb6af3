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
from bridge_lake.formats.adtf.info import GENERATIONS as ADTF_VERSIONS
from bridge_lake.formats.nclt.archives import archive_kind
from bridge_lake.formats.nclt.kinds import nclt_kind

HEAD_BYTES = 80
"""Enough for the IFHD magic, version and byte-order byte (offset 72)."""
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
    """Set when the file claims a format but is not valid as such (e.g. unknown IFHD version)."""


def detect(rel_path: str, head: bytes) -> Detected:
    name = posixpath.basename(rel_path)
    if sniff(head)[0]:
        return _detect_ifhd(head)
    if rel_path == DRIVE_YAML:
        return Detected("drive_yaml")
    if name.endswith(".description"):
        return Detected("adtf_description")
    kind = nclt_kind(rel_path)
    if kind is not None:
        return Detected("nclt", kind=kind)
    archive = archive_kind(name)
    if archive is not None:
        return Detected("nclt", kind=f"archive:{archive}")
    if name.lower().endswith(RECORDING_SUFFIXES):
        return Detected("unknown", problem="named like an ADTF recording but has no IFHD magic")
    return Detected("unknown")


def _detect_ifhd(head: bytes) -> Detected:
    if len(head) < 73:
        return Detected("adtf", problem=f"IFHD header truncated: {len(head)} bytes")
    byte_order = head[72]
    if byte_order not in (1, 2):
        return Detected("adtf", problem=f"IFHD byte order byte is {byte_order}, expected 1 or 2")
    (version,) = struct.unpack_from("<I" if byte_order == 1 else ">I", head, 4)
    if version not in ADTF_VERSIONS:  # ADTF 1 (0x0100/0x0110) has another layout
        return Detected(
            "adtf", version=version, problem=f"unsupported IFHD version 0x{version:04x}"
        )
    return Detected("adtf", version=version, kind=ADTF_VERSIONS[version])

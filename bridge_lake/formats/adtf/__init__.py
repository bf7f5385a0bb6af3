"""ADTF recordings (IFHD container, ADTF 2 and ADTF 3 streams, DDL): read, decode, write.

Format reference: shared/specs/adtf-dat-format.md. No Dagster import anywhere in here.
"""

from bridge_lake.formats.adtf.ddl import DDL, parse_ddl
from bridge_lake.formats.adtf.errors import AdtfError, DDLError
from bridge_lake.formats.adtf.reader import (
    RECORDING_SUFFIXES,
    DatFile,
    Item,
    Sample,
    Stream,
    open_dat,
    recording_parts,
    sniff,
)
from bridge_lake.formats.adtf.samples import Property, StreamType
from bridge_lake.formats.adtf.writer import DatWriter, write_dat

__all__ = [
    "DDL",
    "RECORDING_SUFFIXES",
    "AdtfError",
    "DDLError",
    "DatFile",
    "DatWriter",
    "Item",
    "Property",
    "Sample",
    "Stream",
    "StreamType",
    "open_dat",
    "parse_ddl",
    "recording_parts",
    "sniff",
    "write_dat",
]

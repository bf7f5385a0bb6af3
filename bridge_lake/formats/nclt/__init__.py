"""NCLT session files (shared/specs/nclt-format.md): typed, vectorized, streaming readers.

No Dagster here: the normalized layer calls these. `nclt_kind` classifies a path by name;
`locate_session` finds a session's files in any of the dataset's tarball layouts.
"""

from bridge_lake.formats.nclt.csv_tables import (
    COLUMNS,
    CsvTable,
    MalformedRowError,
    load_table,
    read_table,
)
from bridge_lake.formats.nclt.hokuyo import SCAN_GEOMETRY, HokuyoReport, iter_hokuyo
from bridge_lake.formats.nclt.images import iter_lb3_batches, read_lb3_image, tiff_info
from bridge_lake.formats.nclt.kinds import ALL_KINDS, nclt_kind
from bridge_lake.formats.nclt.layout import NcltLayoutError, NcltSession, locate_session
from bridge_lake.formats.nclt.scans import Scan, ScanReport, iter_scans
from bridge_lake.formats.nclt.velodyne import (
    HITS_SCHEMA,
    HitsReport,
    SkippedRange,
    iter_velodyne_hits,
    iter_velodyne_packets,
    read_velodyne_sync,
)

__all__ = [
    "ALL_KINDS",
    "COLUMNS",
    "HITS_SCHEMA",
    "SCAN_GEOMETRY",
    "CsvTable",
    "HitsReport",
    "HokuyoReport",
    "MalformedRowError",
    "NcltLayoutError",
    "NcltSession",
    "Scan",
    "ScanReport",
    "SkippedRange",
    "iter_hokuyo",
    "iter_lb3_batches",
    "iter_scans",
    "iter_velodyne_hits",
    "iter_velodyne_packets",
    "load_table",
    "locate_session",
    "nclt_kind",
    "read_lb3_image",
    "read_table",
    "read_velodyne_sync",
    "tiff_info",
]

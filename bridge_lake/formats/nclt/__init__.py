"""NCLT session files (shared/specs/nclt-format.md): typed, vectorized, streaming readers.

No Dagster here: the normalized layer calls these. `nclt_kind` classifies a path by name.
"""

from bridge_lake.formats.nclt.csv_tables import (
    COLUMNS,
    CsvTable,
    MalformedRowError,
    load_table,
    read_table,
)
from bridge_lake.formats.nclt.kinds import ALL_KINDS, nclt_kind

__all__ = [
    "ALL_KINDS",
    "COLUMNS",
    "CsvTable",
    "MalformedRowError",
    "load_table",
    "nclt_kind",
    "read_table",
]

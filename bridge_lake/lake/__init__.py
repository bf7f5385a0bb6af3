"""The Parquet lake: layout, validation and atomic storage (local paths or s3:// via fsspec)."""

from bridge_lake.lake.paths import validate_drive_id
from bridge_lake.lake.storage import Lake, PartitionWriter

__all__ = ["Lake", "PartitionWriter", "validate_drive_id"]

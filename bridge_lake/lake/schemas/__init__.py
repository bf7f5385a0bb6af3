"""Every lake table's schema, in one place, with the words that document them.

Assets, tests, the SQL views and docs/tables.md all take their columns from here, one module
per layer. The drive is not a column inside the files: it is the Hive partition
(`drive=<id>`) of every table.
"""

from bridge_lake.lake.schemas.base import F32, F64, Column, TableSpec
from bridge_lake.lake.schemas.calibrated import CALIBRATED
from bridge_lake.lake.schemas.normalized import (
    ADTF_PAYLOADS,
    CAMERA_FRAMES,
    CAN_FRAMES,
    GENERIC_PREFIX,
    GNSS,
    GROUND_TRUTH,
    HEADING,
    IMU,
    LASER_SCANS,
    LIDAR_POINTS,
    LIDAR_SCANS,
    NORMALIZED,
    ODOMETRY,
    QUARANTINE,
    QUARANTINE_RAW_CAP,
    SENSOR_TABLES,
    STREAMS,
    WHEEL_ODOMETRY,
)
from bridge_lake.lake.schemas.raw import RAW_DRIVES, RAW_EXPORT_MAPPING, RAW_MANIFEST
from bridge_lake.lake.schemas.scene_sets import SCENE_SETS
from bridge_lake.lake.schemas.scenes import SCENES

TABLES: tuple[TableSpec, ...] = (
    RAW_MANIFEST,
    RAW_DRIVES,
    RAW_EXPORT_MAPPING,
    *NORMALIZED.values(),
    *CALIBRATED.values(),
    *SCENES.values(),
    SCENE_SETS,
)

__all__ = [
    "ADTF_PAYLOADS",
    "CALIBRATED",
    "CAMERA_FRAMES",
    "CAN_FRAMES",
    "F32",
    "F64",
    "GENERIC_PREFIX",
    "GNSS",
    "GROUND_TRUTH",
    "HEADING",
    "IMU",
    "LASER_SCANS",
    "LIDAR_POINTS",
    "LIDAR_SCANS",
    "NORMALIZED",
    "ODOMETRY",
    "QUARANTINE",
    "QUARANTINE_RAW_CAP",
    "RAW_DRIVES",
    "RAW_EXPORT_MAPPING",
    "RAW_MANIFEST",
    "SENSOR_TABLES",
    "STREAMS",
    "TABLES",
    "WHEEL_ODOMETRY",
    "Column",
    "TableSpec",
]

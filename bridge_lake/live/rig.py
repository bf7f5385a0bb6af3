"""The drive's rig for the live bridge: /tf_static and the cameras' optical frames.

Offline, the calibrated layer turns the vehicle's rig calibration into /tf_static and the
export puts camera images in the camera's optical frame when the rig has one. The rig needs
no data of the drive but its date, so the live bridge has both from the start: drive.yaml
in the drive folder names the vehicle, `calibrate.drive.drive_date` the day (recorded_at,
else the first master time), `calibrate.rig.find_rig` the calibration valid then.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from bridge_lake.calibrate.drive import drive_date
from bridge_lake.calibrate.rig import RigError, RigNotFoundError, find_rig
from bridge_lake.calibrate.transforms import tf_static_table
from bridge_lake.drive_meta import DRIVE_YAML, parse_drive_yaml
from bridge_lake.errors import DriveMetadataError


def drive_rig(drive_dir: Path, first_ns: int) -> tuple[pa.Table | None, str]:
    """(/tf_static rows of the drive's rig, or None; what was found, for the summary)."""
    meta_path = drive_dir / DRIVE_YAML
    if not meta_path.is_file():
        return None, f"no {DRIVE_YAML} in {drive_dir}: no rig, so no /tf_static"
    try:
        meta = parse_drive_yaml(meta_path.read_bytes(), where=str(meta_path))
        day, _ = drive_date(meta.recorded_at, pa.table({"first_time_ns": [first_ns]}))
        if day is None:
            return None, "no drive date: no rig"
        rig = find_rig(meta.vehicle, day)
    except (DriveMetadataError, RigNotFoundError, RigError) as exc:
        return None, f"no rig: {exc}"
    return tf_static_table(rig), f"rig {rig.path} (vehicle {meta.vehicle}, {day})"


__all__ = ["drive_rig"]

"""`bridge-lake rig init`: write a rig YAML template for a drive's (or a recording's) vehicle.

`add_commands(subparsers)` adds `rig` to the `bridge-lake` parser; the work is imported when
the command runs (calibrate/rig_template.py). Exit codes: 0 written, 2 an error (printed in
one line by `bridge-lake`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bridge_lake.cli_common import (
    add_command,
    add_group,
    add_lake,
    add_out,
    lake_from_args,
    write_out,
)
from bridge_lake.errors import BridgeLakeError

RIG_DOC = """rig calibrations: write a template for a vehicle that has none

A drive whose vehicle has no rig is calibrated without transforms: its exports stay in sensor
frames, without /tf_static and /tf. `rig init` writes the rig YAML for it (format:
bridge_lake/calibrate/rig.py) with every sensor frame of the drive, the conventions in comments and
the numbers to measure left as null."""


def _cmd_init(args: argparse.Namespace) -> int:
    """a rig YAML template listing every sensor frame of a drive or recording

    From a drive in the lake (--drive: the frame_id of every row of its imu, gnss, heading,
    lidar, camera and laser tables, its vehicle and date) or from an ADTF recording (the frames
    its stream mapping gives; --vehicle names the vehicle)."""
    from bridge_lake.calibrate.rig_template import drive_rig_template, recording_rig_template

    if (args.drive is None) == (args.file is None):
        raise BridgeLakeError("rig init: give --drive ID or a recording FILE.dat (one of them)")
    if args.drive is not None:
        text = drive_rig_template(lake_from_args(args), args.drive)
    else:
        if args.vehicle is None:
            raise BridgeLakeError("rig init FILE.dat: give --vehicle (drive.yaml's `vehicle`)")
        from bridge_lake.normalize.mapping_cli import recording

        text = recording_rig_template(recording(args.file), args.vehicle, args.mapping)
    if not write_out(args, text):
        return 0
    frames = text.count("\n    kind: ")
    print(
        f"wrote {args.out}: {frames} sensor frame(s) to measure; fill in every null, then put "
        "it in a folder named by $BRIDGE_LAKE_RIGS and re-run the drive"
    )
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    rig = add_group(sub, "rig", RIG_DOC, "the rig command")
    i = add_command(rig, "init", _cmd_init)
    i.add_argument("file", type=Path, nargs="?", help="an ADTF recording (instead of --drive)")
    i.add_argument("--drive", help="a drive id in the lake")
    add_lake(i, "lake root (default: $BRIDGE_LAKE_ROOT)")
    i.add_argument("--vehicle", help="with FILE.dat: the vehicle name (drive.yaml `vehicle`)")
    i.add_argument(
        "--mapping", type=Path, help="with FILE.dat: your ADTF stream mapping YAML (user layer)"
    )
    add_out(i, "the template")


__all__ = ["add_commands"]

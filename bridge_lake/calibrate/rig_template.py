"""`bridge-lake rig init`: a rig YAML template for a vehicle that has none yet.

A drive whose vehicle has no rig is calibrated without transforms (its exports stay in
sensor frames, with a warning). To give it one, the user needs a file in the format of
`calibrate/rig.py` naming every sensor frame the drive's rows use. This writes that file:
every frame with its kind and the tables it comes from, the conventions in comments, and the
numbers left as `null` so that the rig loader refuses the file (naming the frame and key)
until each one is measured: an unfilled template never passes for an identity calibration.

The frames come from a drive in the lake (its normalized sensor tables) or from an ADTF
recording through the drive's stream mapping (the same rules the normalizer applies).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from bridge_lake.calibrate.drive import FRAME_KINDS, drive_date, sensor_frames
from bridge_lake.calibrate.rig import RIGS_ENV
from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas import RAW_DRIVES, STREAMS

BASE_FRAME = "base_link"
PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
"""Names written without quotes (YAML reads them back as the same string)."""
HEADER = """\
# Rig calibration of vehicle {vehicle}: a template written by `bridge-lake rig init`
# from {origin}.
# Fill in every `null` (the rig loader refuses this file, naming the frame and key, until
# each is a number), then put it into a folder named by ${rigs_env} and re-run the
# drive's calibrated layer. Format and checks: bridge_lake/calibrate/rig.py.
#
# Conventions
#   base_link       REP-103: x forward, y left, z up. Pick its origin and keep it: e.g. on
#                   the ground below the centre of the rear axle.
#   frame names     the frame_id of the sensor's rows in the lake (listed below with the
#                   tables that use them); rename nothing.
#   parent          the frame this one is measured in (default base_link; chains allowed).
#   translation     [x, y, z] metres: the frame's origin in its parent.
#   rotation        exactly one of rpy_deg | rpy_rad | quaternion_xyzw | matrix (3x3, rows):
#                   the frame's orientation in its parent. rpy: R = Rz(yaw) Ry(pitch)
#                   Rx(roll), fixed axes. A matrix must be a rotation (never projected).
#   cameras         the camera's body frame (x forward, y left, z up); if your numbers are of
#                   the optical frame (z forward, x right, y down) say `optical: true`.
#                   Intrinsics (optional): camera: {{width, height, K: [fx, 0, cx, 0, fy, cy,
#                   0, 0, 1], distortion_model: plumb_bob, D: [k1, k2, t1, t2, k3]}}.
#   time_offset_ns  added to the sensor's times to get true time (default 0).
vehicle: {vehicle_yaml}
valid_from: {valid_from}            # first day (UTC) this calibration holds
base_frame: {base}
frames:"""


def _key(text: str) -> str:
    """`text` as a YAML scalar: plain when it is a simple name, else double-quoted (JSON
    strings are valid YAML), so no frame name can break the file."""
    return text if PLAIN.fullmatch(text) else json.dumps(text)


def rig_template(
    vehicle: str,
    valid_from: dt.date,
    frames: Mapping[str, list[str]],
    *,
    origin: str,
    cameras: Mapping[str, tuple[int | None, int | None]] | None = None,
) -> str:
    """The template's text. `frames`: frame_id → the sensor tables whose rows use it (the
    first one's kind is the frame's); `cameras`: frame_id → stored image size, when known;
    `origin`: where the frames were found (said in the header)."""
    listed = {f: t for f, t in frames.items() if f != BASE_FRAME}
    if not listed:
        raise BridgeLakeError(
            f"{origin}: no sensor frames (no rows in a spatial table): it needs no rig"
        )
    out = [
        HEADER.format(
            vehicle=vehicle,
            vehicle_yaml=_key(vehicle),
            origin=origin,
            rigs_env=RIGS_ENV,
            valid_from=valid_from.isoformat(),
            base=BASE_FRAME,
        )
    ]
    for frame, tables in listed.items():
        kind = FRAME_KINDS[tables[0]]
        out += [
            f"  {_key(frame)}:{' ' * max(1, 30 - len(_key(frame)))}# rows in " + ", ".join(tables),
            f"    kind: {kind}",
            f"    parent: {BASE_FRAME}",
            "    translation: null              # [x, y, z] metres",
            "    rpy_deg: null                  # [roll, pitch, yaw] degrees",
            "    time_offset_ns: 0",
        ]
        if kind == "camera":
            width, height = (cameras or {}).get(frame, (None, None))
            out += [
                "    optical: false                 # true: the numbers are the optical frame's",
                f"    # camera: {{width: {width or 'W'}, height: {height or 'H'}, "
                "K: [fx, 0, cx, 0, fy, cy, 0, 0, 1],",
                "    #          distortion_model: plumb_bob, D: [k1, k2, t1, t2, k3]}",
            ]
    return "\n".join(out) + "\n"


def drive_rig_template(lake: Lake, drive: str) -> str:
    """The template for a drive in the lake: its vehicle, its date, the frame_id of every
    row of its spatial sensor tables (and its cameras' image sizes)."""
    if not lake.has_partition("normalized", STREAMS.name, drive):
        raise BridgeLakeError(f"drive {drive} is not normalized in {lake.root} (run ingest first)")
    meta = lake.read_partition("raw", RAW_DRIVES.name, drive).to_pylist()[0]
    streams = lake.read_partition("normalized", STREAMS.name, drive)
    date, _ = drive_date(meta.get("recorded_at"), streams)
    cams = lake.read_partition(
        "normalized", "camera_frames", drive, columns=["frame_id", "width", "height"]
    )
    sizes = {}
    if cams.num_rows:
        first = cams.group_by("frame_id").aggregate([("width", "max"), ("height", "max")])
        for r in first.to_pylist():
            sizes[r["frame_id"]] = (r["width_max"], r["height_max"])
    return rig_template(
        meta.get("vehicle") or "CHANGE-ME",
        date or dt.datetime.now(dt.UTC).date(),
        sensor_frames(lake, drive),
        origin=f"drive {drive} ({lake.root})",
        cameras=sizes,
    )


def recording_rig_template(
    path: str | os.PathLike[str], vehicle: str, mapping_user: str | os.PathLike[str] | None = None
) -> str:
    """The template for an ADTF recording: the frame of every stream its mapping (the
    drive.yaml beside it, the user's, the default) puts into a spatial sensor table."""
    from bridge_lake.formats.adtf import open_dat
    from bridge_lake.normalize.adtf_mapping import resolve_mapping
    from bridge_lake.normalize.adtf_mapping_tools import stream_placements

    path = Path(path)
    mapping = resolve_mapping(path.resolve().parent, user=mapping_user)
    frames: dict[str, list[str]] = {}
    with open_dat(path, strict=False) as f:
        first = min((s.first_time_ns for s in f.streams if s.item_count), default=None)
        for stream in f.streams:
            for p in stream_placements(stream, mapping):
                if p.target != "mapped" or p.table not in FRAME_KINDS:
                    continue
                tables = frames.setdefault(p.frame_id or p.stream, [])
                if p.table not in tables:
                    tables.append(p.table)
    date = dt.datetime.fromtimestamp(first / 1e9, dt.UTC).date() if first else None
    return rig_template(
        vehicle,
        date or dt.datetime.now(dt.UTC).date(),
        dict(sorted(frames.items())),
        origin=f"recording {path.name}",
    )


__all__ = ["drive_rig_template", "recording_rig_template", "rig_template"]

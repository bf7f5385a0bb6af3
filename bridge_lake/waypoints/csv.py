"""The Autoware 1.x (Autoware.AI) waypoint CSV, as `waypoint_saver` writes it.

Format (waypoint_maker/nodes/waypoint_saver/waypoint_saver.cpp, Autoware.AI 1.14):

    x,y,z,yaw,velocity,change_flag
    3699.6206,-99426.6719,85.8506,0.0123,0.0000,0

- the header line exactly as above; one line per waypoint, `\\n` line ends;
- x, y, z: position in the map frame [m]; here the frame of the poses (for a lake drive its
  ENU map at calibrated/map_origin), so a user aligns it with their Autoware map;
- yaw: tf::getYaw of the orientation, radians counter-clockwise from the map x axis;
  written in (-π, π];
- velocity: **km/h**. waypoint_saver writes mps2kmph(twist.linear.x) and waypoint_loader
  reads the column back with kmph2mps (waypoint_loader_core.cpp, format "ver3": columns by
  header name); every speed inside bridge_lake is m/s, the conversion happens only here;
- change_flag: integer. waypoint_saver always writes 0; lane_select reads it as the lane
  change flag (0 straight, 1 right, 2 left) and ignores a change when no neighbouring lane
  is loaded. bridge_lake writes 1 at the start, stops and end (see bridge_lake.waypoints.path).

Numbers have four decimals (waypoint_saver: std::fixed, setprecision(4)). Files are written
to a hidden temporary name beside the target and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path

import numpy as np

from bridge_lake.errors import FormatError
from bridge_lake.geometry import wrap_angle
from bridge_lake.waypoints.path import Waypoints

HEADER = "x,y,z,yaw,velocity,change_flag"
"""waypoint_saver's header line; waypoint_loader maps columns by these names."""
KMH_PER_MPS = 3.6
"""The velocity column is km/h (waypoint_loader: kmph2mps)."""
COLUMNS = tuple(HEADER.split(","))


def render_csv(waypoints: Waypoints) -> bytes:
    """The CSV bytes: header, then x, y, z, yaw [rad], velocity [km/h], change_flag."""
    yaw = np.round(wrap_angle(waypoints.yaw), 4)
    yaw[yaw < -np.pi] += 2 * np.pi  # -3.14159.. rounds to -3.1416 < -π: write it as +3.1416
    table = np.column_stack(
        [
            waypoints.x,
            waypoints.y,
            waypoints.z,
            yaw,
            waypoints.velocity_mps * KMH_PER_MPS,
            waypoints.change_flag,
        ]
    )
    buf = io.StringIO()
    np.savetxt(buf, table, fmt=["%.4f"] * 5 + ["%d"], delimiter=",", header=HEADER, comments="")
    return buf.getvalue().encode("ascii")


def write_csv(path: str | os.PathLike, waypoints: Waypoints) -> Path:
    """Write the CSV atomically (temporary name beside the target, fsync, rename)."""
    return write_atomic(path, render_csv(waypoints))


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """`data` at `path`, all or nothing: no reader sees a partial file, a failure leaves none."""
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"output folder {target.parent} does not exist")
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def read_csv(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A waypoint CSV back as columns by header name (velocity as written, km/h), the way
    waypoint_loader reads its "ver3" files; for tests and round trips."""
    text = Path(path).read_text(encoding="ascii")
    lines = text.splitlines()
    if not lines or tuple(c.strip() for c in lines[0].split(",")) != COLUMNS:
        raise FormatError(f"header is not {HEADER!r}", path=str(path), line=1)
    try:
        table = np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1, ndmin=2)
    except ValueError as exc:
        raise FormatError(f"not a waypoint table: {exc}", path=str(path)) from None
    if table.shape[1] != len(COLUMNS):
        raise FormatError(f"{table.shape[1]} columns, expected {len(COLUMNS)}", path=str(path))
    return {name: table[:, i] for i, name in enumerate(COLUMNS)}

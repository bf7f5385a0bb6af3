"""Autoware 1.x waypoints: a drive (or any bag / MCAP) as the CSV `waypoint_loader` replays.

- `sources`: the pose track: a lake drive's calibrated/poses, or PoseStamped, Odometry or TF
  from a ROS 1 / ROS 2 bag or MCAP file (rosbags), optionally a separate velocity topic;
- `path`: trim the standing start and end, stops, arc-length resampling (metres), smoothing
  that keeps corners, yaw (radians), curvature, the limited velocity profile, change_flag;
- `csv`: the waypoint_saver CSV (`x,y,z,yaw,velocity,change_flag`; velocity in **km/h**,
  as waypoint_loader converts it with kmph2mps), written atomically;
- `checklist`: count, spacing, yaw steps, velocity range, end flags, simple path;
- `plot`: the path coloured by velocity (SVG) and the drive's waypoint report.

In the lake: `<lake>/exports/drive=<id>/waypoints.csv` and `waypoints.svg` beside it,
`<lake>/reports/drive=<id>/waypoints.html`.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from bridge_lake.findings import Finding
from bridge_lake.lake import Lake
from bridge_lake.lake.paths import report_path
from bridge_lake.waypoints.checklist import CHECKS, check_waypoints, render_checklist
from bridge_lake.waypoints.csv import HEADER, KMH_PER_MPS, read_csv, render_csv, write_atomic
from bridge_lake.waypoints.path import (
    PoseTrack,
    WaypointError,
    WaypointParams,
    Waypoints,
    build_waypoints,
)
from bridge_lake.waypoints.plot import render_no_route, render_report, waypoints_svg
from bridge_lake.waypoints.sources import WaypointSourceError, poses_from_bag, poses_from_lake

CSV_PATH = "exports/drive={drive}/waypoints.csv"
SVG_PATH = "exports/drive={drive}/waypoints.svg"


@dataclass(frozen=True)
class WaypointFiles:
    """Waypoints, their checklist and where the CSV, the plot and the report went."""

    waypoints: Waypoints
    findings: list[Finding]
    csv: str
    svg: str
    report: str | None = None

    @property
    def passed(self) -> bool:
        """No ERROR item of the checklist failed."""
        return all(f.passed for f in self.findings if f.error)


def lake_waypoints(lake: Lake, drive: str, params: WaypointParams | None = None) -> WaypointFiles:
    """A drive's waypoints from its calibrated poses, written into the lake (CSV and SVG
    under exports/, the HTML page under reports/)."""
    wp = build_waypoints(poses_from_lake(lake, drive), params)
    findings = check_waypoints(wp)
    svg = waypoints_svg(wp, title=f"drive {drive}: {len(wp)} waypoints, {wp.length_m:.0f} m")
    csv_url = lake.url(lake.write_bytes(CSV_PATH.format(drive=drive), render_csv(wp)))
    svg_url = lake.url(lake.write_bytes(SVG_PATH.format(drive=drive), svg.encode()))
    page = render_report(drive, wp, findings, f"../../exports/drive={drive}/waypoints.csv", svg)
    report = lake.url(lake.write_bytes(report_path(drive, "waypoints"), page.encode()))
    return WaypointFiles(wp, findings, csv_url, svg_url, report)


def lake_no_route(lake: Lake, drive: str, reason: str) -> str:
    """A drive without a route (it never moves, or too little): no CSV, and no stale one from
    an earlier run either; the report page says why. Returns the report's URL."""
    for rel in (CSV_PATH, SVG_PATH):
        target = posixpath.join(lake.base, rel.format(drive=drive))
        if lake.fs.exists(target):
            lake.fs.rm(target)
    page = render_no_route(drive, reason)
    return lake.url(lake.write_bytes(report_path(drive, "waypoints"), page.encode()))


def file_waypoints(wp: Waypoints, out: str | os.PathLike) -> WaypointFiles:
    """Write `wp` to the CSV `out` and its plot beside it (same name, `.svg`)."""
    out = Path(out)
    findings = check_waypoints(wp)
    csv_path = write_atomic(out, render_csv(wp))
    svg_path = write_atomic(
        out.with_suffix(".svg"),
        waypoints_svg(wp, title=f"{out.name}: {len(wp)} waypoints, {wp.length_m:.0f} m").encode(),
    )
    return WaypointFiles(wp, findings, str(csv_path), str(svg_path))


__all__ = [
    "CHECKS",
    "CSV_PATH",
    "HEADER",
    "KMH_PER_MPS",
    "SVG_PATH",
    "PoseTrack",
    "WaypointError",
    "WaypointFiles",
    "WaypointParams",
    "WaypointSourceError",
    "Waypoints",
    "build_waypoints",
    "check_waypoints",
    "file_waypoints",
    "lake_no_route",
    "lake_waypoints",
    "poses_from_bag",
    "poses_from_lake",
    "read_csv",
    "render_checklist",
    "render_csv",
]

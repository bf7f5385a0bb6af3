"""Which NCLT file a path is, from its name alone (NCLT files carry no magic).

The dataset's tarballs unpack to `<date>/...`, and people re-pack them as `<kind>/<date>/...`
or flatten everything, so only the file name and, for per-scan and per-image files, the
directory names just above it are looked at (spec §1).
"""

from __future__ import annotations

import posixpath
import re

CSV_KINDS = (
    "gps",
    "gps_rtk",
    "gps_rtk_err",
    "ms25",
    "ms25_euler",
    "kvh",
    "wheels",
    "odometry_mu",
    "odometry_mu_100hz",
    "odometry_cov",
    "odometry_cov_100hz",
)
"""Sensor CSVs named `<kind>.csv`."""
DATED_CSV_KINDS = ("groundtruth", "cov")
"""CSVs named `<kind>_<date>.csv`."""
BINARY_KINDS = ("velodyne_hits", "hokuyo_30m", "hokuyo_4m")
"""Binaries named `<kind>.bin`."""
SCAN_KIND = "velodyne_sync"
IMAGE_KIND = "lb3"
ALL_KINDS = (*CSV_KINDS, *DATED_CSV_KINDS, *BINARY_KINDS, SCAN_KIND, IMAGE_KIND)

DATE_RE = re.compile(r"^(20\d\d)-(\d\d)-(\d\d)$")
_DATED_RE = re.compile(r"^(groundtruth|cov)_(20\d\d-\d\d-\d\d)\.csv$")
_UTIME_STEM_RE = re.compile(r"^\d{1,20}$")
_CAMERA_RE = re.compile(r"^Cam([0-5])$")


def nclt_kind(relative_path: str) -> str | None:
    """The NCLT file kind of a drive-relative path (`gps`, `velodyne_hits`, `lb3`, ...), or None.

    `velodyne_sync` needs the parent folder `velodyne_sync/` and a numeric stem; `lb3` needs
    `lb3/Cam<k>/<utime>.tiff`. Anything else (README.txt, drive.yaml, tarballs) is None.
    """
    parts = relative_path.replace("\\", "/").split("/")
    name = parts[-1]
    stem, ext = posixpath.splitext(name)
    if ext == ".csv" and stem in CSV_KINDS:
        return stem
    dated = _DATED_RE.match(name)
    if dated:
        return dated.group(1)
    if ext == ".bin" and stem in BINARY_KINDS:
        return stem
    if ext == ".bin" and len(parts) >= 2 and parts[-2] == SCAN_KIND and _UTIME_STEM_RE.match(stem):
        return SCAN_KIND
    if (
        ext in (".tiff", ".tif")
        and len(parts) >= 3
        and parts[-3] == IMAGE_KIND
        and _CAMERA_RE.match(parts[-2])
        and _UTIME_STEM_RE.match(stem)
    ):
        return IMAGE_KIND
    return None


def camera_of(relative_path: str) -> int:
    """Camera index k of an `lb3/Cam<k>/<utime>.tiff` path (nclt_kind must say lb3)."""
    match = _CAMERA_RE.match(relative_path.replace("\\", "/").split("/")[-2])
    if match is None:
        raise ValueError(f"not an lb3/Cam<k>/ path: {relative_path}")
    return int(match.group(1))


def utime_of(relative_path: str) -> int:
    """The utime (µs) a velodyne_sync or lb3 file is named by."""
    stem = posixpath.splitext(posixpath.basename(relative_path.replace("\\", "/")))[0]
    if not _UTIME_STEM_RE.match(stem):
        raise ValueError(f"file stem is not a utime: {relative_path}")
    return int(stem)

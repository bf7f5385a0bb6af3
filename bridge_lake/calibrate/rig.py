"""Rig calibration files: one YAML per vehicle and calibration period, validated on load.

A rig is data, not code: a user adds a vehicle by writing a file into a rigs folder (the
shipped `bridge_lake/calibrate/rigs/`, or folders named by BRIDGE_LAKE_RIGS, searched first).
A drive finds its rig through drive.yaml's `vehicle` and the calibration valid at the drive's
date (the newest `valid_from` not after it).

File layout (every key is checked; errors name the file and the key):

    vehicle: test-vehicle-01          # matches drive.yaml `vehicle`
    valid_from: 2024-01-01            # first day (UTC) this calibration holds
    base_frame: base_link             # REP-103: x forward, y left, z up (default base_link)
    frames:                           # every frame of the rig, each with its parent
      lidar_top:                      # = the frame_id of the sensor's rows in the lake
        parent: base_link             # default: base_frame
        kind: lidar                   # imu | gnss | lidar | camera | laser | heading | mount
        translation: [1.2, 0.0, 1.9]  # metres, the frame's origin in its parent
        rpy_deg: [0.5, -1.0, 90.0]    # exactly one rotation key: rpy_deg | rpy_rad |
                                      # quaternion_xyzw | matrix (3x3, rows; must be a rotation)
                                      # rpy: R = Rz(yaw) Ry(pitch) Rx(roll), fixed axes
        time_offset_ns: 0             # add to the sensor's times to get true time (default 0)
      front_camera:
        kind: camera
        optical: false                # true: the transform is of the optical frame (z forward,
                                      # x right, y down), as camera calibrations often give it
        camera: {width: 320, height: 240, K: [fx, 0, cx, 0, fy, cy, 0, 0, 1],
                 distortion_model: plumb_bob, D: [k1, k2, t1, t2, k3]}
    ground_truth:                     # optional: the source's own world frame for poses
      frame: world_ned                # frame_id of the ground_truth rows in the lake
      axes: ned                       # ned | enu
      body_frame: body                # the rig frame the ground-truth poses are of
      origin: {lat_deg: .., lon_deg: .., alt_m: ..}
      linearization: {a: .., b: ..}   # optional: the dataset's own linearized NED (NCLT)

Every camera gets its `<name>_optical` frame beside its body frame (REP-103/105).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bridge_lake.errors import BridgeLakeError
from bridge_lake.geometry import OPTICAL_IN_BODY, LinearizedNed, Transform, is_rotation_matrix
from bridge_lake.geometry.rotations import ORTHONORMAL_TOL
from bridge_lake.yaml_input import safe_load

SHIPPED_RIGS = Path(__file__).parent / "rigs"
"""Rigs that ship with the project (NCLT, the synthetic ADTF test vehicle)."""
RIGS_ENV = "BRIDGE_LAKE_RIGS"
"""Extra rig folders (os.pathsep-separated), searched before the shipped ones."""
MAX_RIG_BYTES = 1 << 20
KINDS = ("imu", "gnss", "lidar", "camera", "laser", "heading", "mount")
DISTORTION_MODELS = ("plumb_bob", "rational_polynomial", "equidistant", "none", "lookup_table")
ROTATION_KEYS = ("rpy_deg", "rpy_rad", "quaternion_xyzw", "matrix")
OPTICAL_SUFFIX = "_optical"
UNIT_QUATERNION_TOL = 1e-6


class RigError(BridgeLakeError):
    """A rig file that is unreadable or invalid; names the file and the key."""

    def __init__(self, path: str | os.PathLike, key: str | None, message: str) -> None:
        self.path, self.key = str(path), key
        super().__init__(f"{path}: {key}: {message}" if key else f"{path}: {message}")


class RigNotFoundError(BridgeLakeError):
    """No calibration for a vehicle at a date (unknown vehicle, or only later calibrations)."""


@dataclass(frozen=True)
class CameraModel:
    width: int
    height: int
    k: tuple[float, ...]
    """3x3 intrinsic matrix, row by row."""
    distortion_model: str
    d: tuple[float, ...]


@dataclass(frozen=True)
class RigFrame:
    name: str
    parent: str
    transform: Transform
    """T_parent_frame: the frame's pose in its parent."""
    kind: str = "mount"
    time_offset_ns: int = 0
    camera: CameraModel | None = None


@dataclass(frozen=True)
class GroundTruthWorld:
    """How a source's ground-truth world frame sits on the Earth (see module docstring)."""

    frame: str
    axes: str
    body_frame: str
    lat_deg: float
    lon_deg: float
    alt_m: float
    linearization: tuple[float, float] | None = None
    """(a, b) radii of the dataset's own linearized NED, if it uses one."""

    def linearized_ned(self) -> LinearizedNed:
        """The dataset's own geodetic ↔ world mapping (NCLT); ValueError if it has none."""
        if self.linearization is None or self.axes != "ned":
            raise ValueError(f"ground-truth frame {self.frame} has no linearized NED")
        return LinearizedNed(self.lat_deg, self.lon_deg, self.alt_m, *self.linearization)


@dataclass(frozen=True)
class Rig:
    vehicle: str
    valid_from: dt.date
    path: str
    base_frame: str
    frames: dict[str, RigFrame]
    """Every frame but the base, including derived `*_optical` frames."""
    ground_truth: GroundTruthWorld | None = None
    _cache: dict[str, Transform] = field(default_factory=dict, compare=False, repr=False)

    def to_base(self, frame: str) -> Transform:
        """T_base_frame, composed along the parent chain."""
        if frame == self.base_frame:
            return Transform.identity()
        if frame not in self._cache:
            f = self.frames.get(frame)
            if f is None:
                raise RigError(self.path, f"frames.{frame}", "no such frame in the rig")
            self._cache[frame] = self.to_base(f.parent) @ f.transform
        return self._cache[frame]


def load_rig(path: str | os.PathLike) -> Rig:
    """Read and validate one rig file; every problem is a RigError naming file and key."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_RIG_BYTES:
            raise RigError(path, None, f"larger than {MAX_RIG_BYTES} bytes")
        doc = safe_load(path.read_bytes())
    except OSError as exc:
        raise RigError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise RigError(path, None, f"not valid YAML: {exc}") from exc
    return parse_rig(doc, path)


def parse_rig(doc: Any, path: str | os.PathLike) -> Rig:
    p = _Parser(path)
    doc = p.mapping(doc, None)
    p.only(doc, None, ("vehicle", "valid_from", "base_frame", "frames", "ground_truth", "notes"))
    vehicle = p.text(doc.get("vehicle"), "vehicle")
    valid_from = p.date(doc.get("valid_from"), "valid_from")
    base = p.text(doc.get("base_frame", "base_link"), "base_frame")
    raw_frames = p.mapping(doc.get("frames"), "frames")
    if not raw_frames:
        raise RigError(path, "frames", "no frames")
    frames: dict[str, RigFrame] = {}
    for name, entry in raw_frames.items():
        key = f"frames.{name}"
        name = p.text(name, key)
        if name == base or name.endswith(OPTICAL_SUFFIX):
            raise RigError(path, key, f"reserved frame name ({base!r} or '*{OPTICAL_SUFFIX}')")
        for frame in p.frame(name, entry, key, base):
            frames[frame.name] = frame
    for frame in frames.values():
        if frame.parent != base and frame.parent not in frames:
            raise RigError(path, f"frames.{frame.name}.parent", f"unknown frame {frame.parent!r}")
    _check_acyclic(frames, base, path)
    gt = None
    if doc.get("ground_truth") is not None:
        gt = p.ground_truth(doc["ground_truth"], frames)
    return Rig(vehicle, valid_from, str(path), base, frames, gt)


def _check_acyclic(frames: Mapping[str, RigFrame], base: str, path: str | os.PathLike) -> None:
    for name in frames:
        seen, at = set(), name
        while at != base:
            if at in seen:
                raise RigError(path, f"frames.{name}.parent", "parents form a cycle")
            seen.add(at)
            at = frames[at].parent


class _Parser:
    """Typed reads of the YAML tree; each failure raises RigError with the key path."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = path

    def fail(self, key: str | None, message: str) -> RigError:
        return RigError(self.path, key, message)

    def mapping(self, value: Any, key: str | None) -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        return value

    def only(self, doc: dict, key: str | None, allowed: Iterable[str]) -> None:
        unknown = sorted(str(k) for k in doc if k not in allowed)
        if unknown:
            where = f"{key}." if key else ""
            raise self.fail(
                f"{where}{unknown[0]}", f"unknown key (expected one of {', '.join(allowed)})"
            )

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {value!r}")
        return value

    def number(self, value: Any, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {value!r}")
        if not np.isfinite(value):
            raise self.fail(key, f"not finite: {value!r}")
        return float(value)

    def numbers(self, value: Any, key: str, n: int | None = None) -> tuple[float, ...]:
        if not isinstance(value, list) or (n is not None and len(value) != n):
            raise self.fail(key, f"expected a list of {n or 'some'} numbers, got {value!r}")
        return tuple(self.number(v, f"{key}[{i}]") for i, v in enumerate(value))

    def integer(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {value!r}")
        return value

    def date(self, value: Any, key: str) -> dt.date:
        if isinstance(value, dt.datetime):
            return value.date()
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                pass
        raise self.fail(key, f"expected a date (YYYY-MM-DD), got {value!r}")

    def rotation(self, entry: dict, key: str) -> Transform:
        translation = self.numbers(entry.get("translation"), f"{key}.translation", 3)
        given = [k for k in ROTATION_KEYS if k in entry]
        if len(given) != 1:
            raise self.fail(
                key, f"give exactly one rotation ({' | '.join(ROTATION_KEYS)}), got {given or 0}"
            )
        rk = given[0]
        where = f"{key}.{rk}"
        if rk in ("rpy_deg", "rpy_rad"):
            rpy = self.numbers(entry[rk], where, 3)
            return Transform.from_rpy(translation, rpy, degrees=rk == "rpy_deg")
        if rk == "quaternion_xyzw":
            q = np.array(self.numbers(entry[rk], where, 4))
            if abs(np.linalg.norm(q) - 1.0) > UNIT_QUATERNION_TOL:
                raise self.fail(where, f"not a unit quaternion (norm {np.linalg.norm(q):.9f})")
            return Transform.from_quaternion(translation, q)
        rows = entry[rk]
        if not isinstance(rows, list) or len(rows) != 3:
            raise self.fail(where, "expected 3 rows of 3 numbers")
        m = np.array([self.numbers(r, f"{where}[{i}]", 3) for i, r in enumerate(rows)])
        if not is_rotation_matrix(m):
            gram = np.abs(m @ m.T - np.eye(3)).max()
            raise self.fail(
                where,
                f"not a rotation matrix (|R Rᵀ - I| = {gram:.3g} > {ORTHONORMAL_TOL} "
                f"or det = {np.linalg.det(m):.6f} ≠ +1)",
            )
        return Transform.from_matrix(translation, m)

    def camera(self, value: Any, key: str) -> CameraModel:
        cam = self.mapping(value, key)
        self.only(cam, key, ("width", "height", "K", "distortion_model", "D", "note"))
        width = self.integer(cam.get("width"), f"{key}.width")
        height = self.integer(cam.get("height"), f"{key}.height")
        if width <= 0 or height <= 0:
            raise self.fail(f"{key}.width", "image size must be positive")
        k = self.numbers(cam.get("K"), f"{key}.K", 9)
        if k[0] <= 0 or k[4] <= 0 or k[8] != 1.0 or k[3] != 0 or k[6] != 0 or k[7] != 0:
            raise self.fail(f"{key}.K", "expected [fx, s, cx, 0, fy, cy, 0, 0, 1] with fx, fy > 0")
        model = cam.get("distortion_model", "none")
        if model not in DISTORTION_MODELS:
            raise self.fail(
                f"{key}.distortion_model", f"{model!r} not in {', '.join(DISTORTION_MODELS)}"
            )
        d = self.numbers(cam.get("D", []), f"{key}.D")
        want = {"plumb_bob": 5, "rational_polynomial": 8, "equidistant": 4}.get(model)
        if want is not None and len(d) != want:
            raise self.fail(f"{key}.D", f"{model} needs {want} coefficients, got {len(d)}")
        return CameraModel(width, height, k, model, d)

    def frame(self, name: str, value: Any, key: str, base: str) -> list[RigFrame]:
        entry = self.mapping(value, key)
        self.only(
            entry,
            key,
            ("parent", "kind", "translation", *ROTATION_KEYS, "time_offset_ns", "optical",
             "camera", "note"),
        )  # fmt: skip
        parent = self.text(entry.get("parent", base), f"{key}.parent")
        kind = entry.get("kind", "mount")
        if kind not in KINDS:
            raise self.fail(f"{key}.kind", f"{kind!r} not in {', '.join(KINDS)}")
        transform = self.rotation(entry, key)
        offset = self.integer(entry.get("time_offset_ns", 0), f"{key}.time_offset_ns")
        camera = self.camera(entry["camera"], f"{key}.camera") if "camera" in entry else None
        optical = entry.get("optical", False)
        if not isinstance(optical, bool):
            raise self.fail(f"{key}.optical", f"expected true or false, got {optical!r}")
        if kind != "camera":
            if camera is not None or optical:
                raise self.fail(key, "camera/optical given for a frame whose kind is not camera")
            return [RigFrame(name, parent, transform, kind, offset)]
        optical_in_body = Transform.from_matrix(np.zeros(3), OPTICAL_IN_BODY)
        body = transform @ optical_in_body.inverse() if optical else transform
        return [
            RigFrame(name, parent, body, kind, offset, camera),
            RigFrame(name + OPTICAL_SUFFIX, name, optical_in_body, "mount", offset),
        ]

    def ground_truth(self, value: Any, frames: Mapping[str, RigFrame]) -> GroundTruthWorld:
        key = "ground_truth"
        g = self.mapping(value, key)
        self.only(g, key, ("frame", "axes", "body_frame", "origin", "linearization", "note"))
        axes = g.get("axes")
        if axes not in ("ned", "enu"):
            raise self.fail(f"{key}.axes", f"expected ned or enu, got {axes!r}")
        body = self.text(g.get("body_frame"), f"{key}.body_frame")
        if body not in frames:
            raise self.fail(f"{key}.body_frame", f"unknown frame {body!r}")
        origin = self.mapping(g.get("origin"), f"{key}.origin")
        self.only(origin, f"{key}.origin", ("lat_deg", "lon_deg", "alt_m"))
        lat = self.number(origin.get("lat_deg"), f"{key}.origin.lat_deg")
        lon = self.number(origin.get("lon_deg"), f"{key}.origin.lon_deg")
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            raise self.fail(f"{key}.origin", f"latitude/longitude out of range: {lat}, {lon}")
        lin = None
        if g.get("linearization") is not None:
            ab = self.mapping(g["linearization"], f"{key}.linearization")
            self.only(ab, f"{key}.linearization", ("a", "b"))
            lin = (
                self.number(ab.get("a"), f"{key}.linearization.a"),
                self.number(ab.get("b"), f"{key}.linearization.b"),
            )
        return GroundTruthWorld(
            self.text(g.get("frame"), f"{key}.frame"),
            axes,
            body,
            lat,
            lon,
            self.number(origin.get("alt_m"), f"{key}.origin.alt_m"),
            lin,
        )


def rig_dirs(extra: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Folders searched for rig files: `extra`, then $BRIDGE_LAKE_RIGS, then the shipped."""
    env = [p for p in os.environ.get(RIGS_ENV, "").split(os.pathsep) if p]
    return [*(Path(p) for p in extra), *(Path(p) for p in env), SHIPPED_RIGS]


def all_rigs(dirs: Iterable[Path]) -> list[Rig]:
    """Every rig file (*.yaml, *.yml) of the folders; an earlier folder's calibration wins
    over a later one with the same vehicle and valid_from (a user overrides a shipped rig)."""
    found: dict[tuple[str, dt.date], Rig] = {}
    for folder in dirs:
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            rig = load_rig(path)
            found.setdefault((rig.vehicle, rig.valid_from), rig)
    return list(found.values())


def find_rig(vehicle: str, on: dt.date, dirs: Iterable[Path] | None = None) -> Rig:
    """The calibration of `vehicle` valid on `on`: the newest valid_from not after it."""
    rigs = all_rigs(rig_dirs() if dirs is None else dirs)
    mine = sorted((r for r in rigs if r.vehicle == vehicle), key=lambda r: r.valid_from)
    if not mine:
        known = sorted({r.vehicle for r in rigs})
        raise RigNotFoundError(
            f"no rig calibration for vehicle {vehicle!r} (known: {', '.join(known) or 'none'}); "
            f"add a rig YAML to a folder of ${RIGS_ENV} or {SHIPPED_RIGS}"
        )
    valid = [r for r in mine if r.valid_from <= on]
    if not valid:
        first = mine[0]
        raise RigNotFoundError(
            f"no calibration of vehicle {vehicle!r} valid on {on}: the earliest "
            f"({first.path}) is valid_from {first.valid_from}"
        )
    return valid[-1]

"""One lake with a 1.5-minute ADTF and NCLT drive carrying the generators' planted events and
a short calm ADTF drive (none planted), normalized and calibrated by the library (no Dagster),
and each event drive's planted windows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.drive_meta import DRIVE_YAML, DriveMeta
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake.scenes.catalog import SceneResult, build_scene_catalog
from bridge_lake.synth import adtf, nclt
from bridge_lake_tests.support import register

MINUTES = 1.5
DRIVES = {"adtf": ("adtf-s7", 7), "nclt": ("nclt-s21", 21)}
"""source → (drive id, seed)"""
CALM = ("adtf-calm-s2", 2, 0.2)
"""drive id, seed, minutes of the calm drive: below PLANT_MIN_MINUTES, so nothing planted"""


@dataclass(frozen=True)
class Planted:
    kind: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class EventLake:
    root: Path
    lake: Lake
    planted: dict[str, list[Planted]]
    """drive id → its planted events (master clock ns)"""
    calm: str
    """the calm drive's id"""


def _write(path: Path, source: str, seed: int, minutes: float = MINUTES) -> list[Planted]:
    path.mkdir(parents=True)
    if source == "adtf":
        adtf.write_adtf_drive(path, minutes=minutes, seed=seed, lidar_points=200)
        meta = DriveMeta(vehicle="test-vehicle-01", source="adtf")
        events = [Planted(e.kind, e.start_ns, e.end_ns) for e in adtf.planted_events(minutes, seed)]
    else:
        files = nclt.write_nclt_drive(
            path, minutes=minutes, seed=seed, date="2012-01-08", hits_per_rev=500
        )
        meta = DriveMeta(vehicle="nclt-segway", source="nclt", recorded_at="2012-01-08")
        truth = json.loads(next(f for f in files if f.name == nclt.TRUTH_FILE).read_text())
        events = [
            Planted(e["kind"], e["start_utime"] * 1000, e["end_utime"] * 1000)
            for e in truth["events"]
        ]
    (path / DRIVE_YAML).write_text(meta.to_yaml())
    return events


@pytest.fixture(scope="session")
def event_lake(tmp_path_factory: pytest.TempPathFactory) -> EventLake:
    root = tmp_path_factory.mktemp("scene_lake")
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    planted = {}
    for source, (drive, seed) in DRIVES.items():
        planted[drive] = _write(root / "landing" / drive, source, seed)
    drive, seed, minutes = CALM
    assert _write(root / "landing" / drive, "adtf", seed, minutes) == []
    for drive in [*planted, CALM[0]]:
        register(landing, lake, drive)
        source = "nclt" if drive.startswith("nclt") else "adtf"
        assert normalize_drive(landing, lake, drive, source)[1], drive
        assert calibrate_drive(lake, drive)[1], drive
    return EventLake(root, lake, planted, CALM[0])


@pytest.fixture(scope="session")
def scene_results(event_lake: EventLake) -> dict[str, SceneResult]:
    """build_scene_catalog of every drive of the event lake, with the shipped rules."""
    drives = [*event_lake.planted, event_lake.calm]
    return {drive: build_scene_catalog(event_lake.lake, drive) for drive in drives}

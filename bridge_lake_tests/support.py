"""Helpers shared by the tests of the later layers: a lake holding synthetic drives that went
through the library's own raw → normalized (→ calibrated) steps, without Dagster."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.manifest import build_manifest
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake.synth import SynthDrive, synthesize


@dataclass(frozen=True)
class SynthLake:
    lake: Lake
    landing: LandingZone
    drives: dict[str, SynthDrive]
    """source (nclt / adtf) → the drive."""
    minutes: float


def register(landing: LandingZone, lake: Lake, drive_id: str) -> None:
    """The raw layer of one drive (manifest, drive.yaml, its export mapping), as the
    raw_manifest asset writes it."""
    m = build_manifest(landing, drive_id)
    lake.write_partition("raw", "manifest", drive_id, m.files_table())
    lake.write_partition("raw", "drives", drive_id, m.drive_table())
    lake.write_partition("raw", "export_mapping", drive_id, m.export_mapping_table())


def build_lake(
    root: Path, *, minutes: float = 0.2, seed: int = 0, calibrate: bool = True
) -> SynthLake:
    """One NCLT and one ADTF synthetic drive (light lidar) in `root`, normalized and, with
    `calibrate`, calibrated; every step must publish."""
    made = synthesize(root / "landing", drives=2, minutes=minutes, seed=seed, light=True)
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    for d in made:
        register(landing, lake, d.drive_id)
        _, published = normalize_drive(landing, lake, d.drive_id, d.source)
        assert published, d.drive_id
        if calibrate:
            _, published = calibrate_drive(lake, d.drive_id)
            assert published, d.drive_id
    return SynthLake(lake, landing, {d.source: d for d in made}, minutes)

"""Realistic synthetic drives in the exact on-disk formats, for demos, tests and benchmarks.

A drive folder holds its `drive.yaml` and the recording files as a real landing zone would:
NCLT sessions (every sensor file of the dataset, under `<date>/`) or ADTF `.dat` recordings.
Output is deterministic for a seed, so tests can rely on it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bridge_lake.drive_meta import DRIVE_YAML, DriveMeta
from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake.paths import validate_drive_id

SOURCES = ("nclt", "adtf", "all")
NCLT_DATES = ("2012-01-08", "2012-01-15", "2012-02-04", "2012-03-17", "2012-05-26", "2012-08-04")
WEATHER = ("overcast", "sunny", "light snow", "clear, dusk", "rain")


@dataclass(frozen=True)
class SynthDrive:
    drive_id: str
    source: str
    path: Path
    files: list[Path]


LIGHT_NCLT_HITS_PER_REV = 4_000
"""Lidar density of `light` drives: a 0.5-minute NCLT drive is ~45 MB instead of ~200 MB."""


def synthesize(
    out: Path,
    *,
    drives: int = 2,
    minutes: float = 1.0,
    seed: int = 0,
    source: str = "all",
    light: bool = False,
    nclt_hits_per_rev: int | None = None,
    adtf_rates: Mapping[str, int] | None = None,
    force: bool = False,
    progress: Callable[[int, str], None] | None = None,
) -> list[SynthDrive]:
    """Write `drives` drive folders into `out`; `source=all` alternates NCLT and ADTF.

    `light` thins the NCLT lidar (realistic revolutions hold ~50k hits) for demos and tests;
    `nclt_hits_per_rev` sets the density outright (benchmarks); `adtf_rates` the ADTF drives'
    `fps` and `can_hz` (`synth.adtf.write_adtf_drive`: benchmarks at other sensor rates).
    Every file is still written in its exact format. A drive folder that already holds files
    is refused (old and new files would mix into one drive) unless `force`, which empties it
    first. `progress` is called with (drives done, the drive being written) before each drive
    and at the end.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    if drives < 1 or minutes <= 0:
        raise ValueError("drives must be ≥ 1 and minutes > 0")
    out.mkdir(parents=True, exist_ok=True)
    for i in range(drives):
        kind = source if source != "all" else ("nclt", "adtf")[i % 2]
        _clear(out / _drive_id(kind, i, seed * 1000 + i), force)
    made = []
    for i in range(drives):
        kind = source if source != "all" else ("nclt", "adtf")[i % 2]
        drive_seed = seed * 1000 + i
        hits = nclt_hits_per_rev or (LIGHT_NCLT_HITS_PER_REV if light else None)
        if progress is not None:
            progress(i, _drive_id(kind, i, drive_seed))
        made.append(_one_drive(out, kind, i, minutes, drive_seed, hits, adtf_rates or {}))
    if progress is not None:
        progress(drives, "")
    return made


def _drive_id(kind: str, index: int, seed: int) -> str:
    if kind == "nclt":
        return validate_drive_id(f"nclt-{NCLT_DATES[index % len(NCLT_DATES)]}-s{seed}")
    return validate_drive_id(f"adtf-test-vehicle-s{seed}")


def _clear(folder: Path, force: bool) -> None:
    """Refuse a drive folder that holds files, or empty it with `force`."""
    if not folder.exists() or not any(folder.iterdir()):
        return
    if not force:
        n = sum(1 for p in folder.rglob("*") if p.is_file())
        raise BridgeLakeError(
            f"{folder} already holds a drive ({n} files); old and new files would mix. "
            "Pass --force to replace it."
        )
    shutil.rmtree(folder)


def _one_drive(
    out: Path,
    kind: str,
    index: int,
    minutes: float,
    seed: int,
    hits: int | None,
    adtf_rates: Mapping[str, int],
) -> SynthDrive:
    drive_id = _drive_id(kind, index, seed)
    path = out / drive_id
    path.mkdir(parents=True, exist_ok=True)
    recorded_at: str | None = None
    if kind == "nclt":
        from bridge_lake.synth.nclt import write_nclt_drive

        recorded_at = date = NCLT_DATES[index % len(NCLT_DATES)]
        density = {"hits_per_rev": hits} if hits else {}
        files = write_nclt_drive(path, minutes=minutes, seed=seed, date=date, **density)
        vehicle, route, what = "nclt-segway", "North Campus loop", "NCLT session"
    else:
        from bridge_lake.synth.adtf import write_adtf_drive

        files = write_adtf_drive(path, minutes=minutes, seed=seed, **adtf_rates)
        vehicle, route, what = "test-vehicle-01", "proving ground oval", "ADTF drive"
    meta = DriveMeta(
        vehicle=vehicle,
        source=kind,
        operator="synthetic",
        route=route,
        weather=WEATHER[seed % len(WEATHER)],
        notes=f"synthetic {what}, seed {seed}, {minutes:g} min",
        recorded_at=recorded_at,
        tags=("synthetic",),
    )
    (path / DRIVE_YAML).write_text(meta.to_yaml(), encoding="utf-8")
    return SynthDrive(drive_id, kind, path, [path / DRIVE_YAML, *files])

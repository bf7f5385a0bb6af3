"""Where the tests' real recordings live.

The ADTF recordings of audi/adtf_file (MPL-2.0) and the NCLT rig sheet are in the repository,
under bridge_lake_tests/data/, so a plain clone runs every test of them. A recording whose
licence keeps it out of the repository is looked for in `$BRIDGE_LAKE_TESTDATA` (default:
`../shared/testdata` beside the clone); a test that needs it and cannot find it skips, saying
how to get it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
ADTF_TESTDATA = DATA / "adtf"
NCLT_CALIBRATION = DATA / "nclt" / "calibration.yaml"
EXTERNAL = Path(os.environ.get("BRIDGE_LAKE_TESTDATA", REPO.parent / "shared" / "testdata"))

EXTERNAL_ONLY = {
    "adtfdat.hexpat.adtfdat": "GPL-2.0, from WerWolv/ImHex-Patterns",
}
"""Real recordings the tests use that are not in the repository, with the reason."""

RECORDING_SUFFIXES = (".dat", ".adtfdat")


def _external_adtf(name: str) -> Path | None:
    path = EXTERNAL / "adtf" / name
    return path if path.is_file() else None


def adtf_available(name: str) -> Path | None:
    """A real ADTF test file by name, or None when it is not available here."""
    path = ADTF_TESTDATA / name
    return path if path.is_file() else _external_adtf(name)


def adtf_path(name: str) -> Path:
    """A real ADTF test file by name; skips the calling test when it is not available."""
    found = adtf_available(name)
    if found is not None:
        return found
    why = EXTERNAL_ONLY.get(name, "not a known test file")
    pytest.skip(
        f"{name} is not in the repository ({why}): put it in {EXTERNAL / 'adtf'} or point "
        "BRIDGE_LAKE_TESTDATA at a folder holding adtf/ (bridge_lake_tests/data/adtf/SOURCES.md)"
    )


def adtf_recordings() -> list[Path]:
    """Every real ADTF recording available: the repository's, plus external ones found."""
    own = [p for p in ADTF_TESTDATA.iterdir() if p.is_file() and p.suffix in RECORDING_SUFFIXES]
    extra = [p for name in EXTERNAL_ONLY if (p := _external_adtf(name)) is not None]
    return sorted(own + extra, key=lambda p: p.name)


def adtf_expected_files() -> list[Path]:
    """The vendor reader's view (expected/<recording>.json) of every available recording."""
    found = []
    for rec in adtf_recordings():
        path = rec.parent / "expected" / f"{rec.name}.json"
        if path.is_file():
            found.append(path)
    return found

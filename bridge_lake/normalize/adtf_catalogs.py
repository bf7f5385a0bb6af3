"""Where a cut recording's stream names and types come from: a finished recording of the car.

A recording cut short lost its stream descriptions (formats/adtf/recover.py); a finished
recording of the same vehicle, recorded with the same configuration, describes the same
stream ids. Candidates, in this order:

1. the recording drive.yaml names (`catalog_from: DRIVE/FILE`, a path from the landing
   zone's root; it may be a file of the drive itself);
2. the drive's own finished recordings;
3. finished recordings of other drives in the landing zone whose drive.yaml names the same
   `vehicle` (nearest `recorded_at` first, then by drive id);
4. recovered copies in the lake (`raw/_recovered/`) of drives of the same vehicle
   (`raw/drives`): they are finished recordings, named when their own recovery found a
   catalog.

The first candidate that describes every stream id of the cut file's complete chunks is
taken; failing that, the one that describes the most (the others stay unnamed and the
report says so). A candidate of the other ADTF generation (2 against 3: other envelopes and
types) is never taken. Candidates are looked at lazily: other drives are only listed when
the drive itself has no catalog, and a catalog on an object store is read with a few ranged
reads (`copy_catalog`), not downloaded.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bridge_lake.drive_meta import CATALOG_FROM_KEY, DRIVE_YAML, DriveMeta, parse_drive_yaml
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf import RECORDING_SUFFIXES, ifhd
from bridge_lake.formats.adtf.errors import AdtfError
from bridge_lake.formats.adtf.recover import (
    chunk_stream_ids,
    copy_catalog,
    cut_problem,
    read_catalog,
)
from bridge_lake.lake import Lake
from bridge_lake.lake.paths import RECOVERED_DIR
from bridge_lake.lake.schemas import RAW_DRIVES
from bridge_lake.landing import LandingZone


@dataclass(frozen=True)
class CatalogPlaces:
    """Where a drive's cut recordings may find a catalog besides the drive itself."""

    drive_id: str
    vehicle: str | None = None
    named: object = None
    """drive.yaml `catalog_from`, as written (checked when it is needed)."""
    recorded_at: str | None = None
    landing: LandingZone | None = None
    lake: Lake | None = None


@dataclass(frozen=True)
class Catalog:
    path: Path
    """A local file `recover_dat(catalog=...)` reads: the recording, or its sparse copy."""
    label: str
    """Where it came from, for the WARN and the quarantine row."""


@dataclass
class _Candidate:
    label: str
    fetch: Callable[[], Path]
    described: set[int] | None = None
    generation: int | None = None


@dataclass
class CatalogChooser:
    """Picks a catalog per cut recording (module docstring); each candidate is read once."""

    places: CatalogPlaces | None
    own: list[tuple[str, Path]]
    """(drive-relative name, local path) of the drive's finished recordings."""
    workdir: Path
    problems: list[str] = field(default_factory=list)
    """Why a named or found candidate could not be used (they go into the WARN)."""
    _seen: list[_Candidate] = field(default_factory=list)
    _more: Iterator[_Candidate] | None = None

    def choose(self, cut: Path) -> Catalog | None:
        try:
            wanted = chunk_stream_ids(cut)
            with cut.open("rb") as f:
                generation = _generation(ifhd.parse_header(f.read(ifhd.HEADER_SIZE), str(cut)))
        except (AdtfError, OSError):
            return None
        best: tuple[int, _Candidate] | None = None
        for cand in self._candidates():
            if not self._read(cand) or cand.generation != generation:
                continue
            covered = len(wanted & (cand.described or set()))
            if covered == len(wanted):
                return Catalog(cand.fetch(), cand.label)
            if covered and (best is None or covered > best[0]):
                best = (covered, cand)
        return Catalog(best[1].fetch(), best[1].label) if best else None

    def _candidates(self) -> Iterator[_Candidate]:
        yield from self._seen
        if self._more is None:
            self._more = self._generate()
        for cand in self._more:
            self._seen.append(cand)
            yield cand

    def _read(self, cand: _Candidate) -> bool:
        if cand.described is not None:
            return True
        try:
            header, infos = read_catalog(cand.fetch())
        except (AdtfError, BridgeLakeError, OSError) as exc:
            self.problems.append(f"{cand.label}: not a finished recording ({exc})")
            cand.described = set()
            return False
        cand.generation = _generation(header)
        cand.described = {
            sid for sid, (name, info, _) in infos.items() if info or name != f"stream{sid}"
        }  # a recovered copy's streams that found no name are no catalog
        return True

    def _generate(self) -> Iterator[_Candidate]:
        places = self.places
        if places is not None and places.named is not None:
            named = self._named(places)
            if named is not None:
                yield named
        for rel, path in self.own:
            yield _Candidate(rel, lambda p=path: p)
        if places is None or places.vehicle is None:
            return
        if places.landing is not None:
            yield from self._landing(places, places.landing)
        if places.lake is not None:
            yield from self._lake(places, places.lake)

    def _named(self, places: CatalogPlaces) -> _Candidate | None:
        value = places.named
        where = f"drive.yaml {CATALOG_FROM_KEY} {value!r}"
        if not isinstance(value, str) or "/" not in value.strip("/"):
            self.problems.append(f"{where}: expected DRIVE/FILE (a path from the landing zone)")
            return None
        drive, _, rel = value.strip("/").partition("/")
        if places.landing is None:
            self.problems.append(f"{where}: no landing zone to read it from")
            return None
        try:
            size = next((f.size for f in places.landing.files(drive) if f.path == rel), None)
        except BridgeLakeError as exc:
            self.problems.append(f"{where}: {exc}")
            return None
        if size is None:
            self.problems.append(f"{where}: no such file in the landing zone")
            return None
        return self._landing_file(places.landing, drive, rel, size, f"{value} ({where})")

    def _landing(self, places: CatalogPlaces, landing: LandingZone) -> Iterator[_Candidate]:
        drives = []
        for drive in sorted(landing.scan().drives):
            if drive == places.drive_id:
                continue
            meta = _landing_meta(landing, drive)
            if meta is not None and meta.vehicle == places.vehicle:
                drives.append((_distance(places.recorded_at, meta.recorded_at), drive))
        for _, drive in sorted(drives):
            for f in landing.files(drive):
                if not f.path.lower().endswith(RECORDING_SUFFIXES):
                    continue
                if _finished(landing.read_head(drive, f.path, ifhd.HEADER_SIZE), f.size):
                    label = f"{drive}/{f.path} (landing zone, vehicle {places.vehicle})"
                    yield self._landing_file(landing, drive, f.path, f.size, label)

    def _landing_file(
        self, landing: LandingZone, drive: str, rel: str, size: int, label: str
    ) -> _Candidate:
        def fetch() -> Path:
            local = landing.local_path(drive, rel)
            if local is not None:
                return Path(local)
            out = self._stub(drive, rel)
            if not out.exists():
                with landing.open(drive, rel) as f:
                    copy_catalog(f, size, out)
                side = rel + ifhd.DDL_SIDECAR_SUFFIX  # ADTF 2 types live beside the file
                if any(x.path == side for x in landing.files(drive)):
                    with landing.open(drive, side) as f:
                        Path(str(out) + ifhd.DDL_SIDECAR_SUFFIX).write_bytes(f.read())
            return out

        return _Candidate(label, _once(fetch))

    def _lake(self, places: CatalogPlaces, lake: Lake) -> Iterator[_Candidate]:
        top = posixpath.join(lake.base, "raw", RECOVERED_DIR)
        fs = lake.fs
        fs.invalidate_cache(top)
        if not fs.exists(top):
            return
        for folder in sorted(fs.ls(top, detail=False)):
            name = posixpath.basename(folder.rstrip("/"))
            drive = name.removeprefix("drive=")
            if drive == places.drive_id or not name.startswith("drive="):
                continue
            if _lake_vehicle(lake, drive) != places.vehicle:
                continue
            for path, info in sorted(fs.find(folder, detail=True).items()):
                if path.endswith(ifhd.DDL_SIDECAR_SUFFIX):
                    continue
                label = f"{lake.url(path)} (lake, recovered, vehicle {places.vehicle})"
                fetch = _once(lambda p=path, n=info["size"]: self._lake_file(lake, p, n))
                yield _Candidate(label, fetch)

    def _lake_file(self, lake: Lake, path: str, size: int) -> Path:
        if lake.is_local:
            return Path(path)
        out = self._stub("lake", path)
        with lake.fs.open(path, "rb") as f:
            copy_catalog(f, size, out)
        side = path + ifhd.DDL_SIDECAR_SUFFIX
        if lake.fs.exists(side):
            Path(str(out) + ifhd.DDL_SIDECAR_SUFFIX).write_bytes(lake.fs.cat_file(side))
        return out

    def _stub(self, *parts: str) -> Path:
        out = self.workdir / "_catalogs" / Path(*(p.strip("/") for p in parts))
        out.parent.mkdir(parents=True, exist_ok=True)
        return out


def _once(fetch: Callable[[], Path]) -> Callable[[], Path]:
    got: list[Path] = []

    def call() -> Path:
        if not got:
            got.append(fetch())
        return got[0]

    return call


def _generation(header: ifhd.FileHeader) -> int:
    """2 or 3: ADTF 3 (IFHD 0x0400 and later) streams other envelopes and stream types."""
    return 3 if header.version >= 0x0400 else 2


def _finished(head: bytes, size: int) -> bool:
    try:
        return cut_problem(ifhd.parse_header(head, ""), size) is None
    except AdtfError:
        return False


def _landing_meta(landing: LandingZone, drive: str) -> DriveMeta | None:
    try:
        with landing.open(drive, DRIVE_YAML) as f:
            return parse_drive_yaml(f.read(1 << 20), where=f"{drive}/{DRIVE_YAML}")
    except (BridgeLakeError, OSError):
        return None


def _lake_vehicle(lake: Lake, drive: str) -> str | None:
    try:
        table = lake.read_partition("raw", RAW_DRIVES.name, drive, columns=["vehicle"])
    except (BridgeLakeError, OSError, ValueError):
        return None
    return table.column("vehicle")[0].as_py() if table.num_rows else None


def _distance(a: str | None, b: str | None) -> float:
    """Sort key: seconds between two drives' `recorded_at` (ISO dates or times), drives
    without a readable date last."""
    try:
        ta, tb = (_utc(dt.datetime.fromisoformat(x)) for x in (a or "", b or ""))
    except ValueError:
        return float("inf")
    return abs((ta - tb).total_seconds())


def _utc(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t

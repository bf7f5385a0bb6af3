"""Scene sets: every scene of the catalog as a trimmed MCAP with a manifest, and on request
fault-injected variants of them.

A scene is cut through the exports' own trimming (`export_drive` with the scene's window), so
it carries /tf_static (stamped at the window start) and the latest /tf before the window, and
its messages are byte for byte those of a plain export of the same window. Beside each MCAP a
JSON manifest says what a replay test needs to trust it: the scene (id, drive, window, tags,
score, the rule files and their sha256), the file's sha256, per-topic message counts, the
topic mapping, and the lake snapshot the scene was cut from; a variant's manifest adds the
clean file it was made from, the seed, the fault specs and every affected message
(`scenes.faults`). The manifests of a drive also go to the lake table scenes/sets.

Nothing in a manifest depends on when or how fast it was made, so re-making a scene set from
the same lake gives byte-identical files.

The lake snapshot: Dagster's data versions exist only inside Dagster, so a scene records a
content fingerprint of each partition it was cut from: sha256 over every part file's name,
size and Parquet footer (row counts, row-group statistics, sizes, the writer's created_by).
The lake writes identical input to identical bytes and any other content changes a footer,
so equal fingerprints mean the same partition; reading footers costs a few small reads per
part (benchmarks/bench_scene_sets.py compares hashing the whole files).
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import os
import posixpath
import re
import secrets
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.context import DriveContext
from bridge_lake.export.exporter import (
    ExportRequest,
    ExportResult,
    export_drive,
)
from bridge_lake.export.mapping import Mapping
from bridge_lake.lake import Lake
from bridge_lake.lake.paths import exports_dir
from bridge_lake.lake.schemas.scene_sets import SCENE_SETS
from bridge_lake.scenes.faults import (
    FaultError,
    InjectionResult,
    VariantSpec,
    check_variant_name,
    inject,
    parse_compact,
    sha256_file,
)

MANIFEST_KIND = "bridge_lake.scene_manifest"
MANIFEST_VERSION = 1
SCENES_DIR = "scenes"
"""Scene sets live in `<lake>/exports/drive=<id>/scenes/`."""
CATALOG = ("scenes", "catalog")
SETS = (SCENE_SETS.layer, SCENE_SETS.name)
ALWAYS_TABLES = ("raw/drives", "normalized/streams", "calibrated/tf_static", "scenes/catalog")
"""Partitions every scene reads besides its topics' tables: drive.yaml (MCAP metadata), the
drive's time span, /tf_static and the rig attachment, and the scene definition."""
SCENE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
"""Scene ids name files (`<id>--<variant>.json` stays within 255 bytes): the drive-id
alphabet, longer (catalog ids are `<drive>-<tag>-<t_start_ns>`)."""
DEFAULT_SEED = 14
DEFAULT_VARIANT = VariantSpec(
    "faults",
    tuple(
        f
        for text in (
            "imu:drop=2%",
            "imu:reorder=1@window=50ms",
            "gnss:delay=30ms",
            "lidar:missing=300ms",
            "camera:black=1",
            "can:drop=1%",
        )
        for f in parse_compact(text)
    ),
    seed=DEFAULT_SEED,
    scenes=("first",),
    optional=True,
)
"""What the scene_sets asset adds when its config names no variant: one variant of the first
scene with a fault of most kinds, each on a sensor most drives have (skipped where absent)."""


class SceneSetError(BridgeLakeError):
    """A scene set that cannot be made: no catalog, bad scene ids, unwritable output."""


# --- the catalog -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scene:
    """One row of scenes/catalog."""

    scene_id: str
    drive: str
    t_start_ns: int
    t_end_ns: int
    tags: tuple[str, ...] = ()
    score: float | None = None
    rules: tuple[str, ...] = ()
    rule_hashes: tuple[str, ...] = ()


def read_catalog(lake: Lake, drive: str) -> list[Scene]:
    """The drive's scenes in time order (then id); an error when the catalog has no
    partition for the drive (the scene_catalog asset has not run)."""
    if not lake.has_partition(*CATALOG, drive):
        raise SceneSetError(
            f"drive {drive} has no scene catalog (scenes/catalog) in {lake.root}: "
            "materialize scene_catalog first"
        )
    rows = lake.read_partition(*CATALOG, drive).to_pylist()
    scenes = []
    for r in rows:
        sid = r.get("scene_id")
        if not isinstance(sid, str) or not SCENE_ID_PATTERN.fullmatch(sid):
            raise SceneSetError(
                f"drive {drive}: scene id {sid!r} cannot name a file (letters, digits, "
                "'_', '.', '-'; at most 200)"
            )
        scenes.append(
            Scene(
                sid,
                drive,
                int(r["t_start_ns"]),
                int(r["t_end_ns"]),
                tuple(r.get("tags") or ()),
                None if r.get("score") is None else float(r["score"]),
                tuple(r.get("rules") or ()),
                tuple(r.get("rule_hashes") or ()),
            )
        )
    ids = [s.scene_id for s in scenes]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise SceneSetError(f"drive {drive}: scene ids {dup} appear more than once in the catalog")
    return sorted(scenes, key=lambda s: (s.t_start_ns, s.scene_id))


def select_scenes(
    scenes: Sequence[Scene], ids: Sequence[str] = (), tags: Sequence[str] = ()
) -> list[Scene]:
    """Scenes whose id matches one of the globs `ids` or that carry one of `tags` (nothing
    given: all)."""
    if not ids and not tags:
        return list(scenes)
    return [
        s
        for s in scenes
        if any(fnmatch.fnmatchcase(s.scene_id, p) for p in ids) or set(tags) & set(s.tags)
    ]


# --- lake snapshot ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSnapshot:
    table: str
    """layer/table"""
    files: int
    rows: int
    bytes: int
    fingerprint: str

    def as_dict(self) -> dict[str, Any]:
        """Every field but `table`, the key the snapshot is filed under."""
        return {k: v for k, v in asdict(self).items() if k != "table"}


def table_snapshot(lake: Lake, table: str, drive: str, *, content: bool = False) -> TableSnapshot:
    """The fingerprint of one partition (see the module doc); `content` hashes every byte of
    every part instead of the footers."""
    layer, name = table.split("/")
    digest = hashlib.sha256(f"{table}\n".encode())
    rows = total = 0
    files = lake.partition_files(layer, name, drive)
    for path in files:
        whole = hashlib.sha256()
        with lake.fs.open(path, "rb") as f:
            size = f.seek(0, 2)
            if content:
                f.seek(0)
                while block := f.read(8 << 20):
                    whole.update(block)
            f.seek(size - 8)
            tail = f.read(8)
            length = int.from_bytes(tail[:4], "little")
            if tail[4:] != b"PAR1" or length > size - 12:
                raise SceneSetError(f"{path}: not a Parquet file (no footer)")
            f.seek(size - 8 - length)
            footer = f.read(length)
        rows += pq.read_metadata(io.BytesIO(b"PAR1" + footer + tail)).num_rows
        total += size
        digest.update(f"{posixpath.basename(path)}\0{size}\0".encode())
        digest.update(whole.digest() if content else footer)
    return TableSnapshot(table, len(files), rows, total, digest.hexdigest())


def snapshot_digest(tables: dict[str, TableSnapshot]) -> str:
    text = json.dumps({k: v.as_dict() for k, v in sorted(tables.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def source_tables(lake: Lake, drive: str, result: ExportResult, mapping: Mapping) -> list[str]:
    """The partitions an export of `result`'s topics read: each topic's table, the point
    tables behind point clouds, and ALWAYS_TABLES; those the lake has."""
    tables = {t.table for t in result.topics.values()}
    for rule in mapping.topics:
        if rule.table in tables and rule.type == "sensor_msgs/msg/PointCloud2":
            tables.add("normalized/lidar_points")
            if rule.options.get("points") == "base_link":
                tables.update(("calibrated/lidar_transforms", "calibrated/deskewed_points"))
    tables.update(ALWAYS_TABLES)
    return sorted(t for t in tables if lake.has_partition(*t.split("/"), drive))


class Snapshots:
    """What every scene of one drive's set shares, computed once per set: the table
    fingerprints, the topic mapping and its reference in the manifests."""

    def __init__(self, lake: Lake, drive: str, *, content: bool = False) -> None:
        self.lake, self.drive, self.content = lake, drive, content
        self.context = DriveContext.load(lake, drive)
        """the drive's lake facts every scene's export shares"""
        self.cache: dict[str, TableSnapshot] = {}
        self.mappings: dict[str | None, tuple[Mapping, dict[str, Any]]] = {}

    def of(self, tables: Sequence[str]) -> dict[str, TableSnapshot]:
        for t in tables:
            if t not in self.cache:
                self.cache[t] = table_snapshot(self.lake, t, self.drive, content=self.content)
        return {t: self.cache[t] for t in tables}

    def mapping(self, given: str | os.PathLike | None) -> tuple[Mapping, dict[str, Any]]:
        key = None if given is None else str(given)
        if key not in self.mappings:
            rules = self.context.mapping(given)
            self.mappings[key] = (rules, rules.reference())
        return self.mappings[key]


# --- files -----------------------------------------------------------------------------------


@dataclass
class SceneFile:
    """One file of a scene set and its manifest."""

    scene: Scene
    variant: str
    """clean, or the variant's name"""
    path: Path
    manifest_path: Path
    manifest: dict[str, Any]
    sha256: str
    bytes: int
    manifest_sha256: str = ""
    injection: InjectionResult | None = None
    seconds: float = 0.0

    @property
    def messages(self) -> int:
        return int(self.manifest["messages"])


def scene_file_name(scene_id: str, variant: str = "clean") -> str:
    return f"{scene_id}.mcap" if variant == "clean" else f"{scene_id}--{variant}.mcap"


def manifest_path_for(path: str | os.PathLike) -> Path:
    """The manifest beside a scene file: same name, .json instead of .mcap."""
    p = Path(path)
    return p.with_name(p.name.removesuffix(".mcap") + ".json")


def build_scene(
    lake: Lake,
    scene: Scene,
    folder: Path,
    *,
    mapping: str | os.PathLike | None = None,
    snapshots: Snapshots | None = None,
) -> SceneFile:
    """The scene's window exported to `<folder>/<scene_id>.mcap` with its manifest."""
    t0 = time.perf_counter()
    drive = scene.drive
    if scene.t_end_ns <= scene.t_start_ns:
        raise SceneSetError(
            f"scene {scene.scene_id}: empty window [{scene.t_start_ns}, {scene.t_end_ns})"
        )
    path = folder / scene_file_name(scene.scene_id)
    snapshots = snapshots or Snapshots(lake, drive)
    rules, mapping_ref = snapshots.mapping(mapping)
    result = export_drive(
        lake,
        drive,
        path,
        ExportRequest(spans=[(scene.t_start_ns, scene.t_end_ns)], mapping=rules.path, force=True),
        context=snapshots.context,
    )
    snap = snapshots.of(source_tables(lake, drive, result, rules))
    sha = sha256_file(path)
    topics = {
        t.topic: {
            "type": t.type,
            "messages": t.messages,
            "first_ns": t.first_ns,
            "last_ns": t.last_ns,
        }
        for t in sorted(result.topics.values(), key=lambda t: t.topic)
    }
    manifest = {
        "kind": MANIFEST_KIND,
        "manifest_version": MANIFEST_VERSION,
        "scene_id": scene.scene_id,
        "drive": drive,
        "variant": "clean",
        "window": {
            "start_ns": scene.t_start_ns,
            "end_ns": scene.t_end_ns,
            "seconds": (scene.t_end_ns - scene.t_start_ns) / 1e9,
            "exported": [[w.start_ns, w.end_ns] for w in result.windows or []],
        },
        "tags": list(scene.tags),
        "score": scene.score,
        "rules": [
            {"file": r, "sha256": h}
            for r, h in zip(
                scene.rules, list(scene.rule_hashes) + [None] * len(scene.rules), strict=False
            )
        ],
        "file": {"name": path.name, "bytes": path.stat().st_size, "sha256": sha},
        "format": {
            "format": result.format,
            "encoding": result.encoding,
            "time_base": "master",
            "mapping": mapping_ref,
        },
        "messages": result.messages,
        "topics": topics,
        "lake_snapshot": {
            "tables": {k: v.as_dict() for k, v in sorted(snap.items())},
            "sha256": snapshot_digest(snap),
        },
        "source": None,
        "faults": None,
    }
    return _finish(scene, "clean", path, manifest, sha, time.perf_counter() - t0)


def build_variant(clean: SceneFile, variant: VariantSpec, folder: Path) -> SceneFile:
    """A fault-injected copy of a clean scene file, with its manifest (see scenes.faults)."""
    t0 = time.perf_counter()
    check_variant_name(variant.name)
    path = folder / scene_file_name(clean.scene.scene_id, variant.name)
    try:
        injection = inject(
            clean.path,
            path,
            variant.faults,
            seed=variant.seed,
            optional=variant.optional,
            source_sha256=clean.sha256,
        )
    except FaultError as exc:
        raise FaultError(f"scene {clean.scene.scene_id}, variant {variant.name}: {exc}") from None
    sha = sha256_file(path)
    manifest = dict(clean.manifest)
    manifest["variant"] = variant.name
    manifest["file"] = {"name": path.name, "bytes": path.stat().st_size, "sha256": sha}
    manifest["topics"] = {
        topic: {"type": ty, "messages": n, "first_ns": first, "last_ns": last}
        for topic, (ty, n, first, last) in sorted(injection.topics.items())
    }
    manifest["messages"] = sum(n for _, n, _, _ in injection.topics.values())
    manifest["source"] = {"file": clean.path.name, "sha256": clean.sha256}
    manifest["faults"] = {
        "seed": variant.seed,
        "specs": injection.specs,
        "skipped": injection.skipped,
        "count": len(injection.faults),
        "injected": injection.grouped(),
    }
    out = _finish(clean.scene, variant.name, path, manifest, sha, time.perf_counter() - t0)
    out.injection = injection
    return out


def _finish(
    scene: Scene, variant: str, path: Path, manifest: dict, sha: str, seconds: float
) -> SceneFile:
    mpath = manifest_path_for(path)
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    tmp = mpath.with_name(f".{mpath.name}.{secrets.token_hex(4)}.partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, mpath)
    return SceneFile(
        scene,
        variant,
        path,
        mpath,
        manifest,
        sha,
        path.stat().st_size,
        hashlib.sha256(text.encode()).hexdigest(),
        seconds=seconds,
    )


def load_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """A scene manifest, checked to have every field replay-check reads, of its type."""
    p = Path(path)
    try:
        doc = json.loads(p.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise SceneSetError(f"{p}: cannot be read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise SceneSetError(f"{p}: not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind") != MANIFEST_KIND:
        raise SceneSetError(f"{p}: not a scene manifest (kind {MANIFEST_KIND!r})")
    if doc.get("manifest_version") != MANIFEST_VERSION:
        raise SceneSetError(f"{p}: manifest version {doc.get('manifest_version')!r} unsupported")
    _check_manifest(doc, p)
    return doc


def _check_manifest(doc: dict[str, Any], p: Path) -> None:
    """Types of the fields replay-check reads; a manifest is input like any file. The clean
    scene a variant names must be a file beside it (a name, not a path)."""

    def need(ok: bool, key: str, what: str) -> None:
        if not ok:
            raise SceneSetError(f"{p}: {key}: expected {what}")

    def integer(v: Any) -> bool:  # an int64, as every time and count of the lake
        return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63

    def mapping(v: Any, *keys: str) -> bool:
        return isinstance(v, dict) and all(k in v for k in keys)

    window, topics, source = doc.get("window"), doc.get("topics"), doc.get("source")
    need(mapping(window, "start_ns", "end_ns"), "window", "{start_ns, end_ns}")
    need(integer(window["start_ns"]) and integer(window["end_ns"]), "window", "integer ns")
    need(mapping(doc.get("file"), "sha256"), "file", "{sha256: text}")
    need(isinstance(doc["file"]["sha256"], str), "file.sha256", "text")
    need(topics is None or isinstance(topics, dict), "topics", "a mapping topic -> counts")
    for topic, info in (topics or {}).items():
        ok = mapping(info, "type", "messages") and isinstance(info["type"], str)
        need(ok and integer(info["messages"]), f"topics.{topic}", "{type: text, messages: int}")
    if source is not None:
        need(mapping(source, "file", "sha256"), "source", "{file, sha256}")
        name = source["file"]
        plain = isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
        need(plain and "\\" not in name and "\0" not in name, "source.file", "a file name")
        need(isinstance(source["sha256"], str), "source.sha256", "text")
    fmt, snap = doc.get("format"), doc.get("lake_snapshot")
    ok = fmt is None or (mapping(fmt, "encoding", "mapping") and mapping(fmt["mapping"], "file"))
    need(ok, "format", "{encoding, mapping: {file, sha256}}")
    tables = snap.get("tables") if isinstance(snap, dict) else None
    ok = snap is None or (
        isinstance(tables, dict)
        and all(isinstance(t, str) and t.count("/") == 1 for t in tables)
        and all(mapping(v, "fingerprint") for v in tables.values())
    )
    need(ok, "lake_snapshot", "{tables: {layer/table: {fingerprint}}}")
    need(isinstance(doc.get("drive", ""), str), "drive", "text")
    faults = doc.get("faults")
    need(faults is None or isinstance(faults, dict), "faults", "a mapping or null")
    groups = (faults or {}).get("injected", [])
    need(isinstance(groups, list), "faults.injected", "a list")
    for i, g in enumerate(groups):
        key = f"faults.injected[{i}]"
        need(mapping(g, "topic", "kind", "index", "orig_ns", "new_ns"), key, "a fault group")
        need(isinstance(g["topic"], str) and isinstance(g["kind"], str), key, "topic, kind")
        need(integer(g.get("step", 0)), f"{key}.step", "an integer")
        columns = g["index"], g["orig_ns"], g["new_ns"]
        need(all(isinstance(c, list) for c in columns), key, "lists index, orig_ns, new_ns")
        need(len({len(c) for c in columns}) == 1, key, "index, orig_ns, new_ns of one length")
        need(all(integer(v) for v in g["index"] + g["orig_ns"]), key, "integer index, orig_ns")
        need(all(v is None or integer(v) for v in g["new_ns"]), key, "integer or null new_ns")


# --- scene sets ------------------------------------------------------------------------------


@dataclass
class SceneSet:
    drive: str
    folder: str
    """where the files are (a local path, or the lake URL of the scenes folder)"""
    files: list[SceneFile] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def scenes(self) -> int:
        return sum(f.variant == "clean" for f in self.files)

    @property
    def variants(self) -> int:
        return sum(f.variant != "clean" for f in self.files)


Progress = Callable[[SceneFile], None]


def build_scene_set(
    lake: Lake,
    drive: str,
    folder: str | os.PathLike,
    *,
    scenes: Sequence[Scene] | None = None,
    variants: Sequence[VariantSpec] = (),
    mapping: str | os.PathLike | None = None,
    progress: Progress | None = None,
) -> SceneSet:
    """Every scene (default: the drive's whole catalog) and the variants that select it,
    written to `folder`."""
    t0 = time.perf_counter()
    folder = Path(folder)
    if not folder.is_dir():
        raise SceneSetError(f"output folder {folder} does not exist")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise SceneSetError(f"variant names must be unique: {names}")
    scenes = read_catalog(lake, drive) if scenes is None else list(scenes)
    snapshots = Snapshots(lake, drive)
    out = SceneSet(drive, str(folder))
    for i, scene in enumerate(scenes):
        clean = build_scene(lake, scene, folder, mapping=mapping, snapshots=snapshots)
        out.files.append(clean)
        if progress:
            progress(clean)
        for v in variants:
            if v.selects(scene.scene_id, scene.tags, i == 0):
                made = build_variant(clean, v, folder)
                out.files.append(made)
                if progress:
                    progress(made)
    out.seconds = time.perf_counter() - t0
    return out


def manifest_table(files: Sequence[SceneFile]) -> pa.Table:
    """The rows of scenes/sets for these files."""
    rows = []
    for f in files:
        m = f.manifest
        faults = []
        for g in (m.get("faults") or {}).get("injected", []):
            for k, o, n in zip(g["index"], g["orig_ns"], g["new_ns"], strict=True):
                faults.append(
                    {"kind": g["kind"], "topic": g["topic"], "index": k, "orig_ns": o, "new_ns": n}
                )
        rows.append(
            {
                "scene_id": f.scene.scene_id,
                "variant": f.variant,
                "file": f.path.name,
                "manifest_file": f.manifest_path.name,
                "bytes": f.bytes,
                "sha256": f.sha256,
                "manifest_sha256": f.manifest_sha256,
                "t_start_ns": f.scene.t_start_ns,
                "t_end_ns": f.scene.t_end_ns,
                "tags": list(f.scene.tags),
                "score": f.scene.score,
                "rules": list(f.scene.rules),
                "rule_hashes": list(f.scene.rule_hashes),
                "messages": f.messages,
                "topics": [
                    {"topic": t, "type": v["type"], "messages": v["messages"]}
                    for t, v in m["topics"].items()
                ],
                "mapping": m["format"]["mapping"]["file"],
                "source_file": (m.get("source") or {}).get("file"),
                "source_sha256": (m.get("source") or {}).get("sha256"),
                "seed": (m.get("faults") or {}).get("seed"),
                "fault_specs": (m.get("faults") or {}).get("specs"),
                "faults": faults if m.get("faults") else None,
                "snapshot": [{"table": t, **v} for t, v in m["lake_snapshot"]["tables"].items()],
                "snapshot_sha256": m["lake_snapshot"]["sha256"],
            }
        )
    return pa.Table.from_pylist(rows, schema=SCENE_SETS.schema)


def scenes_folder(lake: Lake, drive: str) -> str:
    """`<lake>/exports/drive=<id>/scenes` as the lake's filesystem names it."""
    return posixpath.join(exports_dir(lake.base, drive), SCENES_DIR)


def scene_set_to_lake(
    lake: Lake,
    drive: str,
    *,
    variants: Sequence[VariantSpec] = (DEFAULT_VARIANT,),
    mapping: str | os.PathLike | None = None,
    progress: Progress | None = None,
) -> SceneSet:
    """The drive's scene set in the lake: files under exports/drive=<id>/scenes/ (files of an
    earlier set that this one no longer has are removed), manifests in scenes/sets."""
    scenes = read_catalog(lake, drive)
    target = scenes_folder(lake, drive)
    if lake.is_local:
        Path(target).mkdir(parents=True, exist_ok=True)
        made = build_scene_set(
            lake,
            drive,
            target,
            scenes=scenes,
            variants=variants,
            mapping=mapping,
            progress=progress,
        )
    else:
        with tempfile.TemporaryDirectory(prefix="bridge_lake_scenes_") as tmp:
            made = build_scene_set(
                lake,
                drive,
                tmp,
                scenes=scenes,
                variants=variants,
                mapping=mapping,
                progress=progress,
            )
            lake.fs.makedirs(target, exist_ok=True)
            for f in made.files:
                lake.fs.put(str(f.path), posixpath.join(target, f.path.name))
                lake.fs.put(str(f.manifest_path), posixpath.join(target, f.manifest_path.name))
    keep = {n for f in made.files for n in (f.path.name, f.manifest_path.name)}
    lake.fs.invalidate_cache(target)
    try:
        entries = lake.fs.ls(target, detail=False)
    except FileNotFoundError:  # an object store has no empty folders: no scenes, no prefix
        entries = []
    for entry in entries:
        name = posixpath.basename(entry.rstrip("/"))
        if name.endswith((".mcap", ".json")) and name not in keep and not name.startswith("."):
            lake.fs.rm(entry)
    lake.write_partition(*SETS, drive, manifest_table(made.files))
    made.folder = lake.url(target)
    return made


__all__ = [
    "DEFAULT_VARIANT",
    "Scene",
    "SceneFile",
    "SceneSet",
    "SceneSetError",
    "Snapshots",
    "TableSnapshot",
    "build_scene",
    "build_scene_set",
    "build_variant",
    "load_manifest",
    "manifest_path_for",
    "manifest_table",
    "read_catalog",
    "scene_set_to_lake",
    "select_scenes",
    "table_snapshot",
]

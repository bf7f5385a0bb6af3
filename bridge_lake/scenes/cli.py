"""`bridge-lake scenes list|export|validate` and `bridge-lake replay-check`.

`add_commands(subparsers)` adds both to the `bridge-lake` parser; the work is imported
when a command runs, so `bridge-lake --help` stays fast. Exit codes: 0 pass, 1 a check
failed, 2 an error (bad arguments, missing files; printed in one line by `bridge-lake`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bridge_lake.cli_common import (
    add_command,
    add_group,
    add_json,
    add_lake,
    add_report,
    lake_from_args,
    table_lines,
)
from bridge_lake.errors import BridgeLakeError


def _drives(lake, given: list[str] | None) -> list[str]:
    from bridge_lake.scenes.sets import CATALOG

    known = lake.drives(*CATALOG)
    if not given:
        return known
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise BridgeLakeError(
            f"no scene catalog for drive(s) {', '.join(unknown)} "
            f"(catalogued: {', '.join(known) or 'none'})"
        )
    return list(given)


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    for line in table_lines([header, *rows], rule=True):
        print(line)


# --- scenes list -----------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    """the scene catalog as a table"""
    from bridge_lake.export.exporter import drive_span
    from bridge_lake.scenes.sets import SETS, read_catalog, select_scenes

    lake = lake_from_args(args)
    rows: list[dict[str, Any]] = []
    for drive in _drives(lake, args.drive):
        scenes = select_scenes(read_catalog(lake, drive), args.scene or (), args.tag or ())
        files: dict[str, list[str]] = {}
        if lake.has_partition(*SETS, drive):
            sets = lake.read_partition(*SETS, drive, columns=["scene_id", "variant"])
            for sid, variant in zip(
                *(sets.column(c).to_pylist() for c in sets.column_names), strict=True
            ):
                files.setdefault(sid, []).append(variant)
        first = drive_span(lake, drive)[0] if scenes else 0
        for s in scenes:
            rows.append(
                {
                    "drive": drive,
                    "scene_id": s.scene_id,
                    "start_s": round((s.t_start_ns - first) / 1e9, 3),
                    "duration_s": round((s.t_end_ns - s.t_start_ns) / 1e9, 3),
                    "t_start_ns": s.t_start_ns,
                    "t_end_ns": s.t_end_ns,
                    "tags": list(s.tags),
                    "score": s.score,
                    "rules": list(s.rules),
                    "files": files.get(s.scene_id, []),
                }
            )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    _print_table(
        ["drive", "scene", "start s", "length s", "score", "tags", "rules", "scene set"],
        [
            [
                r["drive"],
                r["scene_id"],
                f"{r['start_s']:.2f}",
                f"{r['duration_s']:.2f}",
                "" if r["score"] is None else f"{r['score']:.3g}",
                ",".join(r["tags"]),
                ",".join(r["rules"]),
                ",".join(r["files"]) or "-",
            ]
            for r in rows
        ],
    )
    print(f"{len(rows)} scenes")
    return 0


# --- scenes export ---------------------------------------------------------------------------


def variants_from_args(args: argparse.Namespace) -> list:
    """The fault variants of `--inject` (one variant, every exported scene) and `--faults`."""
    from bridge_lake.scenes.faults import (
        VariantSpec,
        check_variant_name,
        load_yaml,
        specs_from_text,
    )

    variants = []
    if args.inject:
        name = check_variant_name(args.variant, "--variant")
        variants.append(VariantSpec(name, tuple(specs_from_text(args.inject)), args.seed))
    if args.faults:
        variants += load_yaml(args.faults)
    return variants


def _cmd_export(args: argparse.Namespace) -> int:
    """a scene or a tag across drives to a folder (MCAP + manifest each)

    Cut scenes from the lake as trimmed MCAPs with JSON manifests, optionally with a
    fault-injected variant of each."""
    from bridge_lake.scenes.sets import (
        build_scene_set,
        manifest_path_for,
        read_catalog,
        scene_file_name,
        select_scenes,
    )

    if not args.scene and not args.tag:
        raise BridgeLakeError("give --scene ID (globs allowed) or --tag TAG")
    lake = lake_from_args(args)
    variants = variants_from_args(args)
    plan = []
    for drive in _drives(lake, args.drive):
        chosen = select_scenes(read_catalog(lake, drive), args.scene or (), args.tag or ())
        if chosen:
            plan.append((drive, chosen))
    if not plan:
        raise BridgeLakeError("no scene matches --scene/--tag in the catalog")
    ids = [s.scene_id for _, scenes in plan for s in scenes]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise BridgeLakeError(f"scene ids {dup} exist in several drives: add --drive")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.force:
        names = [scene_file_name(i, v) for i in ids for v in ["clean", *(x.name for x in variants)]]
        clash = [n for n in names if (out / n).exists() or manifest_path_for(out / n).exists()]
        if clash:
            raise BridgeLakeError(f"{out / clash[0]} exists; pass --force to overwrite")
    total = 0
    for drive, scenes in plan:
        made = build_scene_set(
            lake,
            drive,
            out,
            scenes=scenes,
            variants=variants,
            mapping=args.mapping,
            progress=None
            if args.quiet
            else lambda f: print(
                f"  {f.path.name}: {f.messages} messages, {f.bytes / 1e6:.2f} MB, {f.seconds:.2f} s"
            ),
        )
        total += len(made.files)
    print(f"{total} files in {out}")
    return 0


# --- scenes validate -------------------------------------------------------------------------


def validate_folder(folder: Path) -> list[dict[str, Any]]:
    """Every manifest of the folder against its file (sha256, per-topic counts from the
    MCAP summary, a variant's clean source), and every MCAP without a manifest."""
    from bridge_lake.formats.ros.files import RecordingError
    from bridge_lake.formats.ros.readers import McapRecording, open_recording
    from bridge_lake.scenes.faults import sha256_file
    from bridge_lake.scenes.sets import MANIFEST_KIND, SceneSetError, load_manifest

    results = []
    described = set()
    for mpath in sorted(folder.glob("*.json")):
        try:
            head = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(head, dict) or head.get("kind") != MANIFEST_KIND:
            continue
        problems: list[str] = []
        try:
            doc = load_manifest(mpath)
        except SceneSetError as exc:
            results.append(
                {"manifest": mpath.name, "file": None, "ok": False, "problems": [str(exc)]}
            )
            continue
        name = doc["file"]["name"]
        described.add(name)
        path = folder / name
        row = {
            "manifest": mpath.name,
            "file": name,
            "variant": doc.get("variant"),
            "messages": doc.get("messages"),
        }
        if not path.is_file():
            problems.append("file missing")
        else:
            if sha256_file(path) != doc["file"]["sha256"]:
                problems.append("sha256 differs from the manifest")
            try:
                with open_recording(path) as recording:
                    mcap = isinstance(recording, McapRecording)
                    summary = recording.summary if mcap else None
                if summary is None:
                    raise RecordingError(f"{path}: not an MCAP file with a summary")
                counts = summary.statistics.channel_message_counts if summary else {}
                have = {c.topic: counts.get(cid, 0) for cid, c in summary.channels.items()}
            except Exception as exc:  # the reader's errors: a finding, not a crash
                problems.append(f"not readable: {type(exc).__name__}: {exc}")
                have = {}
            for topic, info in sorted(doc["topics"].items()):
                if have and have.get(topic, 0) != info["messages"]:
                    problems.append(
                        f"{topic}: {have.get(topic, 0)} messages, manifest {info['messages']}"
                    )
        source = doc.get("source")
        if source:
            clean = folder / source["file"]
            if not clean.is_file():
                problems.append(f"source {source['file']} missing")
            elif sha256_file(clean) != source["sha256"]:
                problems.append(f"source {source['file']} is not the file it was made from")
        row["ok"], row["problems"] = not problems, problems
        results.append(row)
    for path in sorted(folder.glob("*.mcap")):
        if path.name not in described:
            results.append(
                {
                    "manifest": None,
                    "file": path.name,
                    "ok": False,
                    "problems": ["no manifest describes it"],
                }
            )
    return results


def _cmd_validate(args: argparse.Namespace) -> int:
    """check a folder of scenes against its manifests"""
    from bridge_lake.scenes.replay import replay_check

    folder = Path(args.folder)
    if not folder.is_dir():
        raise BridgeLakeError(f"{folder}: no such folder")
    results = validate_folder(folder)
    if not results:
        raise BridgeLakeError(f"{folder}: no scene manifests or MCAP files in it")
    if args.replay:
        for r in results:
            if r.get("manifest") and r["ok"]:
                report = replay_check(folder / r["file"], against=args.against)
                failed = [f"{c.level} {c.name}: {c.detail}" for c in report.checks if not c.ok]
                r["replay"] = "pass" if report.ok else "FAIL"
                r["problems"] += failed
                r["ok"] = report.ok
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print_table(
            ["file", "variant", "messages", "status", "problems"],
            [
                [
                    str(r.get("file")),
                    str(r.get("variant") or ""),
                    str(r.get("messages") or ""),
                    "ok" if r["ok"] else "FAIL",
                    "; ".join(r["problems"])[:160],
                ]
                for r in results
            ],
        )
        bad = sum(not r["ok"] for r in results)
        print(f"{len(results) - bad}/{len(results)} files valid")
    return 0 if all(r["ok"] for r in results) else 1


# --- replay-check ----------------------------------------------------------------------------


def _cmd_replay(args: argparse.Namespace) -> int:
    """validate a scene MCAP: data, timing and content against its manifest

    Three levels: data (topics, counts, every message decodes), timing (intervals,
    reordering, gaps, exactly the listed faults), content (checksums against the source or the
    lake). Exit 0 pass, 1 fail, 2 error."""
    from bridge_lake import settings
    from bridge_lake.scenes.replay import replay_check
    from bridge_lake.scenes.replay_report import render_html, render_json, render_table

    options = settings.storage_options(args.against) if args.against else None
    report = replay_check(
        args.file, manifest=args.manifest, against=args.against, storage_options=options
    )
    if args.html:
        Path(args.html).write_text(render_html(report), encoding="utf-8")
    print(render_json(report) if args.json else render_table(report))
    return 0 if report.ok else 1


# --- parsers ---------------------------------------------------------------------------------

INJECT_HELP = (
    "fault in the compact form, repeatable or comma separated: camera:drop=0.5%%, "
    "imu:delay=30ms, camera:black=2, lidar:missing=2s@10s, can:reorder=5@window=50ms, "
    "*:clock_offset=+20ms"
)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add `scenes` (list, export, validate) and `replay-check` to `bridge-lake`."""
    scenes = add_group(
        sub, "scenes", "scene catalog and scene sets: list, export, validate", "what to do"
    )

    q = add_command(scenes, "list", _cmd_list)
    add_lake(q)
    q.add_argument("--drive", nargs="+", help="only these drives")
    q.add_argument("--scene", nargs="+", help="scene id globs")
    q.add_argument("--tag", nargs="+", help="scenes with any of these tags")
    add_json(q)

    q = add_command(scenes, "export", _cmd_export)
    add_lake(q)
    q.add_argument("--scene", nargs="+", help="scene id globs")
    q.add_argument("--tag", nargs="+", help="every scene with any of these tags")
    q.add_argument("--drive", nargs="+", help="only these drives (default: every drive)")
    q.add_argument("--out", type=Path, required=True, help="folder to write into")
    q.add_argument("--inject", action="append", help=INJECT_HELP)
    q.add_argument("--variant", default="faults", help="name of the --inject variant")
    q.add_argument("--seed", type=int, default=0, help="seed of the --inject variant")
    q.add_argument("--faults", type=Path, help="fault variants YAML (see scenes/faults.py)")
    q.add_argument("--mapping", type=Path, help="topic mapping YAML instead of the default")
    q.add_argument("--force", action="store_true", help="overwrite existing files")
    q.add_argument("--quiet", action="store_true", help="no line per file")

    q = add_command(scenes, "validate", _cmd_validate)
    q.add_argument("folder", type=Path, help="a folder of scene MCAPs with their manifests")
    q.add_argument("--replay", action="store_true", help="also run replay-check on each file")
    q.add_argument("--against", help="with --replay: compare with this lake's rows")
    add_json(q)

    p = add_command(sub, "replay-check", _cmd_replay)
    p.add_argument("file", type=Path, help="scene MCAP")
    p.add_argument("--manifest", type=Path, help="manifest JSON (default: beside the file)")
    p.add_argument("--against", help="lake root: compare with the lake's rows")
    add_report(p)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (tests, or before `bridge-lake` registers the commands)."""
    parser = argparse.ArgumentParser(prog="bridge-lake")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (BridgeLakeError, OSError) as exc:
        print(f"bridge-lake: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["add_commands", "main", "validate_folder", "variants_from_args"]


if __name__ == "__main__":
    sys.exit(main())

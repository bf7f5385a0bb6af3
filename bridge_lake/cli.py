"""The `bridge-lake` command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bridge_lake.calibrate.rig_cli import add_commands as add_rig_commands
from bridge_lake.cli_common import (
    add_command,
    add_json,
    add_lake,
    add_recording,
    add_report,
    lake_from_args,
)
from bridge_lake.errors import BridgeLakeError
from bridge_lake.live.cli import add_commands as add_live_commands
from bridge_lake.normalize.mapping_cli import add_commands as add_mapping_commands
from bridge_lake.play.cli import add_commands as add_play_commands
from bridge_lake.query_output import FORMATS as QUERY_FORMATS
from bridge_lake.scenes.cli import add_commands as add_scene_commands


def _drive_options(args: argparse.Namespace) -> dict[str, Any]:
    """What `synth` and `demo` hand the synthesizer: how many drives, how long, seed, source."""
    return {k: getattr(args, k) for k in ("drives", "minutes", "seed", "source")}


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        choices=("nclt", "adtf", "all"),
        default="all",
        help="NCLT sessions, ADTF recordings, or alternating (all)",
    )


def _cmd_synth(args: argparse.Namespace) -> int:
    """write realistic synthetic drive folders"""
    from tqdm import tqdm

    from bridge_lake.synth import synthesize

    with tqdm(total=args.drives, unit=" drives", file=sys.stderr) as bar:

        def progress(done: int, drive: str) -> None:
            bar.update(done - bar.n)
            bar.set_postfix_str(drive)

        made = synthesize(
            args.out, **_drive_options(args), light=args.light, force=args.force, progress=progress
        )
    for d in made:
        size = sum(f.stat().st_size for f in d.files)
        print(f"{d.path}\t{d.source}\t{len(d.files)} files\t{size} bytes")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """synthesize drives and run the whole pipeline in-process"""
    from bridge_lake import signal_gate

    with signal_gate.gated():  # as in ingest: before the imports start threads
        from bridge_lake.demo import run_demo

        return run_demo(args.workdir, **_drive_options(args), out=sys.stdout).exit_code


def _cmd_ingest(args: argparse.Namespace) -> int:
    """run every layer for the drive folders of a landing zone

    Register the drive folders of LANDING as partitions of the Dagster instance in
    $DAGSTER_HOME (default ./.dagster_home) and run lake_job for each, as the landing-zone
    sensor would: in this process, or with --launch as runs the instance launches;
    `dagster dev` on the same home shows the runs."""
    # Exit 0: every drive ok (or warn, or skipped as done); 1: a drive or asset failed or
    # did not run; 2: an error before anything ran; 130: stopped by SIGINT / SIGTERM.
    from bridge_lake import signal_gate

    # runs execute here: the gate goes in before the imports start threads (see its module);
    # --launch starts a code server, whose children would inherit the mask, and runs nothing
    with signal_gate.gated() if not args.launch else contextlib.nullcontext():
        from bridge_lake import settings
        from bridge_lake.defs.ingest import run_ingest

        lake = args.lake or settings.lake_root()
        result = run_ingest(
            str(args.landing),
            lake,
            args.drive,
            out=sys.stdout,
            launch=args.launch,
            wait=args.wait,
            force=args.force,
        )
        return result.exit_code


def _cmd_info(args: argparse.Namespace) -> int:
    """describe an ADTF .dat recording (like `mcap info`)"""
    # Exit 0: the file read whole; 1: it has damage (listed, like `mcap doctor`); 2: it is
    # not an ADTF recording or cannot be read at all.
    import json

    from bridge_lake.adtf_info import render_info
    from bridge_lake.formats.adtf.info import info_dict
    from bridge_lake.formats.adtf.recover import cut_short
    from bridge_lake.formats.ros.damage import recovered_name
    from bridge_lake.normalize.adtf_mapping_tools import (
        placement_rows,
        placements,
        render_placements,
    )
    from bridge_lake.normalize.mapping_cli import layered_mapping, recording

    try:
        mapping = layered_mapping(recording(args.file), args.mapping)
        d = info_dict(args.file)
        found = placements(args.file, mapping)
    except (BridgeLakeError, OSError) as exc:
        if not args.json:
            raise
        print(json.dumps({"file": str(args.file), "error": str(exc)}, indent=2))
        return 2
    d["mapping_layers"] = [{"layer": o.layer, "file": o.path} for o in mapping.layers]
    for s in d["streams"]:  # where the normalizer would put it (substreams: one entry each)
        s["mapping"] = [p.to_json() for p in found.get(s["stream_id"], [])]
    if args.json:
        print(json.dumps(d, indent=2, sort_keys=True), end="")
    else:
        print(render_info(d) + render_placements(mapping, placement_rows(d, found)), end="")
    if args.json:
        print()
    elif cut_short(args.file):  # its index and stream descriptions went with the crash
        out = recovered_name(args.file)
        print(
            f"cut short: run bridge-lake recover {args.file} {out} --catalog-from "
            "<a finished recording of the same configuration>"
        )
    return 1 if d["issues"] else 0


def _cmd_query(args: argparse.Namespace) -> int:
    """run DuckDB SQL over the lake's views (sql/views.sql)"""
    from bridge_lake import query_output as qo
    from bridge_lake.lake.query import connect
    from bridge_lake.lake.sql import query_errors, run

    con = connect(lake_from_args(args))
    rel = run(con, args.sql)
    if rel is None:  # a statement without a result (SET, CREATE VIEW ...)
        return 0
    fmt = qo.choose_format(args.format, args.out, sys.stdout.isatty())
    if fmt == "parquet" and not args.out:
        raise BridgeLakeError("--format parquet needs --out FILE")
    with query_errors(con):  # DuckDB runs the query here, where it is read
        if fmt == "parquet":
            rel.pl().write_parquet(args.out)
            return 0
        if fmt == "table":
            text = qo.render_table(
                rel,
                width=args.width or (qo.terminal_width() if not args.out else 10_000),
                max_rows=args.max_rows,
                max_cols=args.max_cols,
                max_width=args.max_width,
            )
        else:
            text = qo.machine_text(rel.pl(), fmt)
    if args.out:
        Path(args.out).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    """write a drive as ROS 1 bag, ROS 2 bag, MCAP or TUM trajectories

    Export one drive of the lake through its topic mapping
    (bridge_lake/export/mappings/<source>.yaml or --mapping)."""
    from tqdm import tqdm

    from bridge_lake.export.exporter import ExportRequest, export_drive, export_tum
    from bridge_lake.export.names import output_format

    fmt = output_format(args.out, args.format)
    lake = lake_from_args(args)
    if fmt == "tum":
        for path in export_tum(lake, args.drive, args.out, force=args.force):
            print(f"wrote {path}")
        return 0
    request = ExportRequest(
        format=fmt,
        encoding=args.encoding,
        topics=args.topics,
        start=args.start,
        end=args.end,
        compression=args.compression,
        chunk_size=args.chunk_size,
        storage=args.storage,
        mapping=args.mapping,
        time_base=args.time_base,
        force=args.force,
        skip_unsupported=args.skip_unsupported,
    )
    bars: list[tqdm] = []

    def progress(messages: int, nbytes: int, total: int) -> None:
        if not bars:  # created at the first batch: argument errors print no empty bar
            bars.append(tqdm(total=total, unit=" msgs", disable=args.quiet, desc=args.drive))
        bars[0].update(messages - bars[0].n)
        bars[0].set_postfix_str(f"{nbytes / 1e6:.0f} MB", refresh=False)

    try:
        result = export_drive(lake, args.drive, args.out, request, progress=progress)
    finally:
        for bar in bars:
            bar.close()
    print(f"{result.path}: {result.format} ({result.encoding}), {result.bytes / 1e6:.1f} MB, "
          f"{result.messages} messages in {result.seconds:.1f} s")  # fmt: skip
    for t in result.topics.values():
        print(f"  {t.topic:40} {t.type:34} {t.messages:9d}  frame {t.frame_id}")
    for warning in result.warnings:
        print(f"WARN {warning}", file=sys.stderr)
    for topic in result.left_out:
        print(f"left out (--skip-unsupported): {topic}, {result.left_out_rows[topic]} rows")
    return 0


def _cmd_health(args: argparse.Namespace) -> int:
    """check any bag or MCAP with independent readers (like mcap doctor + rosbag info)"""
    import json

    from bridge_lake.export.health import check_file, render_html, render_table

    health = check_file(args.file)
    if args.html:
        Path(args.html).write_text(render_html(health), encoding="utf-8")
    print(json.dumps(health.to_json(), indent=2) if args.json else render_table(health))
    return 0 if health.ok else 1


def _cmd_recover(args: argparse.Namespace) -> int:
    """rewrite a recording cut short (MCAP, ROS 1 bag, ROS 2 bag, ADTF .dat) as a valid indexed
    file (like `mcap recover` / `rosbag reindex`)

    Keeps every complete message (and the whole records of a cut compressed chunk),
    rebuilds index and summary, reports kept/dropped per topic or stream. Exit 0: the input
    was intact; 1: it was damaged and what could be kept was written; 2: nothing could be
    written."""
    import json

    from bridge_lake.recover import recover

    result = recover(args.input, args.output, catalog_from=args.catalog_from, force=args.force)
    print(json.dumps(result.to_json(), indent=2) if args.json else result.render())
    return 1 if result.damaged else 0


def _cmd_waypoints(args: argparse.Namespace) -> int:
    """write an Autoware 1.x waypoint CSV from a lake drive or any bag / MCAP

    Autoware 1.x waypoints (waypoint_saver's CSV: x,y,z [m], yaw [rad], velocity [km/h],
    change_flag) from a drive's calibrated poses or a pose topic of a ROS 1 bag, ROS 2 bag or
    MCAP file; the plot is written beside the CSV (.svg)."""
    from bridge_lake.waypoints import (
        KMH_PER_MPS,
        WaypointParams,
        build_waypoints,
        file_waypoints,
        poses_from_bag,
        poses_from_lake,
        render_checklist,
    )

    given = {
        "spacing_m": args.spacing_m,
        "smooth_window_m": args.smooth_window_m,
        "stop_speed_mps": args.stop_speed_mps,
        "min_stop_s": args.min_stop_s,
        "lateral_accel_mps2": args.lateral_accel,
        "accel_mps2": args.accel,
        "decel_mps2": args.decel,
        "v_max_mps": None if args.v_max_kmh is None else args.v_max_kmh / KMH_PER_MPS,
        "stop_lead_m": args.stop_lead_m,
    }
    params = WaypointParams(**{k: v for k, v in given.items() if v is not None})
    if args.bag is not None:
        if not args.pose_topic:
            raise BridgeLakeError("--bag needs --pose-topic")
        track = poses_from_bag(
            args.bag,
            args.pose_topic,
            velocity_topic=args.velocity_topic,
            parent_frame=args.parent_frame,
            child_frame=args.child_frame,
        )
    else:
        track = poses_from_lake(lake_from_args(args), args.drive)
    made = file_waypoints(build_waypoints(track, params), args.out)
    wp = made.waypoints
    print(
        f"{made.csv}: {len(wp)} waypoints over {wp.length_m:.1f} m ({wp.spacing_m:.3f} m apart), "
        f"{len(wp.stops)} stop(s), velocity up to {wp.velocity_mps.max() * KMH_PER_MPS:.1f} km/h; "
        f"from {wp.source}\n{made.svg}: plot\nchecklist:\n{render_checklist(made.findings)}"
    )
    return 0 if made.passed else 1


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bridge-lake")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bridge-lake", description="Data lake for autonomous-driving recordings."
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, help="the command")

    p = add_command(sub, "synth", _cmd_synth)
    p.add_argument("--out", type=Path, required=True, help="landing-zone folder to write into")
    p.add_argument("--drives", type=int, default=1, help="how many drive folders")
    p.add_argument("--minutes", type=float, default=1.0, help="length of each drive")
    p.add_argument("--seed", type=int, default=0, help="random seed: same seed, same bytes")
    _add_source(p)
    p.add_argument("--light", action="store_true", help="thin lidar (demos, quick tests)")
    p.add_argument(
        "--force", action="store_true", help="replace drive folders that already hold files"
    )

    p = add_command(sub, "demo", _cmd_demo)
    p.add_argument("--workdir", type=Path, default=Path("demo"), help="where landing/ and lake/ go")
    p.add_argument("--drives", type=int, default=2, help="how many drives")
    p.add_argument(
        "--minutes",
        type=float,
        default=1.5,
        help="drive length (1.5 min: long enough for the planted scene events)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed of the drives")
    _add_source(p)

    p = add_command(sub, "ingest", _cmd_ingest)
    p.add_argument("landing", help="landing zone: a local folder or s3://bucket/prefix")
    p.add_argument("--drive", nargs="+", help="only these drive ids (default: every drive)")
    add_lake(p)
    p.add_argument(
        "--launch",
        action="store_true",
        help="submit the drives as runs to the instance's run coordinator (its queue, worked "
        "off by the daemon of `dagster dev`) instead of running them in this process",
    )
    p.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="with --launch: print the run ids and return without waiting for the runs",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="run every drive, also those an earlier run did with the same inputs and code",
    )

    p = add_command(sub, "info", _cmd_info)
    add_recording(p)
    add_json(p)
    p.add_argument(
        "--mapping",
        type=Path,
        help="user ADTF mapping YAML for the 'mapped where' column "
        "(default: $BRIDGE_LAKE_ADTF_MAPPING, if set)",
    )

    p = add_command(sub, "query", _cmd_query)
    p.add_argument("sql", help='e.g. "select * from sensor_rates"')
    add_lake(p)
    p.add_argument(
        "--format",
        choices=QUERY_FORMATS,
        default="auto",
        help="auto (default): a table on a terminal, CSV when stdout is a pipe or file, or by "
        "the suffix of --out; table; csv / tsv / json (binary as hex, nested as JSON); "
        "parquet (needs --out)",
    )
    p.add_argument("--out", help="write the result to this file instead of stdout")
    p.add_argument(
        "--max-rows", type=int, default=40, help="rows shown by --format table (top and bottom)"
    )
    p.add_argument(
        "--max-cols",
        type=int,
        help="show at most the first N columns in a table (default: as many as fit the width)",
    )
    p.add_argument("--max-width", type=int, default=40, help="characters per cell in a table")
    p.add_argument("--width", type=int, help="table width in characters (default: the terminal's)")

    p = add_command(sub, "export", _cmd_export)
    add_lake(p)
    p.add_argument("--drive", required=True, help="drive id (a partition of the lake)")
    p.add_argument(
        "--format",
        choices=("mcap", "bag2", "bag1", "tum"),
        help="mcap (Foxglove), bag2 (ros2 bag play), bag1 (rosbag play) or tum (trajectories); "
        "default: what --out's suffix names (.bag: bag1, .mcap: mcap), else mcap",
    )
    p.add_argument(
        "--encoding",
        choices=("ros2", "ros1", "protobuf"),
        help="message encoding of an MCAP: ros2 (default), ros1, or protobuf (Foxglove "
        "schemas); bag1 is ros1, bag2 ros2",
    )
    p.add_argument("--out", type=Path, required=True, help="output file (bag2, tum: a folder)")
    p.add_argument("--topics", nargs="+", help="topics to keep (globs, e.g. '/sensor/*')")
    p.add_argument("--start", help="window start: seconds from the drive's start, or epoch ns")
    p.add_argument("--end", help="window end (exclusive): seconds from the start, or epoch ns")
    p.add_argument("--compression", help="mcap: zstd|lz4|none; bag2: zstd|none; bag1: lz4|bz2|none")
    p.add_argument("--chunk-size", type=int, default=4 << 20, help="bytes per chunk")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="bag2 storage")
    p.add_argument("--mapping", type=Path, help="topic mapping YAML instead of the default")
    p.add_argument(
        "--time-base",
        choices=("master", "zero"),
        default="master",
        help="master: times as recorded; zero: shift the whole export to start at 0",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    p.add_argument(
        "--skip-unsupported",
        action="store_true",
        help="write without the topics the format cannot carry (listed) instead of failing",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = add_command(sub, "health", _cmd_health)
    p.add_argument("file", type=Path, help="MCAP file, ROS 1 .bag, or ROS 2 bag folder")
    add_report(p)

    p = add_command(sub, "recover", _cmd_recover)
    p.add_argument("input", type=Path, help="the damaged file (a ROS 2 bag: its folder)")
    p.add_argument("output", type=Path, help="the recovered copy (never the input)")
    p.add_argument(
        "--catalog-from",
        type=Path,
        help="ADTF: a finished recording of the same configuration (same stream ids) whose "
        "stream names and types the copy takes",
    )
    add_json(p, "machine-readable report")
    p.add_argument("--force", action="store_true", help="replace an existing output")

    p = add_command(sub, "waypoints", _cmd_waypoints)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--drive", help="drive id (a partition of the lake)")
    source.add_argument("--bag", type=Path, help="ROS 1 .bag, ROS 2 bag folder or .mcap file")
    add_lake(p)
    p.add_argument(
        "--pose-topic", help="PoseStamped, PoseWithCovarianceStamped, Odometry or TF topic"
    )
    p.add_argument("--velocity-topic", help="TwistStamped or Odometry topic for the speed")
    p.add_argument("--parent-frame", default="map", help="TF pose topics: the map frame")
    p.add_argument("--child-frame", default="base_link", help="TF pose topics: the body frame")
    p.add_argument("--out", type=Path, required=True, help="output CSV (plot: same name .svg)")
    for flag, default in (
        ("--spacing-m", "1: waypoint spacing along the path"),
        ("--smooth-window-m", "5: smoothing window along the path; 0: none"),
        ("--stop-speed-mps", "0.3: standing at or below this speed"),
        ("--min-stop-s", "2: a standstill this long inside the drive is a stop"),
        ("--lateral-accel", "2 m/s²: curvature speed limit sqrt(a / |curvature|)"),
        ("--accel", "1 m/s²: forward acceleration limit"),
        ("--decel", "1 m/s²: deceleration limit"),
        ("--v-max-kmh", "60: speed cap"),
        ("--stop-lead-m", "5: change_flag 1 this far before stops and the end"),
    ):
        p.add_argument(flag, type=float, help=f"default {default}")

    add_mapping_commands(sub)
    add_rig_commands(sub)
    add_scene_commands(sub)
    add_play_commands(sub)
    add_live_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (BridgeLakeError, OSError) as exc:
        if isinstance(exc, BrokenPipeError):  # `bridge-lake info f.dat | head`
            sys.stderr.close()
            return 0
        print(f"bridge-lake: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bridge-lake: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line for the user, the trace on request
        if os.environ.get("BRIDGE_LAKE_DEBUG"):
            raise
        print(
            f"bridge-lake: internal error: {type(exc).__name__}: {exc} "
            "(set BRIDGE_LAKE_DEBUG=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())

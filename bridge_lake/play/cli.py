"""`bridge-lake play`: arguments, the source they name, the summary at the end."""

from __future__ import annotations

import argparse
from pathlib import Path

from bridge_lake.cli_common import add_command, add_lake
from bridge_lake.errors import BridgeLakeError
from bridge_lake.play.ros1_clock import DEFAULT_HZ


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "play", run)
    p.add_argument(
        "source",
        nargs="?",
        type=Path,
        help="MCAP file, ROS 1 .bag, ROS 2 bag folder, or a scene manifest (.json)",
    )
    p.add_argument("--drive", help="play a lake drive through its export topic mapping")
    add_lake(p, "lake root for --drive (default: $BRIDGE_LAKE_ROOT)")
    p.add_argument("--variant", help="scene manifest: play this fault-injected variant")
    p.add_argument("--topics", nargs="+", default=[], help="topic globs to play")
    p.add_argument("--start", help="start: seconds from the source's start, or epoch ns")
    p.add_argument("--end", help="end: seconds from the source's start, or epoch ns")
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--rate", type=float, default=1.0, help="playback speed (default 1)")
    speed.add_argument("--max-speed", action="store_true", help="as fast as the client takes")
    p.add_argument("--loop", action="store_true", help="start over at the end")
    p.add_argument("--paused", action="store_true", help="start paused (play from the app)")
    p.add_argument(
        "--wait-for-client",
        action="store_true",
        help="start about 1 s after the first client subscribes",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        help="inject while playing, e.g. camera:drop=0.5%% (scenes' fault grammar)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the fault choices")
    p.add_argument(
        "--realtime",
        action="store_true",
        help="pace on SCHED_FIFO priority (root or CAP_SYS_NICE): holds the timing on a "
        "loaded machine",
    )
    p.add_argument(
        "--ros1",
        action="store_true",
        help="publish into the ROS 1 master at $ROS_MASTER_URI (as rosbag play) instead of "
        "serving Foxglove; space pauses and resumes",
    )
    p.add_argument("--clock", action="store_true", help="--ros1: publish /clock (sim time)")
    p.add_argument(
        "--hz", type=float, default=DEFAULT_HZ, help="--clock: ticks per second of log time"
    )
    p.add_argument("--report", type=Path, help="write the measured figures as JSON")


def run(args: argparse.Namespace) -> int:
    """serve a bag, MCAP, scene or lake drive over Foxglove WebSocket, or into ROS 1

    Play a recording in real time (or --rate R, --max-speed) to the Foxglove app and any
    Foxglove WebSocket client (open ws://HOST:PORT in Foxglove: Open connection > Foxglove
    WebSocket), or with --ros1 into the ROS 1 graph of $ROS_MASTER_URI, as rosbag play does.
    Every message's send error is measured; the summary table ends every run."""
    from bridge_lake.export.trim import parse_time
    from bridge_lake.play.player import PlayError, PlayOptions, play
    from bridge_lake.play.report import PlayReport
    from bridge_lake.play.sources import DriveSource, open_source
    from bridge_lake.scenes.faults import specs_from_text

    if (args.source is None) == (args.drive is None):
        raise PlayError("give a SOURCE file or --drive ID (one of them)")
    if not args.max_speed and not args.rate > 0:
        raise PlayError(f"--rate must be > 0, not {args.rate:g}")
    faults = specs_from_text(args.fault)
    if args.drive is not None:
        from bridge_lake.cli_common import lake_from_args

        encoding = "ros1" if args.ros1 else "ros2"  # ROS 1 bytes as the bag1 export's
        source = DriveSource(lake_from_args(args), args.drive, encoding=encoding)
        name = f"drive {args.drive}"
    else:
        source = open_source(args.source, variant=args.variant)
        name = str(source.path)
    report = PlayReport(name, None if args.max_speed else args.rate)
    try:
        options = PlayOptions(
            topics=list(args.topics),
            start_ns=None if args.start is None else parse_time(args.start, source.start_ns),
            end_ns=None if args.end is None else parse_time(args.end, source.start_ns),
            rate=args.rate,
            max_speed=args.max_speed,
            loop=args.loop,
            paused=args.paused,
            wait_for_client=args.wait_for_client,
            host=args.host,
            port=args.port,
            faults=faults,
            seed=args.seed,
            realtime=args.realtime,
            ros1=args.ros1,
            clock_hz=args.hz if args.clock else None,
        )
        try:
            play(source, options, report)
        except BridgeLakeError as exc:
            report.outcome, report.error = "error", str(exc)
            report.finished()
            raise
        finally:  # an error before anything was sent is the CLI's one line, no table
            if report.sent() or (report.wall_s and report.outcome != "error"):
                print(report.table(), flush=True)
            if args.report is not None and (report.wall_s or report.error):
                report.write(args.report)
    finally:
        source.close()
    return 130 if report.outcome == "interrupted" else 0

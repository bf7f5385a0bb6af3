"""`bridge-lake live` and `bridge-lake live-check` (see `live.bridge`, `live.check`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

from bridge_lake.cli_common import add_command


def _cmd_live(args: argparse.Namespace) -> int:
    """follow an ADTF recording while it is written; serve it over Foxglove WebSocket

    Follow PATH (a .dat being written, or a drive folder whose recorder writes parts) and
    publish every sample through the export's topic mapping, over a Foxglove WebSocket server
    and into --out (an MCAP flushed per poll). Ends when the file is closed, has not grown for
    --idle-s, or the last part of a folder ended."""
    from bridge_lake.export.mapping import default_mapping_path, load_mapping
    from bridge_lake.formats.adtf.follow import load_catalog
    from bridge_lake.live.bridge import POLL_S, LiveBridge, LiveConfig
    from bridge_lake.live.outputs import LiveServer
    from bridge_lake.live.ros1_output import LiveRos1
    from bridge_lake.normalize.adtf_mapping import resolve_mapping

    path = Path(args.path)
    drive_dir = path if path.is_dir() else path.parent
    config = LiveConfig(
        path=path,
        stream_mapping=resolve_mapping(drive_dir if (drive_dir / "drive.yaml").is_file() else None),
        topic_mapping=load_mapping(args.mapping or default_mapping_path("adtf")),
        catalog=load_catalog(args.catalog_from) if args.catalog_from else None,
        idle_s=args.idle_s,
        appear_s=args.appear_s,
        poll_s=POLL_S,
    )
    if args.out is not None and args.out.exists() and not args.force:
        print(f"bridge-lake: error: {args.out} exists; pass --force", file=sys.stderr)
        return 2
    server: LiveServer | LiveRos1
    if args.ros1:
        server = LiveRos1()
        serving = f"publishing into ROS 1 at {server.url}"
    else:
        server = LiveServer(args.host, args.port)
        serving = "serving {} (Foxglove: open connection, Foxglove WebSocket)"
    bridge = LiveBridge(config, server=server, mcap=args.out)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, bridge.stop)
        task = asyncio.ensure_future(bridge.run())
        while not server.listening and not task.done():
            await asyncio.sleep(0.01)
        if not task.done():
            print(serving.format(server.url), flush=True)
        await task

    asyncio.run(main())
    summary = bridge.summary
    print(summary.render(), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(summary.to_json(), indent=2, default=str))
    return 1 if summary.lost else 0


def _cmd_live_check(args: argparse.Namespace) -> int:
    """compare a live MCAP's messages per topic with the drive's offline export"""
    from bridge_lake.live.check import compare_counts

    check = compare_counts(args.live, args.offline)
    print(check.render())
    return 0 if check.ok else 1


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "live", _cmd_live)
    p.add_argument("path", help="the recording being written, or the drive folder")
    p.add_argument(
        "--catalog-from",
        type=Path,
        help="a finished recording of the same configuration (same stream ids): stream names "
        "and ADTF 2 types before the file is closed",
    )
    p.add_argument("--mapping", type=Path, help="export topic mapping (default: the ADTF one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default local)")
    p.add_argument("--port", type=int, default=8765, help="0: any free port")
    p.add_argument(
        "--ros1",
        action="store_true",
        help="publish into the ROS 1 master at $ROS_MASTER_URI instead of serving Foxglove",
    )
    p.add_argument("--out", type=Path, help="live MCAP to append to")
    p.add_argument("--force", action="store_true", help="overwrite --out")
    p.add_argument("--idle-s", type=float, default=10.0, help="end after no growth for S s")
    p.add_argument(
        "--appear-s", type=float, default=30.0, help="wait at most S s for PATH to appear"
    )
    p.add_argument("--json", type=Path, help="write the summary as JSON")

    p = add_command(sub, "live-check", _cmd_live_check)
    p.add_argument("live", type=Path, help="the MCAP `bridge-lake live --out` wrote")
    p.add_argument("offline", type=Path, help="the drive's offline export (MCAP)")


__all__ = ["add_commands"]

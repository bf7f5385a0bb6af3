"""The `bridge-lake` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bridge_lake.errors import BridgeLakeError


def _cmd_synth(args: argparse.Namespace) -> int:
    from bridge_lake.synth import synthesize

    made = synthesize(
        args.out,
        drives=args.drives,
        minutes=args.minutes,
        seed=args.seed,
        source=args.source,
        light=args.light,
    )
    for d in made:
        size = sum(f.stat().st_size for f in d.files)
        print(f"{d.path}\t{d.source}\t{len(d.files)} files\t{size} bytes")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from bridge_lake.demo import run_demo

    outcomes = run_demo(
        args.workdir,
        drives=args.drives,
        minutes=args.minutes,
        seed=args.seed,
        source=args.source,
        out=sys.stdout,
    )
    return 1 if any(o.checks_failed for o in outcomes) or not outcomes else 0


def _cmd_info(args: argparse.Namespace) -> int:
    import json

    from bridge_lake.formats.adtf.info import info_dict, render_info

    d = info_dict(args.file)
    print(json.dumps(d, indent=2, sort_keys=True) if args.json else render_info(d))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bridge-lake", description="Data lake for autonomous-driving recordings."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("synth", help="write realistic synthetic drive folders")
    p.add_argument("--out", type=Path, required=True, help="landing-zone folder to write into")
    p.add_argument("--drives", type=int, default=1)
    p.add_argument("--minutes", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", choices=("nclt", "adtf", "all"), default="all")
    p.add_argument("--light", action="store_true", help="thin lidar (demos, quick tests)")
    p.set_defaults(func=_cmd_synth)

    p = sub.add_parser("demo", help="synthesize drives and run the whole pipeline in-process")
    p.add_argument("--workdir", type=Path, default=Path("demo"))
    p.add_argument("--drives", type=int, default=2)
    p.add_argument("--minutes", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", choices=("nclt", "adtf", "all"), default="all")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("info", help="describe an ADTF .dat recording (like `mcap info`)")
    p.add_argument("file", type=Path)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_info)
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


if __name__ == "__main__":
    sys.exit(main())

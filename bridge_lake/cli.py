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
    ok = outcomes and all(o.run_ok and not o.checks_failed for o in outcomes)
    return 0 if ok else 1


def _cmd_info(args: argparse.Namespace) -> int:
    import json

    from bridge_lake.formats.adtf.info import info_dict, render_info

    d = info_dict(args.file)
    print(json.dumps(d, indent=2, sort_keys=True) if args.json else render_info(d))
    return 0


QUERY_FORMATS = ("table", "csv", "json", "parquet")


def _cmd_query(args: argparse.Namespace) -> int:
    import polars as pl

    from bridge_lake import settings
    from bridge_lake.lake import Lake
    from bridge_lake.lake.query import connect

    root = args.lake or settings.lake_root()
    con = connect(Lake(root, settings.storage_options(root)))
    try:
        frame = con.sql(args.sql).pl()
    except Exception as exc:  # DuckDB's parser/binder/IO errors: report, don't trace
        print(f"bridge-lake: query failed: {exc}", file=sys.stderr)
        return 2
    if args.format == "parquet":
        if not args.out:
            print("bridge-lake: --format parquet needs --out FILE", file=sys.stderr)
            return 2
        frame.write_parquet(args.out)
    elif args.format in ("csv", "json"):
        text = frame.write_csv() if args.format == "csv" else frame.write_json()
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        with pl.Config(
            tbl_rows=args.max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_hide_dataframe_shape=False
        ):
            print(frame)
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

    p = sub.add_parser("query", help="run DuckDB SQL over the lake's views (sql/views.sql)")
    p.add_argument("sql", help='e.g. "select * from sensor_rates"')
    p.add_argument("--lake", help="lake root (default: $BRIDGE_LAKE_ROOT or ./demo/lake)")
    p.add_argument("--format", choices=QUERY_FORMATS, default="table")
    p.add_argument("--out", help="write the result to this file instead of stdout")
    p.add_argument("--max-rows", type=int, default=40, help="rows shown by --format table")
    p.set_defaults(func=_cmd_query)
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

"""What the command-line modules share: how a command is declared, the lake it names,
plain-text tables.

`bridge_lake.cli`, `scenes/cli.py` and the terminal renderings of `normalize` and
`formats/adtf` import this; it imports none of them (the import graph stays one-way).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from bridge_lake.errors import BridgeLakeError

LAKE_HELP = "lake root (default: $BRIDGE_LAKE_ROOT or ./demo/lake)"
JSON_HELP = "machine-readable output"

Handler = Callable[[argparse.Namespace], int]
"""What a command runs: its parsed arguments in, its exit code out (`bridge-lake` main)."""


def _parser(sub: argparse._SubParsersAction, name: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of command `name`, described by `doc`: its first paragraph is the command's
    line in the list of commands, the paragraphs after it (if any) the command's own `--help`
    description. argparse reflows both (no formatter_class), so line breaks do not show."""
    help, _, description = inspect.cleandoc(doc or "").partition("\n\n")
    return sub.add_parser(name, help=help or None, description=description or None)


def add_command(
    sub: argparse._SubParsersAction, name: str, func: Handler
) -> argparse.ArgumentParser:
    """Command `name` running `func`, described by `func`'s docstring (see `_parser`): the
    handler's docstring is the one place that says what a command does, beside the code doing
    it. Returns the command's parser, for its arguments."""
    doc = inspect.getdoc(func)
    if not doc and sys.flags.optimize < 2:  # python -OO strips docstrings: no help, still runs
        raise TypeError(f"{func.__qualname__}: a command's handler needs a docstring (its help)")
    p = _parser(sub, name, doc)
    p.set_defaults(func=func)
    return p


def add_group(
    sub: argparse._SubParsersAction, name: str, doc: str, commands_help: str
) -> argparse._SubParsersAction:
    """Command group `name` (`bridge-lake NAME SUBCOMMAND`), which runs nothing itself: `doc`
    describes it like a handler's docstring, `commands_help` is the line over its subcommands.
    A subcommand is required; its name lands in `args.<name>_command`. Returns the group's
    subparsers, for `add_command`."""
    return _parser(sub, name, doc).add_subparsers(
        dest=f"{name}_command", required=True, help=commands_help
    )


def add_lake(p: argparse.ArgumentParser, help: str = LAKE_HELP) -> None:
    """`--lake`, read by `lake_from_args`."""
    p.add_argument("--lake", help=help)


def add_json(p: argparse.ArgumentParser, help: str = JSON_HELP) -> None:
    """`--json`: the command prints JSON instead of its table."""
    p.add_argument("--json", action="store_true", help=help)


def add_recording(p: argparse.ArgumentParser) -> None:
    """`file`: the ADTF recording a command reads (`info`, `mapping suggest`, `mapping check`)."""
    p.add_argument("file", type=Path, help="an ADTF 2/3 .dat recording")


def add_report(p: argparse.ArgumentParser) -> None:
    """`--json` and `--html FILE`: a check's report as JSON instead of its table, and also
    as an HTML page with a timeline."""
    add_json(p)
    p.add_argument("--html", type=Path, help="also write an HTML report with a timeline")


def add_out(p: argparse.ArgumentParser, what: str) -> None:
    """`--out FILE` (else stdout) and `--force`, read by `write_out`."""
    p.add_argument("--out", type=Path, help=f"write {what} here (default: stdout)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


def write_out(args: argparse.Namespace, text: str) -> bool:
    """`text` to `--out` (an existing file only with `--force`; its folder made if missing,
    as `--out rigs/my-car.yaml` in a fresh clone asks), else to stdout; True when it went to
    a file (the command then says what it wrote)."""
    if args.out is None:
        sys.stdout.write(text)
        return False
    if args.out.exists() and not args.force:
        raise BridgeLakeError(f"{args.out}: exists (give --force to replace it)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return True


def lake_from_args(args: argparse.Namespace):
    """The lake of `--lake` (else `$BRIDGE_LAKE_ROOT`, else the default); a local root that
    is not a folder is an error naming both ways to give one."""
    from bridge_lake import settings
    from bridge_lake.lake import Lake

    root = args.lake or settings.lake_root()
    lake = Lake(root, settings.storage_options(root))
    if lake.is_local and not Path(lake.base).is_dir():
        raise BridgeLakeError(f"no lake at {root} (give --lake or set BRIDGE_LAKE_ROOT)")
    return lake


def table_lines(
    rows: Sequence[Sequence[str]],
    *,
    indent: str = "",
    rule: bool = False,
    right: Collection[int] = (),
) -> list[str]:
    """`rows` (the first one the header) as lines of columns two spaces apart, each column as
    wide as its widest cell, trailing blanks cut. A row may be shorter than the header (its
    cells fill the first columns). `right`: indices of the columns aligned right; `rule`: a
    line of dashes under the header."""
    widths = [max(len(r[i]) for r in rows if len(r) > i) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    if rule:
        lines.insert(1, indent + "  ".join("-" * w for w in widths))
    return lines

"""`bridge-lake mapping suggest|check`: write a mapping for a recording, try one on it.

`add_commands(subparsers)` adds `mapping` to the `bridge-lake` parser; the work is imported
when a command runs. The layers a command uses are the ones a drive gets
(`adtf_mapping.resolve_mapping`): the `mapping:` file of a `drive.yaml` beside the recording,
the user file (`--mapping`, else `$BRIDGE_LAKE_ADTF_MAPPING`), the shipped default. Exit
codes: 0 fine, 1 a rule matches a stream it cannot decode (`check`), 2 an error (printed in
one line by `bridge-lake`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bridge_lake.cli_common import (
    add_command,
    add_group,
    add_json,
    add_out,
    add_recording,
    write_out,
)
from bridge_lake.errors import BridgeLakeError

MAPPING_DOC = """write or try an ADTF stream mapping for a recording

ADTF streams become rows of the sensor tables through mapping rules
(bridge_lake/normalize/adtf_mapping.yaml explains them). Layers match in the order: the drive's own
file (drive.yaml `mapping:` beside the recording), the user's (--mapping or
$BRIDGE_LAKE_ADTF_MAPPING), the shipped default."""


def recording(path: Path) -> Path:
    """`path` if it starts like an ADTF recording, else a one-line error naming it."""
    from bridge_lake.formats.adtf.ifhd import MAGIC

    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
    if head != MAGIC:
        raise BridgeLakeError(f"{path}: not an ADTF recording (it does not start with {MAGIC!r})")
    return path


def layered_mapping(file: Path, user: Path | None, *, default: bool = True):
    """The mapping layers for a recording: a drive.yaml beside it, `user` (else the
    environment's), the shipped default."""
    from bridge_lake.normalize.adtf_mapping import resolve_mapping

    folder = Path(file).resolve().parent
    return resolve_mapping(folder, user=user, default=default)


def _cmd_suggest(args: argparse.Namespace) -> int:
    """a mapping skeleton for every stream of a recording

    One rule per DDL struct of the recording, its elements listed with types and units;
    rules whose table the element names make obvious (lat/lon/alt → gnss, acc/gyro → imu, CAN
    id/data/dlc/channel → can_frames, point arrays → lidar_scans) are live, the others commented
    out with the generic table their streams land in without a rule."""
    from bridge_lake.normalize.adtf_mapping import parse_mapping
    from bridge_lake.normalize.adtf_mapping_tools import suggest_mapping

    text = suggest_mapping(recording(args.file))
    if not write_out(args, text):
        return 0
    rules = parse_mapping(text, path=str(args.out)).rules
    print(
        f"wrote {args.out}: {len(rules)} rule(s) ready, the other streams commented; "
        f"try it: bridge-lake mapping check {args.file} --mapping {args.out}"
    )
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    """what a mapping does with a recording (nothing is written to a lake)

    Normalizes the recording into a temporary lake and shows per stream the rule and layer
    that took it, the table, rows written and quarantined, and why. Exit 1 when a rule matches
    a stream it cannot decode (the stream then lands in its generic table)."""
    from bridge_lake.normalize.adtf_mapping_tools import check_recording, render_check

    mapping = layered_mapping(recording(args.file), args.mapping, default=not args.no_default)
    rows = check_recording(args.file, mapping)
    problems = [r for r in rows if r["problem"]]
    if args.json:
        layers = [{"layer": o.layer, "file": o.path} for o in mapping.layers]
        doc = {"file": str(args.file), "layers": layers, "streams": rows, "ok": not problems}
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_check(args.file, mapping, rows))
        for r in problems:
            print(f"problem: {r['stream']}: {r['problem']}")
    return 1 if problems else 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    mapping = add_group(sub, "mapping", MAPPING_DOC, "the mapping command")

    s = add_command(mapping, "suggest", _cmd_suggest)
    add_recording(s)
    add_out(s, "the mapping YAML")

    c = add_command(mapping, "check", _cmd_check)
    add_recording(c)
    c.add_argument(
        "--mapping",
        type=Path,
        help="the user mapping YAML to try (default: $BRIDGE_LAKE_ADTF_MAPPING, if set)",
    )
    c.add_argument(
        "--no-default", action="store_true", help="leave the shipped default mapping out"
    )
    add_json(c)


__all__ = ["add_commands", "layered_mapping", "recording"]

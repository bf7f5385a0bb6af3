"""The ingest and demo summary on the terminal, and the full log of the runs in a file.

The summary is one block per drive: its status and run, then every asset with its status,
rows and checks, and under an asset one line per failed or warning check (or step error)
with its reason. It ends with counts that add up to what is listed. Stack traces never reach
the terminal: they are in the instance's event log and in the log file written here, whose
path the summary names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import dagster as dg

from bridge_lake.cli_common import table_lines
from bridge_lake.defs.outcomes import (
    CANCELED,
    FAILED,
    NOT_RUN,
    OK,
    SKIPPED,
    UP_TO_DATE,
    WARN,
    AssetStatus,
    DriveOutcome,
)

DRIVE_ORDER = (OK, WARN, FAILED, CANCELED, SKIPPED, NOT_RUN)
ASSET_ORDER = (OK, WARN, FAILED, NOT_RUN, UP_TO_DATE)


def _checks(a: AssetStatus) -> str:
    total = a.checks_passed + a.checks_failed + a.checks_warned + a.checks_missing
    if total == 0:
        return "no checks"
    parts = [f"{a.checks_passed} passed"]
    if a.checks_failed:
        parts.append(f"{a.checks_failed} failed")
    if a.checks_warned:
        parts.append(_plural(a.checks_warned, "warning"))
    if a.checks_missing:
        parts.append(f"{a.checks_missing} not recorded")
    return ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _asset_rows(a: AssetStatus) -> list[list[str]]:
    if a.status == NOT_RUN:
        return [[a.asset, f"not run: {a.reason}"]]
    if a.status == UP_TO_DATE:
        return [[a.asset, UP_TO_DATE, "", "not run: unchanged"]]
    rows = "" if a.rows is None else f"{a.rows} rows"
    return [[a.asset, a.status, rows, _checks(a)]]


def _counts(statuses: Sequence[str], order: Sequence[str]) -> str:
    return ", ".join(f"{statuses.count(s)} {s}" for s in order if statuses.count(s))


def print_summary(
    outcomes: Sequence[DriveOutcome], out: TextIO, *, home: Path, log: Path | None
) -> None:
    """Every drive and asset with its status and reasons, then the true counts."""
    print(f"\nSummary (the run and check records of the Dagster instance in {home})", file=out)
    for d in outcomes:
        head = f"\n{d.drive_id}: {d.status}"
        if d.run_id:
            head += f"  (run {d.run_id[:8]}, {d.seconds:.1f} s)"
        print(head, file=out)
        if d.reason:
            print(f"  {d.reason}", file=out)
        if not d.assets:
            continue
        for a in d.assets:
            (line,) = table_lines([_padded(r) for r in _asset_rows(a)], indent="  ")
            print(line, file=out)
            for p in a.problems:
                print(f"      {p}", file=out)
    assets = [a.status for d in outcomes for a in d.assets]
    passed = sum(a.checks_passed for d in outcomes for a in d.assets)
    failed = sum(a.checks_failed for d in outcomes for a in d.assets)
    warned = sum(a.checks_warned for d in outcomes for a in d.assets)
    missing = sum(a.checks_missing for d in outcomes for a in d.assets)
    lost = f", {missing} not recorded" if missing else ""
    print(
        f"\n{len(outcomes)} drives: {_counts([d.status for d in outcomes], DRIVE_ORDER)}. "
        f"{len(assets)} assets: {_counts(assets, ASSET_ORDER) or 'none run'}. "
        f"Checks: {passed} passed, {failed} failed, {_plural(warned, 'warning')}{lost}.",
        file=out,
    )
    if log is not None:
        print(f"Full log of these runs (every event, with stack traces): {log}", file=out)


WIDTHS = (26, 8, 12)
"""Asset, status and rows columns: fixed, so every drive's block lines up."""


def _padded(row: list[str]) -> list[str]:
    if len(row) == 2:  # not run: the reason takes the rest of the line
        return [row[0].ljust(WIDTHS[0]), row[1]]
    return [c.ljust(w) for c, w in zip(row, WIDTHS, strict=False)] + row[len(WIDTHS) :]


def write_log(instance: dg.DagsterInstance, runs: Sequence[tuple[str, str]], path: Path) -> Path:
    """Every event the runs `(drive, run id)` recorded, errors with their stack traces, as
    text: what Dagster would have printed, kept off the terminal."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for drive_id, run_id in runs:
            f.write(f"=== drive {drive_id}, run {run_id}\n")
            for entry in instance.all_logs(run_id):
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(entry.timestamp))
                event = entry.dagster_event
                kind = event.event_type_value if event is not None else "LOG"
                step = entry.step_key or "-"
                level = logging.getLevelName(entry.level)
                message = (event.message if event is not None else None) or entry.user_message
                f.write(f"{stamp}Z {level} {step} {kind}: {message}\n")
                error = getattr(getattr(event, "event_specific_data", None), "error", None)
                if error is not None:
                    f.write("    " + error.to_string().replace("\n", "\n    ").rstrip() + "\n")
    return path

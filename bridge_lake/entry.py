"""The `bridge-lake` command's entry point: a stop signal is an orderly exit from the start.

Loading the command takes seconds (Dagster, polars, scipy, pyarrow). With Python's default
handler a Ctrl-C in that time raised KeyboardInterrupt inside some import and its traceback
reached the terminal; a process started in the background of a script inherits SIGINT
*ignored*, so a stop request in its first seconds was lost and the ingest ran to its end
(issue 33, fault 5). So before anything is imported, SIGINT and SIGTERM raise
KeyboardInterrupt (an inherited "ignore" included: the command is meant to be stoppable),
which ends the command with "bridge-lake: interrupted" and exit 130; commands that handle
stop signals themselves (`ingest`: bridge_lake.defs.interrupts, `play`, `live`) install
their own handlers once loaded. After the command returned, a late signal exits at once
instead of raising inside the interpreter's shutdown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPTED = 130


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _exit_now(signum: int, frame: object) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    for s in STOP_SIGNALS:
        signal.signal(s, _interrupt)
    try:
        from bridge_lake.cli import main as cli_main

        return cli_main(argv)
    except KeyboardInterrupt:
        print("bridge-lake: interrupted", file=sys.stderr)
        return INTERRUPTED
    finally:
        for s in STOP_SIGNALS:
            signal.signal(s, _exit_now)


if __name__ == "__main__":
    sys.exit(main())

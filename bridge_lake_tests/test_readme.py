"""Every command of the README works as written, from a fresh shell in a clone (issue 32:
`dagster job backfill … --noprompt` failed with DagsterHomeNotSetError, because only the
Makefile set DAGSTER_HOME).

The clone is a folder of links to the repository's tracked files with its own demo/ and
.dagster_home/, made by `make demo` (with a short drive, and without reinstalling the venv
under test). Each fenced `sh` block then runs in its own `bash -eu` with a bare
environment (no DAGSTER_HOME, no venv on PATH), after the Quick start's block that the
README says sets up a shell; `python` and `sql` blocks run with the venv's Python and
DuckDB; the `text` block (the command synopsis) must name only options the parser has.
Commands that start servers are not run; SKIPPED lists each with its reason. Blocks that use
ROS 1's tools run in a test of their own, under the ROS 1 tests' rule (`ros1_graph.require`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bridge_lake_tests.conftest import REPO

README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SETUP = "make demo"
"""Run first, as the setup, with a 0.2-minute drive (the full demo takes minutes)."""
SKIPPED = {
    "make test": "runs this whole suite, which starts PostgreSQL, Redis, moto and "
    "dagster-webserver servers",
    "bridge-lake play": "starts a Foxglove WebSocket server (or a ROS 1 publisher) and serves "
    "until stopped",
    "rostopic echo": "prints what the players publish (the players are what is tested)",
    "apt-get install": "installs system packages as root (`make ros1` does it for the tests)",
}
"""Commands the test does not run, by how they start, and why."""
ENV = {
    "HOME": "",  # set per test
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "EDITOR": "true",  # the user's editor: the README opens files in it
}


def blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the README, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(README.read_text())]


def commands(block: str) -> list[str]:
    """The block's commands: lines joined at a trailing backslash."""
    out, line = [], ""
    for raw in block.splitlines():
        line += raw
        if line.endswith("\\"):
            line = line[:-1] + " "
            continue
        if line.strip():
            out.append(line)
        line = ""
    return out


ROS1_TOOLS = ("roscore", "rosbag ", "rostopic ")
"""A block with a command starting so needs Debian's ROS 1."""


def _needs_ros1(block: str) -> bool:
    return any(c.strip().startswith(ROS1_TOOLS) for c in commands(block))


def _skip_reason(command: str) -> str | None:
    text = command.strip()
    if text.startswith(SETUP):
        return "setup"
    return next((why for start, why in SKIPPED.items() if text.startswith(start)), None)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for top in sorted({t.split("/")[0] for t in tracked} | {".venv"}):
        if (REPO / top).exists():
            (root / top).symlink_to(REPO / top)
    (root / "home").mkdir()
    # make demo as the README says, with a short drive; -o: the venv is the one under test
    # (a pyproject.toml newer than it would otherwise make `make` reinstall it)
    done = subprocess.run(
        ["make", "-o", ".venv/.installed", "demo", "DEMO_ARGS=--minutes 0.2"],
        cwd=root, env=_env(root), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root


def _env(root: Path) -> dict[str, str]:
    return ENV | {"HOME": str(root / "home")}


def _shell_setup() -> str:
    """The Quick start block that readies a shell (the venv, DAGSTER_HOME)."""
    found = [b for lang, b in blocks() if lang == "sh" and ". .venv/bin/activate" in b]
    assert len(found) == 1
    return found[0]


def _bash(clone: Path, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=clone, env=_env(clone), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _script(lang: str, block: str, setup: str, skipped: set[str]) -> str | None:
    """The bash script that runs a block after the shell setup (None: nothing to run);
    the commands left out go into `skipped`."""
    if lang == "sh":
        run = []
        for command in commands(block):
            if _skip_reason(command) is None:
                run.append(command)
            else:
                skipped.add(command.split()[0] + " " + command.split()[1])
        if not run or block == setup:
            return None
        return setup + "\n" + "\n".join(run)
    if lang == "python":
        return f"{setup}\npython - <<'PYTHON'\n{block}PYTHON"
    if lang == "sql":
        program = f"import duckdb\nprint(duckdb.sql({block!r}).fetchall())"
        return f"{setup}\npython -c {shlex.quote(program)}"
    return None


def _run(clone: Path, block: str, script: str) -> None:
    done = _bash(clone, script)
    assert done.returncode == 0, (block, done.stdout[-2000:], done.stderr[-3000:])
    assert "Traceback" not in done.stderr, (block, done.stderr[-3000:])


def test_every_readme_command_works_from_a_fresh_shell(clone):
    ran, skipped = [], set()
    setup = _shell_setup()
    for lang, block in blocks():
        if lang == "sh" and _needs_ros1(block):
            _script(lang, block, setup, skipped)  # run by the ROS 1 test below
            continue
        script = _script(lang, block, setup, skipped)
        if script is None:
            continue
        _run(clone, block, script)
        ran.append(block)
    assert skipped == {"make demo", *SKIPPED}  # every skip still names a README command
    assert len(ran) >= 6
    # the backfill block reached the demo's instance: a backfill of both drives waits there
    program = (
        "import dagster as dg; i = dg.DagsterInstance.get(); "
        "print(sorted(k for b in i.get_backfills() for k in b.partition_names or []))"
    )
    found = _bash(clone, f"{setup}\npython -c {shlex.quote(program)}")
    assert found.stdout.split("\n")[-2] == "['adtf-test-vehicle-s1', 'nclt-2012-01-08-s0']"


@pytest.mark.usefixtures("ros1")
def test_the_ros1_commands_work_with_debians_ros1(clone):
    """The "With ROS 1" block: an export `rosbag check` passes, `rosbag play` of it while
    `rosbag record --lz4` records, and `health` on what ROS recorded."""
    setup = _shell_setup()
    ros = [b for lang, b in blocks() if lang == "sh" and _needs_ros1(b)]
    assert ros
    for block in ros:
        script = _script("sh", block, setup, set())
        assert script is not None
        # in a session of its own: a block that fails midway leaves no roscore behind
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=clone, env=_env(clone), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            for sig in (signal.SIGINT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                time.sleep(1)
        assert proc.returncode == 0, (block, out[-2000:], err[-3000:])
        assert "Traceback" not in err, (block, err[-3000:])
    assert (clone / "recorded.bag").is_file()


def test_dagster_commands_need_the_readme_setup(clone):
    """Without the Quick start's shell set-up the backfill fails as the issue says: the test
    above passes because of the README, not because the environment leaks a DAGSTER_HOME."""
    done = _bash(
        clone,
        ".venv/bin/dagster job backfill -w workspace.yaml -j lake_job "
        "--partitions nclt-2012-01-08-s0 --noprompt",
    )
    assert done.returncode != 0 and "DagsterHomeNotSetError" in done.stdout + done.stderr


def test_the_synopsis_names_only_options_the_commands_have():
    """The `text` block of the README (the command synopsis) against the parser."""
    from bridge_lake.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "query" in a.choices)
    synopsis = [b for lang, b in blocks() if lang == "text"]
    assert len(synopsis) == 1
    current = None
    checked = 0
    for line in synopsis[0].splitlines():
        text = line.split("#")[0]
        words = text.split()
        if words and words[0] == "bridge-lake":
            current = words[1] if len(words) > 1 and not words[1].startswith("-") else None
        if current is None:
            continue
        command = subparsers.choices[current.split("|")[0]]
        known = {o for a in command._actions for o in a.option_strings}
        for sub in command._actions:  # `scenes list|export|...`, `mapping suggest ...`
            if getattr(sub, "choices", None) and isinstance(sub.choices, dict):
                for p in sub.choices.values():
                    known |= {o for a in p._actions for o in a.option_strings}
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text):
            assert option in known, (current, option)
            checked += 1
    assert checked > 50

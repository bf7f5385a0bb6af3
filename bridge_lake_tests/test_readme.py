"""Every command of the README works as written, from a fresh shell in a clone (issue 32:
`dagster job backfill … --noprompt` failed with DagsterHomeNotSetError, because only the
Makefile set DAGSTER_HOME).

The clone is a folder of links to the repository's tracked files with its own demo/ and
.dagster_home/, made by `make demo` (with a short drive, and without reinstalling the venv
under test). Each fenced `sh` block then runs in its own `bash -eu` with a bare
environment (no DAGSTER_HOME, no venv on PATH), after the Quick start's block that the
README says sets up a shell; `python` and `sql` blocks run with the venv's Python and
DuckDB; the `text` block (the command synopsis) must name only options the parser has.
Commands that start servers are not run; SKIPPED lists each with its reason.
"""

from __future__ import annotations

import re
import shlex
import subprocess
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
    "rostopic echo": "needs a ROS master (roscore) running",
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


def test_every_readme_command_works_from_a_fresh_shell(clone):
    ran, skipped = [], set()
    setup = _shell_setup()
    for lang, block in blocks():
        if lang == "sh":
            run = []
            for command in commands(block):
                why = _skip_reason(command)
                if why is None:
                    run.append(command)
                else:
                    skipped.add(command.split()[0] + " " + command.split()[1])
            if not run or block == setup:
                continue
            script = setup + "\n" + "\n".join(run)
        elif lang == "python":
            script = f"{setup}\npython - <<'PYTHON'\n{block}PYTHON"
        elif lang == "sql":
            program = f"import duckdb\nprint(duckdb.sql({block!r}).fetchall())"
            script = f"{setup}\npython -c {shlex.quote(program)}"
        else:
            continue
        done = _bash(clone, script)
        assert done.returncode == 0, (block, done.stdout[-2000:], done.stderr[-3000:])
        assert "Traceback" not in done.stderr, (block, done.stderr[-3000:])
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

"""The `dagster dev` command the demo and ingest print works as printed and starts quietly."""

import json
import os
import signal
import subprocess
import time
import urllib.request

from bridge_lake.defs.ingest import ui_command
from bridge_lake_tests.conftest import REPO, free_port

START_TIMEOUT_S = 240


def _version(port: int) -> str | None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": "{ version }"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.load(resp)["data"]["version"]
    except OSError:
        return None


def test_printed_ui_command_serves_the_instance_without_warnings(tmp_path):
    """Run from the repository (whose dagster.yaml is only the template of .dagster_home, so
    `dagster dev` would warn that it is not used), the printed command serves the UI on the
    home it names and prints no warning: neither that one nor Dagster's `dg dev` notice."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        "DAGSTER_HOME": str(home),
        "BRIDGE_LAKE_ROOT": str(tmp_path / "lake"),
        "BRIDGE_LAKE_LANDING": str(tmp_path / "landing"),
    }
    port = free_port()
    command = ui_command(env)
    assert command.endswith("-p 3000)")
    log = tmp_path / "dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", command.replace("-p 3000)", f"-p {port})")],
            cwd=REPO,  # holds a dagster.yaml
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # started from a non-interactive shell SIGINT may be ignored, and Dagster maps
            # SIGTERM onto it: restore the default so the server can be stopped
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        version = None
        while version is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
            version = _version(port)
        assert version and version.startswith("1.13"), log.read_text()
        assert (home / "history").is_dir()  # the instance of the printed home, not a temp one
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text()
    assert "Serving dagster-webserver" in text
    noisy = [line for line in text.splitlines() if "warning" in line.lower()]
    assert noisy == []

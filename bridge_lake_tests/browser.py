"""Headless Chromium driven over the DevTools protocol: load a page, collect every console
message, uncaught exception and browser log entry, and evaluate JavaScript in it.

`--dump-dom` shows the markup but not whether an image decoded or what the console said; the
protocol does, with Chromium as an independent judge of the HTML we write.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_S = 60.0


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "headless Chromium is required (make test installs it)"
    return exe


@dataclass
class Page:
    """A loaded page: `messages` holds (source, level, text) of every console call, uncaught
    exception and browser log entry seen while it loaded and ran."""

    _ws: Any
    _session: str
    messages: list[tuple[str, str, str]] = field(default_factory=list)
    events: set[str] = field(default_factory=set)
    """names of the events received so far"""
    _next_id: int = 0

    def call(self, method: str, params: dict | None = None, *, session: bool = True) -> dict:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self._session
        self._ws.send(json.dumps(msg))
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def wait_for(self, event: str) -> None:
        while event not in self.events:
            self._receive()

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(json.dumps(result["exceptionDetails"])[:2000])
        return result["result"].get("value")

    def errors(self) -> list[tuple[str, str, str]]:
        return [m for m in self.messages if m[1] in ("error", "assert")]

    def _receive(self) -> dict:
        msg = json.loads(self._ws.recv(timeout=TIMEOUT_S))
        method, params = msg.get("method"), msg.get("params", {})
        if method:
            self.events.add(method)
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            self.messages.append(("console", params["type"], text))
        elif method == "Runtime.exceptionThrown":
            self.messages.append(("exception", "error", json.dumps(params["exceptionDetails"])))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.messages.append((entry["source"], entry["level"], entry["text"]))
        return msg


@contextlib.contextmanager
def loaded_page(url: str, profile: Path) -> Iterator[Page]:
    """Chromium with a fresh profile in `profile`, `url` loaded (its load event fired)."""
    port_file = profile / "DevToolsActivePort"
    proc = subprocess.Popen(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            assert proc.poll() is None, f"chromium exited with {proc.returncode}"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        with connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as ws:
            page = Page(ws, "")
            target = page.call("Target.createTarget", {"url": "about:blank"}, session=False)
            attached = page.call(
                "Target.attachToTarget",
                {"targetId": target["targetId"], "flatten": True},
                session=False,
            )
            page._session = attached["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                page.call(f"{domain}.enable")
            page.call("Page.navigate", {"url": url})
            page.wait_for("Page.loadEventFired")
            yield page
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""Real servers for the integration tests: PostgreSQL and Redis from Debian's packages, and
background processes (code server, dagster-daemon, Celery workers).

Every server runs in its own session, so stopping it stops what it started too (the run
workers of the code server, the pool processes of a Celery worker). PostgreSQL refuses to run
as root, so as root its cluster belongs to the `postgres` user the Debian package creates.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_ROOT = Path("/usr/lib/postgresql")
INSTALL_HINT = "run `make postgres redis` (as root: apt-get install -y postgresql redis-server)"


def _reset_sigint() -> None:
    # a process started from a non-interactive shell inherits SIGINT ignored, and Dagster maps
    # SIGTERM onto SIGINT: without this, the daemon and code server would ignore SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Background:
    """A server process in its own session, logging to a file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_reset_sigint,
            )

    def tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} ({self.log}) ---\n{text[-chars:]}"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"{self.name} exited with {self.proc.returncode}\n{self.tail()}")

    def descendants(self) -> set[int]:
        """Pids of every live process below this one (read from /proc)."""
        children: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with suppress(OSError):
                    stat = Path(entry.path, "stat").read_text()
                    ppid = int(stat.rsplit(")", 1)[1].split()[1])
                    children.setdefault(ppid, []).append(int(entry.name))
        found, todo = set(), [self.proc.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                found.add(child)
                todo.append(child)
        return found

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM to the whole session (the server and its children), SIGKILL if it hangs."""
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with suppress(ProcessLookupError):  # children that outlived their parent
            os.killpg(self.proc.pid, signal.SIGKILL)


def wait_until(what: str, ready: Callable[[], bool], timeout: float, *watch: Background) -> float:
    """Poll `ready` every half second; fail naming `what` (with the servers' logs) on timeout.
    Returns the seconds it took."""
    t0 = time.monotonic()
    while not ready():
        for server in watch:
            server.check_alive()
        if time.monotonic() - t0 > timeout:
            logs = "\n".join(s.tail() for s in watch)
            pytest.fail(f"{what}: not ready after {timeout:.0f} s\n{logs}")
        time.sleep(0.5)
    return time.monotonic() - t0


def pg_bindir() -> Path:
    """The bin folder of the newest PostgreSQL server Debian installed."""
    found = [initdb.parent for initdb in PG_ROOT.glob("*/bin/initdb")]
    if not found:
        pytest.fail(f"no PostgreSQL server in {PG_ROOT}/<version>/bin: {INSTALL_HINT}")
    return max(found, key=lambda b: int(b.parent.name) if b.parent.name.isdigit() else -1)


@dataclass(frozen=True)
class Postgres:
    bindir: Path
    port: int
    user: str
    password: str
    db: str
    host: str = "127.0.0.1"
    ctl: Callable[[str], None] | None = None
    """pg_ctl `stop` or `start` of this server (postgres_server's)."""

    def outage(self, seconds: float) -> None:
        """The server stopped (fast: every connection cut), and started again `seconds`
        later on the same port with the same data."""
        assert self.ctl is not None
        self.ctl("stop")
        time.sleep(seconds)
        self.ctl("start")

    def sql(self, query: str) -> list[list[str]]:
        """Rows of `query` read with psql over TCP (password auth), independent of Dagster."""
        out = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-U",
                self.user,
                "-d",
                self.db,
                "-X",
                "-A",
                "-t",
                "-F",
                "\x1f",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                query,
            ],
            env={**os.environ, "PGPASSWORD": self.password},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        return [line.split("\x1f") for line in out.splitlines() if line]


@contextmanager
def postgres_server(port: int) -> Iterator[Postgres]:
    """A throwaway cluster on 127.0.0.1:`port` with database `dagster` (user `dagster`,
    password auth over TCP, as a deployment has it); stopped and deleted afterwards."""
    bindir = pg_bindir()
    as_owner: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="bridge-lake-pg-"))  # not under pytest's 0700 tmp
    pg = Postgres(bindir, port, user="dagster", password="dagster-test-pw", db="dagster")
    (root / "pw").write_text(pg.password)
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.fail("running as root needs runuser (util-linux) to start PostgreSQL")
        as_owner = ["runuser", "-u", "postgres", "--"]
        for path in (root, root / "pw"):
            shutil.chown(path, "postgres", "postgres")
    data, log = root / "data", root / "postgres.log"

    def run(*argv: str) -> None:
        try:
            subprocess.run(
                [*as_owner, *argv], capture_output=True, text=True, check=True, timeout=120
            )
        except subprocess.CalledProcessError as exc:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            pytest.fail(f"PostgreSQL: {argv[0]} failed: {exc.stderr}\n{tail}")

    started = False
    try:
        run(
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            pg.user,
            f"--pwfile={root / 'pw'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        # fsync off: the cluster is thrown away after the test; nothing else is changed
        options = f"-h {pg.host} -p {port} -k {root} -c fsync=off"
        run(
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )
        started = True
        Postgres(bindir, port, pg.user, pg.password, "postgres").sql(f"create database {pg.db}")

        def ctl(action: str) -> None:
            ctl_args = ["-m", "fast"] if action == "stop" else ["-l", str(log), "-o", options]
            run(str(bindir / "pg_ctl"), "-D", str(data), "-w", "-t", "60", *ctl_args, action)

        yield dataclasses.replace(pg, ctl=ctl)
    finally:
        if started:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def _redis_pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_server(port: int, workdir: Path) -> Iterator[str]:
    """redis-server on 127.0.0.1:`port`, nothing persisted; yields its URL (database 0)."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail(f"no redis-server on PATH: {INSTALL_HINT}")
    server = Background(
        "redis-server",
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        dict(os.environ),
        workdir / "redis.log",
    )
    try:
        wait_until("redis-server", lambda: _redis_pong(port), 30, server)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.stop()

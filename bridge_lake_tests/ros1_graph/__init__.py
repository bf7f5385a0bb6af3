"""Real ROS 1 (Debian's roscore, rostopic and roscpp) for tests of `--ros1` output.

`roscore()` runs a private master on a free port in its own process group; `subscriber()`
builds (once per session) and runs `sub.cpp`, a roscpp subscriber to any type through
`topic_tools::ShapeShifter`, which reports each message's topic, the datatype and md5sum its
publisher announced, its arrival time and its bytes: an oracle that shares no code with ours.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
LIBS = [
    "-lroscpp",
    "-lrosconsole",
    "-lroscpp_serialization",
    "-lrostime",
    "-lxmlrpcpp",
    "-lcpp_common",
    "-ltopic_tools",
    "-lboost_system",
]

NEEDED = (
    "/usr/bin/roscore",
    "/usr/bin/rosbag",
    "/usr/bin/rostopic",
    "/usr/include/ros/ros.h",
    "/usr/include/topic_tools/shape_shifter.h",
    "g++",
)
"""What the ROS 1 tests run: Debian's ros-core, python3-rosbag, libroscpp-dev,
libtopic-tools-dev and g++ (`make ros1` installs them)."""


def require() -> None:
    """The one rule for every test that needs ROS 1: run where it is installed; skip, with
    that reason, only where apt offers no ROS 1 packages (not Debian); fail where apt has them
    but they are not installed, so CI on Debian cannot pass by skipping."""
    import pytest

    missing = [p for p in NEEDED if not (Path(p).exists() if "/" in p else shutil.which(p))]
    if not missing:
        return
    try:
        apt = subprocess.run(["apt-cache", "show", "ros-core"], capture_output=True, text=True)
        offered = apt.returncode == 0 and "Package: ros-core" in apt.stdout
    except FileNotFoundError:
        offered = False
    if not offered:
        pytest.skip("ROS 1 is not installed and apt has no ROS 1 packages here (not Debian)")
    pytest.fail(f"ROS 1 is not installed (no {', '.join(missing)}): run `make ros1`")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def roscore(home: Path) -> Iterator[dict[str, str]]:
    """A master on a free port; yields the environment that points ROS 1 tools at it."""
    port = _free_port()
    env = dict(
        os.environ,
        ROS_MASTER_URI=f"http://127.0.0.1:{port}",
        ROS_HOME=str(home),
        ROS_LOG_DIR=str(home),
        ROS_IP="127.0.0.1",
    )
    proc = subprocess.Popen(
        ["roscore", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            r = subprocess.run(
                ["/usr/bin/python3", "/usr/bin/rostopic", "list"],
                env=env,
                capture_output=True,
                text=True,
            )
            if r.returncode == 0 and "/rosout" in r.stdout:
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError(f"roscore did not start: {r.stderr}")
            time.sleep(0.3)
        yield env
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def build_subscriber(out_dir: Path) -> Path:
    exe = out_dir / "ros1_sub"
    if not exe.exists():
        subprocess.run(
            ["g++", "-O2", "-std=c++17", str(HERE / "sub.cpp"), "-o", str(exe), *LIBS],
            check=True,
            capture_output=True,
        )
    return exe


@dataclass
class Got:
    topic: str
    datatype: str
    md5sum: str
    at_ns: int
    data: bytes


class Subscriber:
    """The roscpp subscriber running on `topics` until `count` messages or `seconds`."""

    def __init__(self, exe: Path, env: dict[str, str], topics: list[str], count: int, seconds):
        self.proc = subprocess.Popen(
            [str(exe), str(count), str(seconds), *topics],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"
        # drained as they come: a full pipe would block the callback and delay the arrivals
        assert self.proc.stderr is not None
        self._out: list[str] = []
        self._err: list[str] = []
        self._drains = [
            threading.Thread(target=self._out.extend, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._err.extend, args=(self.proc.stderr,), daemon=True),
        ]
        for t in self._drains:
            t.start()

    def wait_connected(self, env: dict[str, str], topic: str, timeout: float = 20) -> None:
        """Until the master lists this subscriber on `topic` (so nothing is missed)."""
        _wait_subscribed(env, topic, "bl_sub", timeout)

    def results(self, timeout: float = 120) -> list[Got]:
        self.proc.wait(timeout=timeout)
        for t in self._drains:
            t.join(timeout)
        out = "".join(self._out)
        got = []
        for line in out.splitlines():
            topic, dtype, md5, at, hexdata = [*line.split(" "), ""][:5]
            got.append(Got(topic, dtype, md5, int(at), bytes.fromhex(hexdata)))
        return got


def rosbag_check(path: Path) -> subprocess.CompletedProcess:
    """`rosbag check` (Debian's ROS 1): exit 0 on a bag ROS reads, a traceback otherwise."""
    return _rosbag("check", str(path))


def rosbag_read(path: Path) -> dict[str, dict]:
    """Per topic, what rosbag's Python API reads message by message (`rosbag_read.py`):
    type, md5sum, messages, sha256 of the raw and of the re-serialized deserialized bytes."""
    r = subprocess.run(
        ["/usr/bin/python3", str(HERE / "rosbag_read.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        raise AssertionError(f"rosbag cannot read {path}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)


def rosbags_read(path: Path) -> dict[str, dict]:
    """The same per-topic facts from rosbags (pure Python, ours to use but not to trust
    alone: it reads LZ4 frames roslz4 refuses)."""
    from rosbags.rosbag1 import Reader

    out: dict[str, dict] = {}
    hashes: dict[str, hashlib._Hash] = {}
    with Reader(path) as reader:
        for c in reader.connections:
            out.setdefault(c.topic, {"type": c.msgtype.replace("/msg/", "/"), "md5sum": c.digest})
            out[c.topic]["messages"] = 0
        for c, _t, data in reader.messages():
            out[c.topic]["messages"] += 1
            hashes.setdefault(c.topic, hashlib.sha256()).update(data)
    for topic, h in hashes.items():
        out[topic]["raw"] = h.hexdigest()
    return out


def _rosbag(*args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        ["/usr/bin/python3", "/usr/bin/rosbag", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def rosbag_compress(src: Path, out: Path, compression: str) -> Path:
    """`rosbag compress --lz4|--bz2` of a copy of `src`: chunks as ROS's Python writer
    (roslz4 / bz2) writes them."""
    out.write_bytes(src.read_bytes())
    r = _rosbag("compress", f"--{compression}", "-q", str(out))
    if r.returncode != 0:
        raise AssertionError(f"rosbag compress failed: {r.stderr[-2000:]}")
    out.with_name(out.stem + ".orig.bag").unlink()
    return out


def rosbag_record(env: dict[str, str], src: Path, topics: list[str], out: Path, *args: str) -> Path:
    """What `rosbag record ARGS` (ROS's C++ recorder) writes while `rosbag play` plays `src`
    into the master of `env`."""
    rec = subprocess.Popen(
        ["/usr/bin/python3", "/usr/bin/rosbag", "record", *args, "-O", str(out), *topics],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for topic in topics:  # subscribed before anything is played
            _wait_subscribed(env, topic, "record_")
        play = _rosbag("play", "--wait-for-subscribers", str(src), env=env)
        if play.returncode != 0:
            raise AssertionError(f"rosbag play failed: {play.stderr[-2000:]}")
        time.sleep(1.0)  # the recorder's queue drains into the file
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(rec.pid, signal.SIGINT)
        _, err = rec.communicate(timeout=30)
    if not out.is_file():
        raise AssertionError(f"rosbag record wrote nothing: {err[-2000:]}")
    return out


def _wait_subscribed(env: dict[str, str], topic: str, node: str, timeout: float = 20) -> None:
    """Until the master lists a subscriber named `node`... on `topic`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(
            ["/usr/bin/python3", "/usr/bin/rostopic", "info", topic],
            env=env,
            capture_output=True,
            text=True,
        )
        if "Subscribers:" in r.stdout and node in r.stdout.split("Subscribers:")[1]:
            return
        time.sleep(0.2)
    raise AssertionError(f"{node} not subscribed to {topic}")

"""Fixtures shared by the whole suite: real test recordings, drive folders, a local S3."""

from __future__ import annotations

import shutil
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge_lake_tests.testdata import ADTF_TESTDATA

REPO = Path(__file__).resolve().parents[1]

DRIVE_YAML = """vehicle: test-car
source: adtf
operator: alice
route: ring road
weather: sunny
notes: fixture drive
"""


@pytest.fixture(autouse=True)
def _signal_mask_left_as_found() -> Iterator[None]:
    """No test (an in-process `bridge-lake ingest` or demo: the signal gate) leaves SIGINT or
    SIGTERM blocked in the test process: every process a later test starts would inherit
    the mask and ignore them (CI: `bridge-lake play` children that never stopped)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    after = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert after == before, f"the test left the signal mask {sorted(after)}, not {sorted(before)}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_adtf_drive(landing: Path, drive_id: str, *, drive_yaml: str | None = DRIVE_YAML) -> Path:
    """A drive folder holding two real ADTF recordings (copied from bridge_lake_tests/data)."""
    d = landing / drive_id
    d.mkdir(parents=True)
    shutil.copy(ADTF_TESTDATA / "test_type_seek.dat", d / "test_type_seek.dat")
    (d / "rec").mkdir()
    shutil.copy(ADTF_TESTDATA / "test_file_rec_newfile.dat", d / "rec" / "front.dat")
    shutil.copy(
        ADTF_TESTDATA / "test_file_rec_newfile.dat.description", d / "rec" / "front.dat.description"
    )
    if drive_yaml is not None:
        (d / "drive.yaml").write_text(drive_yaml)
    return d


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    root = tmp_path / "landing"
    root.mkdir()
    return root


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3 API: moto's server on 127.0.0.1, used through s3fs like a real bucket."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_options(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return {"client_kwargs": {"endpoint_url": s3_server}, "key": "testing", "secret": "testing"}


@pytest.fixture
def s3_bucket(s3_options: dict, request: pytest.FixtureRequest) -> str:
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options)
    name = "bl-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    fs.mkdir(name)
    return name


@pytest.fixture(scope="session")
def synthetic_lake(tmp_path_factory: pytest.TempPathFactory):
    """A lake with one NCLT and one ADTF synthetic drive (0.2 min), normalized and
    calibrated. Shared by the session: tests must not write into it."""
    from bridge_lake_tests.support import build_lake

    return build_lake(tmp_path_factory.mktemp("synthetic_lake"))


@pytest.fixture(scope="session")
def ros1() -> None:
    """Debian's ROS 1 (roscore, rosbag, roscpp): tests use it with
    `pytestmark = pytest.mark.usefixtures("ros1")`; see `ros1_graph.require` for when they
    skip."""
    from bridge_lake_tests.ros1_graph import require

    require()

"""The per-drive lock (issue 16), locally (flock) and on a real S3 API (moto's server)."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import secrets
import subprocess
import threading
import time

import pytest
import s3fs

from bridge_lake.lake import Lake
from bridge_lake.lake.locks import DriveLockedError, LockHolder, drive_lock, lock_path


@pytest.fixture(params=["local", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path) -> Lake:
    if request.param == "local":
        return Lake(str(tmp_path / "lake"))
    options = request.getfixturevalue("s3_options")
    bucket = f"locks-{secrets.token_hex(6)}"  # (s3_bucket's name would keep the "[s3]")
    s3fs.S3FileSystem(**options).mkdir(bucket)
    return Lake(f"s3://{bucket}/lake", options)


def test_second_writer_fails_naming_drive_and_holder_then_gets_it(lake: Lake) -> None:
    with drive_lock(lake, "d1", owner="run-a") as me:
        with pytest.raises(DriveLockedError) as err:
            with drive_lock(lake, "d1", owner="run-b"):
                pass
        assert str(err.value).startswith(f"drive d1 is being written by {me} (lock ")
        assert err.value.holder == LockHolder(
            me.host, me.pid, "run-a", me.since, err.value.holder.expires
        )
        with drive_lock(lake, "d2", owner="run-c"):  # another drive: no waiting
            pass
    with drive_lock(lake, "d1", owner="run-b"):
        pass


def test_waiting_writer_is_told_who_holds_it_and_gives_up_after_wait_s(lake: Lake) -> None:
    told = []
    with drive_lock(lake, "d1", owner="run-a"):
        t = time.monotonic()
        with pytest.raises(DriveLockedError, match=r"gave up after waiting 1 s"):
            with drive_lock(lake, "d1", owner="run-b", wait_s=1.2, on_wait=told.append):
                pass
        assert 1.2 <= time.monotonic() - t < 3
    assert [h.owner for h in told] == ["run-a"]


def test_a_holder_still_writing_its_record_is_named_not_unknown(tmp_path) -> None:
    """The file lock's holder writes its record just after its flock succeeds; a writer
    that comes in between waits for the record instead of reporting an unknown holder."""
    lake = Lake(str(tmp_path / "lake"))
    path = lock_path(lake, "d1")
    os.makedirs(os.path.dirname(path))
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held, record not yet written
    holder = LockHolder("host-x", 4242, "run-a", "2026-12-04T00:00:00+00:00")
    timer = threading.Timer(0.2, os.pwrite, (fd, holder.to_json(), 0))
    timer.start()
    try:
        with pytest.raises(DriveLockedError) as err:
            with drive_lock(lake, "d1", owner="run-b"):
                pass
        assert err.value.holder == holder
    finally:
        timer.join()
        os.close(fd)


def _put_record(lake: Lake, holder: LockHolder) -> None:
    lake.fs.pipe_file(lock_path(lake, "d1"), holder.to_json())


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def s3_lake(s3_bucket: str, s3_options: dict) -> Lake:
    return Lake(f"s3://{s3_bucket}/lake", s3_options)


def test_s3_lock_of_a_dead_process_on_this_host_is_taken_over(s3_lake: Lake) -> None:
    me = LockHolder.me("crashed-run")
    dead = LockHolder(me.host, _dead_pid(), "crashed-run", me.since, time.time() + 3600)
    _put_record(s3_lake, dead)
    with drive_lock(s3_lake, "d1", owner="rerun") as holder:
        record = json.loads(s3_lake.fs.cat_file(lock_path(s3_lake, "d1")))
        assert record["owner"] == "rerun" and record["pid"] == holder.pid
    assert not s3_lake.fs.exists(lock_path(s3_lake, "d1"))  # released: deleted


def test_s3_lease_of_another_host_holds_until_it_runs_out(s3_lake: Lake) -> None:
    other = LockHolder("other-host", 4242, "run-x", "2026-12-04T00:00:00+00:00", time.time() + 3600)
    _put_record(s3_lake, other)
    with pytest.raises(DriveLockedError, match=r"run-x \(pid 4242 on other-host, since"):
        with drive_lock(s3_lake, "d1", owner="me"):
            pass
    expired = LockHolder("other-host", 4242, "run-x", other.since, time.time() - 1)
    _put_record(s3_lake, expired)
    with drive_lock(s3_lake, "d1", owner="me"):
        pass


def test_s3_lock_of_an_owner_known_to_have_ended_is_taken_over_at_once(s3_lake: Lake) -> None:
    """Issue 33: a worker lost on another host leaves its lease for up to LOCK_TTL_S; the
    caller that knows the owner ended (a Dagster run recorded as finished) takes it now."""
    gone = LockHolder(
        "other-host", 4242, "run-gone", "2026-12-04T00:00:00+00:00", time.time() + 3600
    )
    _put_record(s3_lake, gone)
    with pytest.raises(DriveLockedError, match="run-gone"):
        with drive_lock(s3_lake, "d1", owner="me", ended=lambda h: h.owner == "run-live"):
            pass
    start = time.monotonic()
    with drive_lock(s3_lake, "d1", owner="me", ended=lambda h: h.owner == "run-gone"):
        assert json.loads(s3_lake.fs.cat_file(lock_path(s3_lake, "d1")))["owner"] == "me"
    assert time.monotonic() - start < 5


def test_s3_holder_renews_its_lease_and_reports_losing_it(s3_lake: Lake) -> None:
    path = lock_path(s3_lake, "d1")
    with drive_lock(s3_lake, "d1", owner="slow-run", ttl_s=0.6):
        first = json.loads(s3_lake.fs.cat_file(path))["expires"]
        time.sleep(1.0)  # longer than the lease: only renewing keeps it
        assert json.loads(s3_lake.fs.cat_file(path))["expires"] > first
        with pytest.raises(DriveLockedError):
            with drive_lock(s3_lake, "d1", owner="other"):
                pass
    thief = LockHolder("other-host", 7, "thief", "2026-12-04T00:00:00+00:00", time.time() + 60)
    with pytest.raises(DriveLockedError, match="d1: the lock was taken over by thief"):
        with drive_lock(s3_lake, "d1", owner="paused-run", ttl_s=0.6):
            _put_record(s3_lake, thief)  # as if our lease had lapsed and someone took it
            time.sleep(0.6)  # the next renewal finds it gone
    assert json.loads(s3_lake.fs.cat_file(path))["owner"] == "thief"  # theirs stays


def _increment(root: str, options: dict, rounds: int) -> None:
    """Read-modify-write a counter in the lake under the lock, slowly enough to lose updates
    if two processes were inside at once."""
    lake = Lake(root, options)
    path = f"{lake.base}/counter"
    for _ in range(rounds):
        with drive_lock(lake, "d1", owner="counter", wait_s=60):
            n = int(lake.fs.cat_file(path)) if lake.fs.exists(path) else 0
            time.sleep(0.05)
            lake.fs.pipe_file(path, str(n + 1).encode())
            lake.fs.invalidate_cache()


def test_processes_take_turns(lake: Lake) -> None:
    ctx = multiprocessing.get_context("spawn")
    options = dict(lake.storage_options)
    procs = [ctx.Process(target=_increment, args=(lake.root, options, 3)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    lake.fs.invalidate_cache()
    assert int(lake.fs.cat_file(f"{lake.base}/counter")) == 9

"""A run's steps hold their drive's lock through the lake resource (issue 16)."""

from __future__ import annotations

import threading
import time

import dagster as dg
import pytest

from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import OWNER, LakeResource, LandingZoneResource, run_ended
from bridge_lake.lake import Lake
from bridge_lake.lake.locks import LockHolder, drive_lock, lock_path
from bridge_lake_tests.conftest import make_adtf_drive


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("drives", ["d1", "d2"])
        yield inst


def _run(instance, landing, lake_root, drive_id, lock_wait_s):
    return dg.materialize(
        [raw_manifest],
        partition_key=drive_id,
        instance=instance,
        resources={
            "lake": LakeResource(root=str(lake_root), lock_wait_s=lock_wait_s),
            "landing": LandingZoneResource(root=str(landing)),
        },
        raise_on_error=False,
    )


def _failure(result: dg.ExecuteInProcessResult) -> str:
    """The run's errors as the UI shows them: every error event's message and causes."""
    texts = []
    for event in result.all_events:
        error = getattr(event.event_specific_data, "error", None)
        while error is not None:
            texts.append(error.message)
            error = error.cause
    return "\n".join(texts)


def test_a_run_of_a_locked_drive_fails_naming_the_holder(instance, landing, tmp_path):
    make_adtf_drive(landing, "d1")
    make_adtf_drive(landing, "d2")
    lake = Lake(str(tmp_path / "lake"))
    with drive_lock(lake, "d1", owner="dagster run 1234 (lake_job)") as holder:
        blocked = _run(instance, landing, tmp_path / "lake", "d1", lock_wait_s=0)
        other = _run(instance, landing, tmp_path / "lake", "d2", lock_wait_s=0)
    assert not blocked.success
    assert f"drive d1 is being written by {holder} (lock " in _failure(blocked)
    assert not lake.has_partition("raw", "manifest", "d1")
    assert other.success  # another drive is not held up


def test_a_run_of_a_locked_drive_waits_and_then_runs(instance, landing, tmp_path):
    make_adtf_drive(landing, "d1")
    lake = Lake(str(tmp_path / "lake"))
    held = drive_lock(lake, "d1", owner="earlier run")
    held.__enter__()
    release = threading.Timer(1.5, held.__exit__, (None, None, None))
    start = time.monotonic()
    release.start()
    result = _run(instance, landing, tmp_path / "lake", "d1", lock_wait_s=60)
    release.join()
    assert result.success
    assert time.monotonic() - start >= 1.5
    assert lake.has_partition("raw", "manifest", "d1")


def test_the_lock_of_a_finished_run_on_another_host_is_taken_over_at_once(
    instance, landing, tmp_path, s3_bucket, s3_options
):
    """Issue 33: the lock of a run whose worker died elsewhere (its lease still hours long)
    does not hold up the drive once the instance records that run as finished."""
    make_adtf_drive(landing, "d1")
    make_adtf_drive(landing, "d2")
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    finished = _run(instance, landing, tmp_path / "lake", "d2", lock_wait_s=0)  # any run
    assert finished.success
    owner = OWNER.format(run_id=finished.run_id, job="lake_job")
    unknown = OWNER.format(run_id="0" * 8 + "-0000-0000-0000-" + "0" * 12, job="lake_job")
    dead = LockHolder("other-host", 4242, owner, "2026-12-07T00:00:00+00:00", time.time() + 3600)
    ended = run_ended(instance)
    assert ended(dead)
    assert not ended(LockHolder("other-host", 4242, unknown, dead.since))
    assert not ended(LockHolder("other-host", 4242, "bridge-lake ingest", dead.since))
    lake.fs.pipe_file(lock_path(lake, "d1"), dead.to_json())
    rerun = dg.materialize(
        [raw_manifest],
        partition_key="d1",
        instance=instance,
        resources={
            "lake": LakeResource(root=lake.root, storage_options=s3_options, lock_wait_s=0),
            "landing": LandingZoneResource(root=str(landing)),
        },
        raise_on_error=False,
    )
    assert rerun.success, _failure(rerun)
    assert lake.has_partition("raw", "manifest", "d1")

import datetime as dt
import json
import os

import dagster as dg
import pytest

from bridge_lake.defs import sensors
from bridge_lake.defs.inputs import INPUTS
from bridge_lake.defs.landing import landing_drive, observed_fingerprints
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake.defs.schedules import build_stale_schedule
from bridge_lake.defs.sensors import FINGERPRINT_TAG, REASON_TAG, landing_zone_sensor
from bridge_lake.landing import LandingZone, fingerprint
from bridge_lake_tests.conftest import make_adtf_drive


def _tick(instance, landing, cursor=None):
    """One tick, and what the daemon does with its result besides launching the runs:
    partitions added, observations recorded."""
    ctx = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"landing": LandingZoneResource(root=str(landing))},
    )
    result = landing_zone_sensor(ctx)
    for req in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result, ctx


def _settled(instance, landing, cursor=None):
    """Two ticks over an unchanged landing zone: the first sees, the second requests."""
    first, _ = _tick(instance, landing, cursor)
    assert first.run_requests == [], "a drive is requested only once it has settled"
    return _tick(instance, landing, first.cursor)[0]


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as inst:  # disposing resets Dagster's context state
        yield inst


def test_new_drives_are_added_and_requested(instance, landing):
    make_adtf_drive(landing, "d1")
    make_adtf_drive(landing, "d2")
    result = _settled(instance, landing)
    assert [r.partition_key for r in result.run_requests] == ["d1", "d2"]
    assert {r.tags[REASON_TAG] for r in result.run_requests} == {"new"}
    assert result.dynamic_partitions_requests[0].partition_keys == ["d1", "d2"]
    assert all(r.run_key.startswith(f"{r.partition_key}@") for r in result.run_requests)
    zone = LandingZone(str(landing))
    for req in result.run_requests:  # the sensor's memory: observed data versions
        fp = fingerprint(zone.files(req.partition_key))  # a listing per drive, as an oracle
        assert req.tags[FINGERPRINT_TAG] == fp
        assert observed_fingerprints(instance)[req.partition_key] == fp
        record = instance.get_latest_data_version_record(
            landing_drive.key, is_source=True, partition_key=req.partition_key
        )
        assert record.asset_observation.tags["dagster/data_version"] == fp


def test_unchanged_drive_is_not_requested_again(instance, landing):
    make_adtf_drive(landing, "d1")
    first = _settled(instance, landing)
    cursor = first.cursor
    for _ in range(3):
        again, _ = _tick(instance, landing, cursor)
        assert again.run_requests == [] and "no new or changed" in again.skip_reason.skip_message
        assert again.asset_events == []
        cursor = again.cursor


def test_drive_still_uploading_waits_until_it_settles(instance, landing):
    d = make_adtf_drive(landing, "d1")
    cursor = None
    for i in range(3):  # a file grows between every tick
        (d / "upload.dat").write_bytes(b"x" * (i + 1))
        result, _ = _tick(instance, landing, cursor)
        assert result.run_requests == []
        assert "settling" in result.skip_reason.skip_message
        cursor = result.cursor
    done, _ = _tick(instance, landing, cursor)  # unchanged since the last tick
    assert [r.partition_key for r in done.run_requests] == ["d1"]


def test_changed_drive_is_requested_again_without_re_adding(instance, landing):
    make_adtf_drive(landing, "d1")
    make_adtf_drive(landing, "d2")
    first = _settled(instance, landing)
    (landing / "d1" / "late_upload.dat").write_bytes(b"more data")
    second = _settled(instance, landing, first.cursor)
    assert [r.partition_key for r in second.run_requests] == ["d1"]
    req = second.run_requests[0]
    assert req.tags[REASON_TAG] == "changed"
    assert req.tags[FINGERPRINT_TAG] != first.run_requests[0].tags[FINGERPRINT_TAG]
    assert req.run_key != first.run_requests[0].run_key
    assert second.dynamic_partitions_requests == []  # already a partition


def test_touched_file_counts_as_change(instance, landing):
    d = make_adtf_drive(landing, "d1")
    first = _settled(instance, landing)
    os.utime(d / "test_type_seek.dat", (1e9, 1e9))
    second = _settled(instance, landing, first.cursor)
    assert [r.partition_key for r in second.run_requests] == ["d1"]


def test_invalid_folder_names_and_empty_folders_are_ignored(instance, landing):
    make_adtf_drive(landing, "good")
    (landing / "bad name").mkdir()
    (landing / "bad name" / "x.dat").write_bytes(b"x")
    (landing / "empty").mkdir()
    (landing / "_tmp_upload").mkdir()
    (landing / "_tmp_upload" / "x.dat").write_bytes(b"x")
    (landing / "loose_file.dat").write_bytes(b"x")
    scan = LandingZone(str(landing)).scan()
    assert list(scan.drives) == ["good"] and list(scan.rejected) == ["bad name"]
    result = _settled(instance, landing)
    assert [r.partition_key for r in result.run_requests] == ["good"]


def test_empty_landing_zone_skips(instance, tmp_path):
    result, _ = _tick(instance, tmp_path / "does-not-exist")
    assert result.run_requests == [] and result.skip_reason is not None


def test_cursor_holds_only_the_drives_settling(instance, landing):
    """What was requested is in the instance; the cursor holds 8 characters per drive that
    waits for its interval, and nothing once every drive was requested."""
    for i in range(60):
        (landing / f"d{i:03d}").mkdir()
        (landing / f"d{i:03d}" / "drive.yaml").write_text("vehicle: v\nsource: adtf\n")
    first, _ = _tick(instance, landing)
    second, _ = _tick(instance, landing, first.cursor)
    assert len(second.run_requests) == 60
    third, _ = _tick(instance, landing, second.cursor)
    assert third.run_requests == []
    assert len(first.cursor) == len(json.dumps({sensors.CURSOR_KEY: ""})) + 60 * 8
    assert third.cursor == second.cursor == json.dumps({sensors.CURSOR_KEY: ""})
    assert len(sensors.decode_settling(first.cursor)) == 60


def test_a_tick_requests_and_observes_at_most_its_share(instance, landing, monkeypatch):
    monkeypatch.setattr(sensors, "MAX_DRIVES_PER_TICK", 3)
    names = [f"d{i}" for i in range(8)]
    for name in names:
        (landing / name).mkdir()
        (landing / name / "drive.yaml").write_text("vehicle: v\nsource: adtf\n")
    cursor, requested = None, []
    for _ in range(4):
        result, _ = _tick(instance, landing, cursor)
        assert len(result.run_requests) <= 3 and len(result.asset_events) <= 3
        assert len(sensors.decode_settling(result.cursor)) <= 3
        requested += [r.partition_key for r in result.run_requests]
        cursor = result.cursor
    assert sorted(requested) == names  # each exactly once, within four ticks
    again, _ = _tick(instance, landing, cursor)
    assert again.run_requests == []


def test_lost_cursor_costs_an_interval_never_a_duplicate(instance, landing):
    make_adtf_drive(landing, "d1")
    _settled(instance, landing)
    again, _ = _tick(instance, landing, None)  # cursor lost (or from an older version)
    assert again.run_requests == []
    make_adtf_drive(landing, "d2")
    assert _tick(instance, landing)[0].run_requests == []
    assert [r.partition_key for r in _settled(instance, landing, "not json").run_requests] == ["d2"]


def _night(schedule, instance, landing, day, lake, assets):
    """The stale schedule's tick at 03:00 on 2026-12-<day>, over the graph of `assets`. The
    context is closed after the tick: left open, the instance it opened resets Dagster's
    context state whenever the garbage collector takes it, even in a later test (a
    clean-clone CI failure)."""
    resources = {
        "landing": LandingZoneResource(root=str(landing)),
        "lake": LakeResource(root=str(lake)),
    }
    repo = dg.Definitions(assets=[*INPUTS, *assets], resources=resources).get_repository_def()
    with dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=dt.datetime(2026, 12, day, 3, 0, tzinfo=dt.UTC),
        resources=resources,
        repository_def=repo,
    ) as ctx:
        return schedule(ctx)


def _materialize(instance, drive, landing, lake, **kwargs):
    return dg.materialize(
        [raw_manifest, *INPUTS],
        selection=[raw_manifest.key],
        partition_key=drive,
        instance=instance,
        resources={
            "lake": LakeResource(root=str(lake)),
            "landing": LandingZoneResource(root=str(landing)),
        },
        **kwargs,
    )


def test_stale_schedule_requests_only_out_of_date_drives(landing, tmp_path):
    make_adtf_drive(landing, "d1")
    make_adtf_drive(landing, "d2")
    lake = tmp_path / "lake"
    schedule = build_stale_schedule([raw_manifest.key])
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", ["d1", "d2", "d3"])
        first = _night(schedule, instance, landing, 2, lake, [raw_manifest])  # observes inputs
        assert [r.partition_key for r in first] == ["d1", "d2", "d3"]
        assert _materialize(instance, "d1", landing, lake).success
        requests = _night(schedule, instance, landing, 3, lake, [raw_manifest])
        assert [r.partition_key for r in requests] == ["d2", "d3"]
        assert requests[0].run_key == "stale-20261203-d2"
        assert requests[0].asset_selection == [raw_manifest.key]
        assert requests[0].tags["bridge_lake/stale_assets"] == "raw_manifest missing"
        assert requests[0].tags[FINGERPRINT_TAG] == LandingZone(str(landing)).scan().drives["d2"]
        assert FINGERPRINT_TAG not in requests[1].tags  # d3 has no folder
        for key in ("d2", "d3"):
            assert _materialize(instance, key, landing, lake, raise_on_error=False)
        instance.delete_dynamic_partition("drives", "d3")
        skipped = _night(schedule, instance, landing, 3, lake, [raw_manifest])
        assert isinstance(skipped, dg.SkipReason) and "every drive" in skipped.skip_message
        # the files of d1 change: its observation gets a new data version, raw_manifest of d1
        # is stale (Dagster's own staleness), and only d1 is asked
        (landing / "d1" / "notes.txt").write_text("added later")
        requests = _night(schedule, instance, landing, 4, lake, [raw_manifest])
        assert [r.partition_key for r in requests] == ["d1"]
        assert (
            "new dependency data version (landing_drive)"
            in requests[0].tags["bridge_lake/stale_assets"]
        )


def test_stale_schedule_remembers_drives_whose_files_failed_a_blocking_check(landing, tmp_path):
    from bridge_lake.defs.normalized import normalized

    make_adtf_drive(landing, "bad", drive_yaml=None)  # drive_yaml_valid fails: blocking
    make_adtf_drive(landing, "flaky")
    make_adtf_drive(landing, "new")
    (tmp_path / "not_a_folder").write_text("")  # a lake that cannot be written: no check ran
    lake = tmp_path / "lake"
    downstream = dg.AssetKey("normalized_imu")  # never reached by a drive that fails raw checks
    keys, assets = [raw_manifest.key, downstream], [raw_manifest, normalized]
    schedule = build_stale_schedule(keys)
    fingerprints = LandingZone(str(landing)).scan().drives
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", ["bad", "flaky", "new"])
        _night(schedule, instance, landing, 2, lake, assets)  # observes their inputs
        for drive, where in (("bad", lake), ("flaky", tmp_path / "not_a_folder")):
            result = _materialize(
                instance,
                drive,
                landing,
                where,
                tags={FINGERPRINT_TAG: fingerprints[drive], REASON_TAG: "new"},  # as the sensor
                raise_on_error=False,
            )
            assert not result.success
        for night in (3, 4):  # not night after night
            requests = _night(schedule, instance, landing, night, lake, assets)
            assert [r.partition_key for r in requests] == ["flaky", "new"]
            assert all(r.tags[REASON_TAG] == "stale" for r in requests)
        (landing / "bad" / "drive.yaml").write_text("vehicle: test-car\nsource: adtf\n")
        requests = _night(schedule, instance, landing, 5, lake, assets)  # its files changed
        assert [r.partition_key for r in requests] == ["bad", "flaky", "new"]
        assert requests[0].tags[FINGERPRINT_TAG] != fingerprints["bad"]
        for drive in ("flaky", "new"):
            assert _materialize(instance, drive, landing, lake).success
            instance.report_runless_asset_event(
                dg.AssetMaterialization(asset_key=downstream, partition=drive)
            )
        (landing / "bad" / "drive.yaml").unlink()  # the files it failed with, again
        skipped = _night(schedule, instance, landing, 6, lake, assets)
        assert isinstance(skipped, dg.SkipReason)
        assert "1 out-of-date drives skipped" in skipped.skip_message

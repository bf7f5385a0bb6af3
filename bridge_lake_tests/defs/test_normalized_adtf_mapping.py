"""The normalized asset takes the user's ADTF mapping from the landing resource and the
drive's own from its drive.yaml (drive first), and refuses a drive mapping outside the drive."""

import numpy as np

from bridge_lake.lake import Lake
from bridge_lake_tests.defs import materialize_normalized
from bridge_lake_tests.normalize.adtf_structs import Struct, records, write_recording

MOTION = Struct("acme_motion", [("t_ns", "tInt64"), ("a0", "tFloat32"), ("a1", "tFloat32")])
RULE = (
    "rules:\n  - name: motion\n    match: {{struct: acme_motion}}\n    table: imu\n"
    "    sensor_time: {{element: t_ns, unit: ns}}\n"
    "    fields: {{linear_acceleration_x: {0}}}\n"
)


def _drive(root, drive_id, extra=""):
    drive = root / drive_id
    recs = records(MOTION, 20, t_ns=np.arange(20) * 10_000_000, a0=1.5, a1=-2.0)
    write_recording(drive / "rec.dat", {"motion": (MOTION, recs)})
    (drive / "drive.yaml").write_text(f"vehicle: test-vehicle-01\nsource: adtf\n{extra}")
    return drive


def test_resource_user_mapping_and_drive_mapping(tmp_path, monkeypatch):
    monkeypatch.delenv("BRIDGE_LAKE_ADTF_MAPPING", raising=False)
    landing = tmp_path / "landing"
    _drive(landing, "d-user")
    drive = _drive(landing, "d-own", "mapping: my_mapping.yaml\n")
    (drive / "my_mapping.yaml").write_text(RULE.format("a1"))
    user = tmp_path / "user.yaml"
    user.write_text(RULE.format("a0"))
    lake = Lake(str(tmp_path / "lake"))
    for drive_id, expect in (("d-user", 1.5), ("d-own", -2.0)):
        result = materialize_normalized(
            landing, tmp_path / "lake", drive_id, adtf_mapping=str(user)
        )
        assert result.success, drive_id
        imu = lake.read_partition("normalized", "imu", drive_id)
        assert imu.column("linear_acceleration_x").to_pylist() == [expect] * 20, drive_id


def test_drive_mapping_outside_the_drive_fails_the_run_naming_drive_and_key(tmp_path):
    landing = tmp_path / "landing"
    (tmp_path / "elsewhere.yaml").write_text(RULE.format("a0"))
    _drive(landing, "d-bad", "mapping: ../../elsewhere.yaml\n")
    result = materialize_normalized(landing, tmp_path / "lake", "d-bad")
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error, messages = failure.step_failure_data.error, []
    while error is not None:
        messages.append(error.message)
        error = error.cause
    message = "".join(messages)
    assert "drive d-bad: drive.yaml key 'mapping': " in message
    assert "leaves the drive folder" in message

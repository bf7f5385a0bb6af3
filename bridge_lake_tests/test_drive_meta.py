import pytest

from bridge_lake.drive_meta import DriveMeta, parse_drive_yaml
from bridge_lake.errors import DriveMetadataError


def test_round_trip_keeps_extra_keys():
    meta = DriveMeta(
        "car",
        "adtf",
        operator="bob",
        recorded_at="2024-05-14",
        tags=("rain",),
        extra={"sensor_set": "v2"},
    )
    assert parse_drive_yaml(meta.to_yaml()) == meta


def test_yaml_dates_become_iso_text():
    assert parse_drive_yaml("vehicle: v\nsource: nclt\nrecorded_at: 2012-01-08\n").recorded_at == (
        "2012-01-08"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("source: nclt\n", "'vehicle' is missing"),
        ("vehicle: v\n", "'source' is missing"),
        ("vehicle: v\nsource: ros\n", "expected one of nclt, adtf"),
        ("vehicle: [1]\nsource: nclt\n", "must be text"),
        ("vehicle: v\nsource: nclt\ntags: oops\n", "'tags' must be a list"),
        ("- a\n- b\n", "expected a mapping"),
        ("vehicle: : :\n", "not valid YAML"),
        ("vehicle: ' '\nsource: nclt\n", "'vehicle' is empty"),
        ("!!python/object:os.system {}\n", "not valid YAML"),
    ],
)
def test_invalid_drive_yaml_names_the_problem(text, message):
    with pytest.raises(DriveMetadataError, match=message) as err:
        parse_drive_yaml(text, where="d1/drive.yaml")
    assert "d1/drive.yaml" in str(err.value)


def test_oversized_drive_yaml_is_refused():
    with pytest.raises(DriveMetadataError, match="larger than"):
        parse_drive_yaml("notes: " + "x" * (1 << 20))

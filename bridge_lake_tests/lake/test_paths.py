import pytest

from bridge_lake.errors import BridgeLakeError, DriveIdError, LakePathError
from bridge_lake.lake import paths


@pytest.mark.parametrize("drive_id", ["d1", "nclt-2012-01-08", "A.b_c-9", "0" * 128, "0001"])
def test_valid_drive_ids(drive_id):
    assert paths.validate_drive_id(drive_id) == drive_id


@pytest.mark.parametrize(
    "drive_id",
    [
        "",
        "..",
        ".",
        ".hidden",
        "a/b",
        "../etc",
        "a b",
        "a,b",
        "a|b",
        "drive=x",
        "x" * 129,
        "-lead",
        "_lead",
        "a\\b",
        "a\nb",
        "é",
    ],
)
def test_invalid_drive_ids_are_typed_errors(drive_id):
    with pytest.raises(DriveIdError) as err:
        paths.validate_drive_id(drive_id)
    assert isinstance(err.value, BridgeLakeError)
    assert repr(drive_id) in str(err.value)


def test_partition_dir_is_hive_style():
    assert paths.partition_dir("/lake", "raw", "manifest", "d1") == "/lake/raw/manifest/drive=d1"
    assert paths.part_name(3) == "part-00003.parquet"


def test_partition_dir_rejects_bad_drive_layer_and_table():
    with pytest.raises(DriveIdError):
        paths.partition_dir("/lake", "raw", "manifest", "../../etc")
    with pytest.raises(LakePathError):
        paths.partition_dir("/lake", "../raw", "manifest", "d1")
    with pytest.raises(LakePathError):
        paths.partition_dir("/lake", "raw", "../manifest", "d1")


@pytest.mark.parametrize("bad", ["../x", "/abs", "a/../../b", "..", "."])
def test_safe_relative_rejects_escapes(bad):
    with pytest.raises(LakePathError):
        paths.safe_relative(bad)


def test_safe_relative_normalises():
    assert paths.safe_relative("a/./b//c") == "a/b/c"
    assert paths.safe_relative("a\\b") == "a/b"

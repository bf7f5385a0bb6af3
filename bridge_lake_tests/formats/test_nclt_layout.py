import pytest

from bridge_lake.formats.nclt.kinds import nclt_kind
from bridge_lake.formats.nclt.layout import NcltLayoutError, locate_session


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("gps.csv", "gps"),
        ("2012-01-08/gps_rtk_err.csv", "gps_rtk_err"),
        ("sensor_data/2012-01-08/odometry_cov_100hz.csv", "odometry_cov_100hz"),
        ("ground_truth/groundtruth_2012-01-08.csv", "groundtruth"),
        ("cov_2012-01-08.csv", "cov"),
        ("velodyne_data/2012-01-08/velodyne_hits.bin", "velodyne_hits"),
        ("2012-01-08/velodyne_sync/1326030975726043.bin", "velodyne_sync"),
        ("hokuyo_4m.bin", "hokuyo_4m"),
        ("images/2012-01-08/lb3/Cam3/1326030975726043.tiff", "lb3"),
        ("lb3/Cam6/1326030975726043.tiff", None),
        ("velodyne_sync/abc.bin", None),
        ("2012-01-08/README.txt", None),
        ("groundtruth.csv", None),
        ("notes/gps.txt", None),
        ("drive.yaml", None),
    ],
)
def test_nclt_kind(rel, kind):
    assert nclt_kind(rel) == kind


def touch(root, *rels):
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")


@pytest.mark.parametrize("prefix", ["", "2012-01-08/", "KIND/2012-01-08/"])
def test_locates_every_layout_and_records_missing_kinds(tmp_path, prefix):
    def at(kind_dir, rel):
        return prefix.replace("KIND", kind_dir) + rel

    touch(
        tmp_path,
        at("sensor_data", "gps.csv"),
        at("sensor_data", "ms25.csv"),
        at("velodyne_data", "velodyne_hits.bin"),
        at("velodyne_data", "velodyne_sync/200.bin"),
        at("velodyne_data", "velodyne_sync/100.bin"),
        at("images", "lb3/Cam0/100.tiff"),
        "ground_truth/groundtruth_2012-01-08.csv",
        "drive.yaml",
    )
    session = locate_session(tmp_path)
    assert session.date == "2012-01-08"
    assert sorted(session.files) == ["gps", "groundtruth", "ms25", "velodyne_hits"]
    assert [p.name for p in session.scans] == ["100.bin", "200.bin"]
    assert list(session.images) == [0]
    assert (
        "kvh" in session.missing
        and "hokuyo_30m" in session.missing
        and "gps" not in session.missing
    )


def test_two_copies_of_one_kind_or_two_sessions_are_errors(tmp_path):
    touch(tmp_path / "a", "gps.csv", "2012-01-08/gps.csv")
    with pytest.raises(NcltLayoutError, match="two files for gps"):
        locate_session(tmp_path / "a")
    touch(tmp_path / "b", "2012-01-08/gps.csv", "groundtruth_2012-01-15.csv")
    with pytest.raises(NcltLayoutError, match="several sessions"):
        locate_session(tmp_path / "b")

"""`scan()` and `connect()` on an `s3://` string honour BRIDGE_LAKE_S3_ENDPOINT (issue 33:
the deploy README offers them to analysts, and they ignored the endpoint, so on MinIO or
Ceph they asked AWS itself). Tested on moto's S3 server."""

from __future__ import annotations

import pytest

from bridge_lake.drive_meta import DriveMeta
from bridge_lake.lake import Lake
from bridge_lake.lake.query import connect, scan
from bridge_lake.manifest import DriveManifest


@pytest.fixture
def s3_lake(s3_bucket, s3_options, s3_server, monkeypatch) -> str:
    url = f"s3://{s3_bucket}/lake"
    lake = Lake(url, s3_options)
    for drive, vehicle in (("d1", "car-a"), ("d2", "car-b")):
        meta = DriveMeta(vehicle=vehicle, source="adtf")
        lake.write_partition(
            "raw", "drives", drive, DriveManifest(drive, [], meta, None).drive_table()
        )
    monkeypatch.setenv("BRIDGE_LAKE_S3_ENDPOINT", s3_server)
    return url


def test_scan_reads_an_s3_url_through_the_endpoint(s3_lake):
    got = scan("drives", lake=s3_lake, layer="raw").select("drive", "vehicle").collect()
    assert sorted(got.rows()) == [("d1", "car-a"), ("d2", "car-b")]
    one = scan("drives", lake=s3_lake, layer="raw", drives=["d2"]).collect()
    assert one["vehicle"].to_list() == ["car-b"]


def test_connect_reads_an_s3_url_through_the_endpoint(s3_lake):
    con = connect(s3_lake)
    rows = con.sql("SELECT drive, vehicle FROM raw_drives ORDER BY drive").fetchall()
    assert rows == [("d1", "car-a"), ("d2", "car-b")]


def test_without_the_endpoint_the_url_is_not_read_from_the_local_server(s3_lake, monkeypatch):
    """The test above passes because of the setting: without it, the lake is not found."""
    monkeypatch.delenv("BRIDGE_LAKE_S3_ENDPOINT")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nowhere: no real AWS call
    with pytest.raises(Exception):  # noqa: B017 - whatever s3fs raises for no server
        scan("drives", lake=s3_lake, layer="raw").collect()

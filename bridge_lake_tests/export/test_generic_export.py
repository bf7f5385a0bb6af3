"""Generic ADTF streams in exports (issue 13): the public recordings, which no shipped rule
maps, reach an MCAP as JSON topics, read back with the `mcap` reader (not ours)."""

from __future__ import annotations

import base64
import json
import shutil

import pytest
from mcap.reader import make_reader

from bridge_lake.calibrate.drive import calibrate_drive
from bridge_lake.export.exporter import ExportRequest, export_drive
from bridge_lake.export.mapping import TopicRule
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone
from bridge_lake.normalize.drive import normalize_drive
from bridge_lake_tests.support import register
from bridge_lake_tests.testdata import adtf_available

FILES = (
    "test_file_rec_newfile.dat",
    "test_file_rec_newfile.dat.description",
    "test_type_seek.dat",
    "adtfdat.hexpat.adtfdat",
)


@pytest.fixture(scope="module")
def real_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("generic")
    drive = root / "landing" / "real"
    drive.mkdir(parents=True)
    for name in FILES:
        if (path := adtf_available(name)) is not None:  # the GPL ns file may be absent
            shutil.copy(path, drive / name)
    (drive / "drive.yaml").write_text(
        "source: adtf\nvehicle: test-vehicle-01\nrecorded_at: 2024-05-14T09:00:00Z\n"
    )
    lake, landing = Lake(str(root / "lake")), LandingZone(str(root / "landing"))
    register(landing, lake, "real")
    result, published = normalize_drive(landing, lake, "real", "adtf")
    assert published and result.quarantined == 0
    _, published = calibrate_drive(lake, "real")
    assert published
    return lake, result, root


def test_generic_streams_as_json_topics_in_mcap(real_lake):
    lake, result, root = real_lake
    out = root / "real.mcap"
    export = export_drive(lake, "real", out)
    expected = {
        s.info.stream: s.rows_written
        for s in result.streams
        if s.info.target in ("generic", "payload")
    }
    seen: dict[str, list] = {}
    with out.open("rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            if channel.message_encoding != "json":
                continue
            assert schema.encoding == "jsonschema"
            props = json.loads(schema.data)["properties"]
            row = json.loads(message.data)
            assert set(row) <= set(props)
            seen.setdefault(row["stream"], []).append((message.log_time, row))
    assert {k: len(v) for k, v in seen.items()} == expected
    mytype = seen["test_serialize"]
    assert len(mytype) == 1000 and [r["testval1"] for _, r in mytype] == list(range(1000))
    assert [r["testval2"] for _, r in mytype] == list(range(1000))
    payload = seen["in2"]
    assert [base64.b64decode(r["data"]["base64"]) for _, r in payload] == [b"\x01"] * 7
    if adtf_available("adtfdat.hexpat.adtfdat"):
        assert export.topics["/adtf/substreams1/stream1"].messages == 45
        values = [r["value"] for _, r in seen["substreams1/stream1"]]
        assert values[:3] == [102, 103, 104] and all(isinstance(v, int) for v in values)


def test_bags_leave_json_topics_out_and_say_so(real_lake):
    lake, _, root = real_lake
    export = export_drive(lake, "real", root / "real.bag", ExportRequest(format="bag1"))
    assert "/adtf/test_serialize" in export.left_out
    assert not any(t.startswith("/adtf/") for t in export.topics)


@pytest.mark.parametrize(
    ("value", "topic"),
    [
        ("substreams1/stream1", "/adtf/substreams1/stream1"),
        ("stream1@test_history.dat", "/adtf/stream1_test_history_dat"),
        ("7up", "/adtf/_7up"),
    ],
)
def test_split_values_become_valid_ros_names(value, topic):
    rule = TopicRule("/adtf/{stream}", "json", "normalized/ddl_*", split_by="stream")
    assert rule.topic_for(value) == topic

"""`bridge-lake live` end to end: a recorder process writes a synthetic drive at real-time
pace (ADTF 3 and ADTF 2, one file or split parts), the bridge follows it, a real Foxglove
WebSocket client (`websockets`, foxglove.websocket.v1) receives it; the live MCAP is compared
with the offline export of the same drive through the lake."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcap_ros2.decoder import DecoderFactory

from bridge_lake.live.check import compare_counts
from bridge_lake.synth.adtf import write_adtf_drive
from bridge_lake.synth.record import record
from bridge_lake_tests.live.live_support import (
    DRIVE_YAML,
    ENV,
    bridge,
    listen,
    mcap_messages,
    offline_export,
    recorder,
)

NOT_LIVE = {"/tf"}  # fitted poses: the calibrated layer over the whole drive


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    [src] = write_adtf_drive(tmp_path_factory.mktemp("src"), minutes=0.05, seed=8)
    return src


def _run(tmp_path: Path, src: Path, follow: Path, record_to: Path, *args: str, rec_args=()):
    """Bridge first (waits for the file), client, then the recorder at 1x."""
    proc, url = bridge(
        follow, "--out", str(tmp_path / "live.mcap"), "--idle-s", "2", "--json",
        str(tmp_path / "s.json"), *args,
    )  # fmt: skip
    got, thread = listen(url)
    time.sleep(0.3)
    writer = recorder(src, record_to, *rec_args)
    assert writer.wait(60) == 0
    out, err = proc.communicate(timeout=60)
    thread.join(10)  # type: ignore[attr-defined]
    return (
        proc.returncode,
        out.decode(),
        err.decode(),
        got,
        json.loads((tmp_path / "s.json").read_text()),
    )


def _check_against_offline(tmp_path: Path, files: list[Path], got: dict) -> None:
    live, complete = mcap_messages(tmp_path / "live.mcap")
    assert complete
    offline, _ = mcap_messages(offline_export(tmp_path / "off", files, tmp_path / "off.mcap"))
    assert set(offline) - NOT_LIVE == set(live)
    for topic, messages in live.items():
        # master clock on the epoch (0x0500 / µs epoch chunk times): payloads agree too
        assert messages == offline[topic], topic
        assert got[topic] == messages, topic  # the WebSocket client: all, in order, same bytes
        times = [t for t, _ in messages]
        assert times == sorted(times)
    check = compare_counts(tmp_path / "live.mcap", tmp_path / "off.mcap")
    assert check.ok and check.not_live == ["/tf"]


def test_adtf3_real_time_reaches_the_client_and_equals_the_offline_export(tmp_path, source):
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "drive.yaml").write_text(DRIVE_YAML)
    rc, out, err, got, summary = _run(
        tmp_path, source, drive / "rec.dat", drive / "rec.dat", "--catalog-from", str(source)
    )
    assert rc == 0, out + err
    assert summary["end"] == "rec.dat closed"
    assert summary["catalog_differences"] == [] and summary["quarantine"] == []
    assert summary["lag"]["p99_ms"] is not None
    _check_against_offline(tmp_path, [drive / "rec.dat"], got)


def test_adtf2_real_time_with_the_catalog_of_a_finished_recording(tmp_path, source):
    catalog = tmp_path / "earlier.dat"
    record(source, catalog, speed=0, version=0x0201)  # the same car's finished recording
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "drive.yaml").write_text(DRIVE_YAML)
    rc, out, err, got, summary = _run(
        tmp_path, source, drive / "rec.dat", drive / "rec.dat", "--catalog-from", str(catalog),
        rec_args=("--version", "0x0201"),
    )  # fmt: skip
    assert rc == 0, out + err
    assert summary["catalog_differences"] == []
    assert "/sensor/imu/data" in summary["topics"]  # decoded by the catalog's DDL sidecar
    _check_against_offline(tmp_path, [drive / "rec.dat"], got)


def test_adtf3_without_catalog_publishes_provisional_names_and_reports_the_real_ones(
    tmp_path, source
):
    rc, out, err, got, summary = _run(tmp_path, source, tmp_path / "r.dat", tmp_path / "r.dat")
    assert rc == 1, out + err  # the camera has no topic without its name: said, exit 1
    assert summary["provisional_names"] == [f"stream_{i}" for i in range(1, 7)]
    assert (
        "stream 1: name was 'stream_1' live, 'front_camera' in the file"
        in (summary["catalog_differences"])
    )
    assert summary["unpublished"] == {"stream_1 (camera_frames)": 45}
    assert summary["topics"]["/sensor/imu/data"]["messages"] == 300  # mapped by its DDL struct
    assert sum(len(v) for v in got.values()) == summary["messages"]


def test_a_split_recording_becomes_one_live_stream(tmp_path, source):
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "drive.yaml").write_text(DRIVE_YAML)
    rc, out, err, got, summary = _run(
        tmp_path, source, drive, drive / "rec.dat", "--catalog-from", str(source),
        rec_args=("--parts", "2"),
    )  # fmt: skip
    assert rc == 0, out + err
    assert [Path(p).name for p in summary["parts"]] == ["rec.dat", "rec_001.dat"]
    assert summary["topics"]["/sensor/imu/data"]["messages"] == 300
    _check_against_offline(tmp_path, [drive / "rec.dat", drive / "rec_001.dat"], got)


def test_sigkill_mid_recording_leaves_an_mcap_readers_open(tmp_path, source):
    target = tmp_path / "rec.dat"
    proc, _ = bridge(target, "--out", str(tmp_path / "live.mcap"), "--catalog-from", str(source))
    writer = recorder(source, target)
    time.sleep(2.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    writer.wait(60)
    messages, complete = mcap_messages(tmp_path / "live.mcap")
    assert not complete and sum(map(len, messages.values())) > 100
    from mcap.exceptions import McapError
    from mcap.reader import NonSeekingReader

    with (tmp_path / "live.mcap").open("rb") as f:
        reader = NonSeekingReader(f, decoder_factories=[DecoderFactory()])
        n = 0
        try:
            for _, channel, _, ros in reader.iter_decoded_messages(
                topics=["/sensor/imu/data"], log_time_order=False
            ):
                assert channel.topic == "/sensor/imu/data" and ros.header.frame_id == "imu"
                n += 1
        except (McapError, struct.error):  # the file ends inside a record: the bridge was killed
            pass
    assert n == len(messages["/sensor/imu/data"]) > 0
    check = compare_counts(tmp_path / "live.mcap", tmp_path / "live.mcap")
    assert not check.live_complete
    # issue 25's recover rewrites it into an indexed file with every whole message
    cmd = [sys.executable, "-m", "bridge_lake.cli", "recover", str(tmp_path / "live.mcap")]
    done = subprocess.run([*cmd, str(tmp_path / "rec.mcap")], env=ENV, capture_output=True)
    assert done.returncode == 1, done.stdout.decode() + done.stderr.decode()  # was damaged
    recovered, complete = mcap_messages(tmp_path / "rec.mcap")
    assert complete
    for topic, kept in messages.items():
        assert recovered[topic][: len(kept)] == kept


@pytest.mark.parametrize("case", ["missing", "not_adtf"])
def test_bad_paths_end_with_one_line_and_exit_2(tmp_path, case):
    target = tmp_path / "rec.dat"
    if case == "not_adtf":
        target.write_bytes(b"\x89PNG" + bytes(5000))
    cmd = [sys.executable, "-m", "bridge_lake.cli", "live", str(target), "--port", "0"]
    done = subprocess.run([*cmd, "--appear-s", "0.5"], env=ENV, capture_output=True, timeout=30)
    assert done.returncode == 2
    err = done.stderr.decode().strip().splitlines()
    assert len(err) == 1 and str(target) in err[0] and "Traceback" not in err[0]
    if case == "not_adtf":
        assert "offset 0" in err[0] and "not an ADTF recording" in err[0]
    else:
        assert "did not appear within 0.5 s" in err[0]


def test_a_damaged_chunk_is_quarantined_and_the_rest_published(tmp_path, source):
    import struct

    from bridge_lake.formats.adtf import open_dat

    rec = tmp_path / "clean.dat"
    record(source, rec, speed=0)
    with open_dat(rec) as f:
        offsets = [s.offset for s in f.samples()]
    victim = offsets[len(offsets) // 2]
    data = bytearray(rec.read_bytes())
    struct.pack_into("<H", data, victim + 20, 999)  # stream id outside 1..512
    target = tmp_path / "rec.dat"
    proc, _ = bridge(target, "--idle-s", "1", "--catalog-from", str(source), "--json",
                     str(tmp_path / "s.json"))  # fmt: skip
    target.write_bytes(bytes(data))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, out.decode() + err.decode()
    summary = json.loads((tmp_path / "s.json").read_text())
    [q] = summary["quarantine"]
    assert f"offset {victim}" in q and "stream id 999" in q
    assert summary["samples"] == len(offsets) - 1


def test_a_rewritten_file_restarts_the_bridge_and_says_so(tmp_path, source):
    first, second = tmp_path / "a.dat", tmp_path / "b.dat"
    record(source, first, speed=0)
    record(source, second, speed=0, version=0x0400)
    target = tmp_path / "rec.dat"
    proc, _ = bridge(target, "--idle-s", "1.5", "--json", str(tmp_path / "s.json"))
    target.write_bytes(first.read_bytes()[:500_000])
    time.sleep(0.5)
    target.write_bytes(second.read_bytes())
    out, err = proc.communicate(timeout=60)
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["restarts"] == 1, out.decode() + err.decode()
    assert any("truncated or rewritten" in n for n in summary["notices"])
    assert "restarts (file rewritten)" in out.decode()


def test_a_client_joining_late_still_gets_tf_static(tmp_path, source):
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "drive.yaml").write_text(DRIVE_YAML)
    from bridge_lake.formats.adtf import open_dat

    with open_dat(source) as f:
        offsets = [x.offset for x in f.samples()]
    cut = offsets[len(offsets) // 2] + 40  # the recorder stalls inside a chunk
    (drive / "rec.dat").write_bytes(source.read_bytes()[:cut])
    proc, url = bridge(drive / "rec.dat", "--idle-s", "3", "--catalog-from", str(source))
    time.sleep(1.5)  # everything published before the client connects
    got, thread = listen(url)
    out, err = proc.communicate(timeout=60)
    thread.join(10)
    assert proc.returncode == 1, out.decode() + err.decode()  # the cut chunk: said, exit 1
    assert "did not grow for 3 s" in out.decode()
    assert f"offset {cut - 40}: 40 bytes after the last complete chunk" in out.decode()
    assert len(got["/tf_static"]) == 1  # latched: replayed on subscribe
    assert not got["/sensor/imu/data"]  # the rest was sent before it came


def test_without_catalog_a_split_recordings_next_part_takes_the_names_of_the_closed_one(
    tmp_path, source
):
    """No --catalog-from: part 1 is published under provisional names until it closes; part 2
    starts with part 1's final catalog, so its streams are published under their real names
    and the summary says where the names came from. The camera, decoded to Images, starts at
    part 2's first key frame: every one of its 45 frames is published or counted."""
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "drive.yaml").write_text(DRIVE_YAML)
    rc, out, err, _, summary = _run(
        tmp_path, source, drive, drive / "rec.dat", rec_args=("--parts", "2")
    )
    assert rc == 1, out + err  # part 1's camera had no topic: said, exit 1
    assert [Path(p).name for p in summary["parts"]] == ["rec.dat", "rec_001.dat"]
    assert (
        "rec_001.dat: stream names from the catalog of rec.dat (the previous part, closed)"
        in (summary["notices"])
    )
    assert summary["provisional_names"] == [f"stream_{i}" for i in range(1, 7)]  # part 1 only
    topic = "/sensor/camera_front/image_raw"
    published = summary["topics"][topic]["messages"]
    unpublished = summary["unpublished"]
    before_key = unpublished[f"front_camera (camera_frames) before its first key frame, {topic}"]
    assert published > 0 and before_key > 0
    assert unpublished["stream_1 (camera_frames)"] + before_key + published == 45
    live, _ = mcap_messages(tmp_path / "live.mcap")
    assert len(live[topic]) == published
    assert len(live["/vehicle/can_0"]) + len(live["/vehicle/can_1"]) > 0  # real names


def test_catching_up_on_a_finished_recording_writes_the_mcap_in_time_order(tmp_path, source):
    """The first poll of a recording already written takes all of it; its MCAP was written
    topic by topic, going back in time by the recording's length between topics."""
    from mcap.reader import make_reader

    done = tmp_path / "done.dat"
    record(source, done, speed=0)
    out = str(tmp_path / "live.mcap")
    proc, _ = bridge(done, "--catalog-from", str(source), "--out", out, "--idle-s", "1")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out.decode() + err.decode()
    with (tmp_path / "live.mcap").open("rb") as f:
        reader = make_reader(f)
        times = [m.log_time for _, _, m in reader.iter_messages(log_time_order=False)]
    assert len({c.topic for c in reader.get_summary().channels.values()}) > 3
    assert len(times) > 1000 and times == sorted(times)

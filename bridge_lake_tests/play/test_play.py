"""`bridge-lake play` against a real WebSocket client speaking the Foxglove protocol.

Files are written with libraries we did not write (mcap's Writer, rosbags' bag writers);
what arrives is compared with what their readers read back.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time

import pytest

from bridge_lake_tests.play.support import (
    NS,
    T0,
    Client,
    Player,
    by_topic,
    cli,
    write_bag1,
    write_bag2,
    write_mcap,
)


def mcap_truth(path):
    """(topic, log time, payload) of every message in file order, by the mcap library."""
    from mcap.reader import make_reader

    with path.open("rb") as f:
        return [
            (c.topic, m.log_time, m.data)
            for _, c, m in make_reader(f).iter_messages(log_time_order=False)
        ]


def bag_truth(path):
    from rosbags.highlevel import AnyReader

    with AnyReader([path]) as r:
        return [(c.topic, t, bytes(raw)) for c, t, raw in r.messages()]


async def _receive_all(player: Player) -> Client:
    client = Client(player.url)
    await client.connect()
    await client.closed()
    return client


def receive_all(*args: str) -> tuple[Client, str]:
    player = Player(*args, "--max-speed", "--wait-for-client")
    client = asyncio.run(_receive_all(player))
    code, out, err = player.finish()
    assert code == 0, err
    assert err == ""
    return client, out


def same_messages(client: Client, truth) -> None:
    got = [(m.topic, m.log_time, m.data) for m in client.messages]
    assert len(got) == len(truth)
    # per topic: every message byte-identical, in the file's order
    want_by, got_by = {}, {}
    for t in truth:
        want_by.setdefault(t[0], []).append(t)
    for g in got:
        got_by.setdefault(g[0], []).append(g)
    assert {k: len(v) for k, v in got_by.items()} == {k: len(v) for k, v in want_by.items()}
    for topic, items in want_by.items():
        assert got_by[topic] == items, topic


def test_mcap_every_message_arrives_byte_identical_in_order(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=2.0)
    client, out = receive_all(str(path))
    truth = mcap_truth(path)
    same_messages(client, truth)
    assert [m.log_time for m in client.messages] == [t for _, t, _ in truth]  # file order
    by_name = {c["topic"]: c for c in client.channels.values()}
    assert by_name["/imu"]["schemaName"] == "sensor_msgs/msg/Imu"
    assert by_name["/imu"]["encoding"] == "cdr"
    assert by_name["/imu"]["schemaEncoding"] == "ros2msg"
    assert "geometry_msgs/Quaternion orientation" in by_name["/imu"]["schema"]
    assert by_name["/status"]["encoding"] == "json"
    assert by_name["/status"]["schemaEncoding"] == "jsonschema"
    assert "rangedPlayback" in client.info["capabilities"]
    assert client.info["dataStartTime"] == {"sec": T0 // NS, "nsec": 0}
    assert client.times, "the time capability broadcasts the playback clock"
    assert "/chatter" in out and "total" in out  # the summary table


def test_an_mcap_of_overlapping_chunks_plays_in_log_time_order(tmp_path):
    """The live bridge's MCAPs hold each poll stream by stream; in file order the player
    sent messages up to 7 s late. The oracle: the mcap library's log_time_order."""
    from mcap.reader import make_reader
    from mcap.writer import CompressionType, Writer

    path = tmp_path / "overlap.mcap"
    with path.open("wb") as f:
        w = Writer(f, compression=CompressionType.ZSTD, chunk_size=2048)
        w.start(profile="", library="test")
        sid = w.register_schema("Blob", "jsonschema", b"{}")
        for k, topic in enumerate(("/a", "/b")):
            cid = w.register_channel(topic, "json", sid)
            for i in range(300):
                t = T0 + (2 * i + k) * 1_000_000
                w.add_message(cid, t, json.dumps({"i": i, "pad": "x" * 40}).encode(), t)
        w.finish()
    with path.open("rb") as f:
        truth = [
            (c.topic, m.log_time, m.data)
            for _, c, m in make_reader(f).iter_messages(log_time_order=True)
        ]
    client, _ = receive_all(str(path))
    assert [(m.topic, m.log_time, m.data) for m in client.messages] == truth


def test_foreign_bag1_bz2_and_bag2_sqlite3_play(tmp_path):
    bag1 = write_bag1(tmp_path / "a.bag", compression="bz2")
    client, _ = receive_all(str(bag1))
    same_messages(client, bag_truth(bag1))
    ch = {c["topic"]: c for c in client.channels.values()}["/imu"]
    assert (ch["encoding"], ch["schemaEncoding"], ch["schemaName"]) == (
        "ros1",
        "ros1msg",
        "sensor_msgs/Imu",
    )
    bag2 = write_bag2(tmp_path / "b2")
    client, _ = receive_all(str(bag2))
    same_messages(client, bag_truth(bag2))
    assert {c["encoding"] for c in client.channels.values()} == {"cdr"}


def test_report_json_counts_and_timing(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=1.0)
    report = tmp_path / "r.json"
    player = Player(str(path), "--wait-for-client", "--report", str(report))
    client = asyncio.run(_receive_all(player))
    code, _out, _ = player.finish()
    assert code == 0
    doc = json.loads(report.read_text())
    truth = by_topic_counts(mcap_truth(path))
    assert {k: v["messages"] for k, v in doc["topics"].items()} == truth
    assert doc["total"]["messages"] == len(client.messages)
    assert doc["total"]["send_error_p50_us"] is not None
    assert doc["cpu_percent_of_one_core"] is not None and doc["rss_max_mb"] >= doc["rss_min_mb"]
    assert 0.9 < doc["wall_s"] < 5  # 1 s of data at 1x
    spread = client.messages[-1].at - client.messages[0].at
    assert 0.8 < spread < 3


def by_topic_counts(truth):
    out: dict[str, int] = {}
    for topic, _, _ in truth:
        out[topic] = out.get(topic, 0) + 1
    return out


async def _controls(url: str) -> Client:
    c = Client(url)
    await c.connect()
    await asyncio.sleep(0.5)
    assert not [m for m in c.messages if m.topic != "/tf_static"], "--paused sends nothing"
    await c.control(True, rid="play")
    await asyncio.sleep(0.6)
    assert len(c.messages) > 20
    await c.control(False, rid="pause")
    await asyncio.sleep(0.2)  # what was in flight
    n = len(c.messages)
    await asyncio.sleep(0.6)
    assert len(c.messages) == n, "nothing arrives while paused"
    seek = T0 + 3 * NS
    await c.control(True, speed=2.0, seek_ns=seek, rid="seek")
    await asyncio.sleep(0.1)
    after = [m for m in c.messages[n:] if m.topic not in ("/tf_static",)]
    assert after and after[0].log_time >= seek, "the first message after a seek is at/after it"
    await asyncio.sleep(0.9)
    later = [m for m in c.messages[n:] if m.topic == "/chatter"]
    # at 2x, 0.9 s of wall time carries about 1.8 s of data
    span = (later[-1].log_time - later[0].log_time) / NS
    wall = later[-1].at - later[0].at
    assert 1.5 < span / wall < 2.6
    assert any(s[4] == "seek" and s[3] and s[2] == 2.0 for s in c.states)
    assert any(s[4] == "pause" and s[0] == 1 for s in c.states)
    assert any(m.topic == "/tf_static" for m in c.messages[n:]), "latched again after a seek"
    await c.close()
    return c


def test_play_pause_seek_speed_from_the_client(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=6.0)
    player = Player(str(path), "--paused")
    asyncio.run(_controls(player.url))
    player.proc.send_signal(signal.SIGINT)
    code, out, err = player.finish()
    assert code == 130 and "Traceback" not in err
    assert "interrupted" in out and "1 seeks" in out  # Ctrl-C still prints the summary


async def _one_controls_one_watches(url: str) -> tuple[Client, Client]:
    watcher = Client(url)
    await watcher.connect()
    controller = Client(url)
    await controller.connect()
    await controller.control(True, rid="play")
    await asyncio.sleep(0.8)
    await controller.control(False, rid="pause")
    await asyncio.sleep(0.3)
    await controller.close()
    await watcher.close()
    return controller, watcher


def test_playback_state_goes_only_to_the_client_that_asked(tmp_path):
    """Playback State (opcode 5) answers a Playback Control Request: a client that only
    subscribed gets the messages but no state frame (issue 31 item 5; the old server sent
    every state to every client)."""
    path = write_mcap(tmp_path / "a.mcap", seconds=6.0)
    player = Player(str(path), "--paused")
    controller, watcher = asyncio.run(_one_controls_one_watches(player.url))
    player.proc.send_signal(signal.SIGINT)
    code, _out, err = player.finish()
    assert code == 130 and "Traceback" not in err
    assert {s[4] for s in controller.states} >= {"play", "pause"}
    assert any(m.topic == "/chatter" for m in watcher.messages), "the watcher is served"
    assert watcher.states == [], "no opcode 5 reaches a client that never asked"


async def _join_and_leave(url: str) -> tuple[Client, Client]:
    a = Client(url)
    await a.connect()
    await asyncio.sleep(0.7)
    b = Client(url)
    await b.connect()
    await asyncio.sleep(0.3)
    a.ws.transport.abort()  # gone mid-play, without a close handshake
    await b.closed(30)
    return a, b


def test_disconnect_does_not_stall_and_late_joiner_gets_tf_static(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=2.0)
    player = Player(str(path), "--wait-for-client")
    t = time.monotonic()
    _, b = asyncio.run(_join_and_leave(player.url))
    code, _out, err = player.finish()
    assert code == 0, err
    assert time.monotonic() - t < 6  # 2 s of data (+1 s start) was not held up
    got = by_topic(b.messages)
    assert "/tf_static" in got and got["/tf_static"][0].log_time == T0
    assert got["/chatter"][-1].log_time == max(
        t for tp, t, _ in mcap_truth(path) if tp == "/chatter"
    )


def test_faults_on_the_fly_match_the_scene_variant(tmp_path):
    """Seeded choices as `scenes` makes them: the variant file written by `inject` holds
    exactly what arrives (header stamps moved by clock_offset included)."""
    from bridge_lake.scenes.faults import inject, parse_compact

    path = write_mcap(tmp_path / "a.mcap", seconds=2.0)
    spec = "/chatter:drop=5%,imu:delay=30ms,/imu:clock_offset=+5ms"
    report = tmp_path / "r.json"
    client, _ = receive_all(
        str(path),
        "--topics",
        "/chatter",
        "/imu",
        "/tf_static",
        "--fault",
        spec,
        "--seed",
        "7",
        "--report",
        str(report),
    )
    ros_only = tmp_path / "ros.mcap"
    _without_json(path, ros_only)
    variant = inject(ros_only, tmp_path / "v.mcap", parse_compact(spec), seed=7)
    truth = mcap_truth(tmp_path / "v.mcap")
    got = by_topic(client.messages)
    want: dict[str, list] = {}
    for topic, t, data in truth:
        want.setdefault(topic, []).append((t, data))
    for topic, items in want.items():
        assert [(m.log_time, m.data) for m in got[topic]] == items, topic
    doc = json.loads(report.read_text())
    assert doc["faults_injected"] == len(variant.faults) == doc["faults_planned"]
    kinds = {f["kind"] for f in doc["faults"]}
    assert kinds == {"drop", "delay", "clock_offset"}


def _without_json(src, dst):
    """The MCAP's ROS topics only (scene variants are ROS 1 / CDR scenes)."""
    from mcap.reader import make_reader
    from mcap.writer import Writer

    with src.open("rb") as f, dst.open("wb") as g:
        r = make_reader(f)
        summary = r.get_summary()
        w = Writer(g)
        w.start(profile="ros2", library="test")
        ids = {}
        for cid, c in summary.channels.items():
            if c.message_encoding != "cdr":
                continue
            s = summary.schemas[c.schema_id]
            sid = w.register_schema(s.name, s.encoding, s.data)
            ids[cid] = w.register_channel(c.topic, c.message_encoding, sid, dict(c.metadata))
        f.seek(0)
        for _, c, m in make_reader(f).iter_messages(log_time_order=False):
            if c.id in ids:
                w.add_message(ids[c.id], m.log_time, m.data, m.publish_time, m.sequence)
        w.finish()


# --- bad input: one line, exit 2, no traceback --------------------------------------------


def one_line_error(result, *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bridge-lake: error:")
    for n in needles:
        assert n in lines[0], lines[0]


def test_missing_file(tmp_path):
    one_line_error(cli(str(tmp_path / "nope.mcap")), str(tmp_path / "nope.mcap"))


def test_unreadable_file(tmp_path):
    path = tmp_path / "x.mcap"
    path.write_bytes(b"not a recording at all")
    one_line_error(cli(str(path)), str(path))


def test_damaged_mcap_chunk_names_path_and_offset(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=2.0)
    from mcap.reader import make_reader

    with path.open("rb") as f:
        chunks = sorted(
            make_reader(f).get_summary().chunk_indexes, key=lambda c: c.chunk_start_offset
        )
    bad = chunks[len(chunks) // 2]
    data = bytearray(path.read_bytes())
    mid = bad.chunk_start_offset + bad.chunk_length - 40
    data[mid : mid + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))
    port = _free_port()
    result = cli(str(path), "--max-speed", "--port", str(port))
    one_line_error(result, str(path), f"offset {bad.chunk_start_offset}")
    with socket.socket() as s:  # the server was stopped: its port is free again
        s.bind(("127.0.0.1", port))


def test_damaged_bag_record_names_path_and_offset(tmp_path):
    path = write_bag1(tmp_path / "a.bag", seconds=2.0, compression="bz2")
    from rosbags.rosbag1 import Reader

    with Reader(path) as r:
        chunk = sorted(r.chunks.items())[-1]
    data = bytearray(path.read_bytes())
    start = chunk[1].datapos + 20
    data[start : start + 32] = b"\x00" * 32
    path.write_bytes(bytes(data))
    one_line_error(cli(str(path), "--max-speed"), str(path), f"offset {chunk[0]}:")


def test_an_error_before_anything_was_sent_is_said_once(tmp_path, monkeypatch):
    """No ROS master: one line on stderr and no empty table with `CPU None %` on stdout (the
    error was printed on both)."""
    path = write_mcap(tmp_path / "a.mcap", seconds=1.0)
    monkeypatch.setenv("ROS_MASTER_URI", f"http://127.0.0.1:{_free_port()}")
    result = cli(str(path), "--ros1", "--topics", "/chatter", "--report", str(tmp_path / "r.json"))
    one_line_error(result, "cannot reach the ROS master")
    assert result.stdout == ""
    assert json.loads((tmp_path / "r.json").read_text())["outcome"] == "error"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_port_in_use(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=0.2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        one_line_error(cli(str(path), "--port", str(port)), f"127.0.0.1:{port}")


def test_topic_glob_matching_nothing_lists_topics(tmp_path):
    path = write_mcap(tmp_path / "a.mcap", seconds=0.2)
    one_line_error(cli(str(path), "--topics", "/nope*"), "/nope*", "/chatter", "/imu")


@pytest.mark.parametrize("rate", ["0", "-1"])
def test_rate_not_positive(tmp_path, rate):
    path = write_mcap(tmp_path / "a.mcap", seconds=0.2)
    one_line_error(cli(str(path), "--rate", rate), "--rate")


async def _until(url: str, count: int) -> Client:
    c = Client(url)
    await c.connect()
    for _ in range(600):
        if len(c.messages) >= count:
            break
        await asyncio.sleep(0.05)
    await c.close()
    return c


def test_window_and_loop(tmp_path):
    """--start/--end keep the window (the latched /tf_static before it still comes first);
    --loop starts over until Ctrl-C, which still prints the summary."""
    path = write_mcap(tmp_path / "a.mcap", seconds=2.0)
    window = [(tp, t, d) for tp, t, d in mcap_truth(path) if T0 + NS // 2 <= t <= T0 + NS]
    player = Player(str(path), "--start", "0.5", "--end", "1.0", "--loop", "--max-speed",
                    "--wait-for-client")  # fmt: skip
    c = asyncio.run(_until(player.url, 3 * len(window) + 1))
    player.proc.send_signal(signal.SIGINT)
    code, out, err = player.finish()
    assert code == 130 and "Traceback" not in err, err
    assert c.messages[0].topic == "/tf_static" and c.messages[0].log_time == T0
    played = [(m.topic, m.log_time, m.data) for m in c.messages[1:]]
    assert played[: len(window)] == window
    assert played[len(window) : 2 * len(window)] == window  # the second round
    assert "interrupted" in out


def test_truncated_mcap_names_the_offset(tmp_path):
    """A recording cut short (no summary, no footer): one line with the offset of the cut."""
    path = write_mcap(tmp_path / "a.mcap", seconds=1.0)
    data = path.read_bytes()
    cut = len(data) // 2
    path.write_bytes(data[:cut])
    result = cli(str(path), "--max-speed")
    one_line_error(result, str(path), "offset")

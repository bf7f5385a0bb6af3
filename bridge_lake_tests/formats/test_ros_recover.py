"""Issue 25: MCAP, ROS 1 bag and ROS 2 bag files cut at many offsets are recovered to exactly
the messages of their complete chunks (plus a prefix of a cut compressed chunk), checked
against the intact file read by readers we did not write (mcap reader, rosbags)."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from mcap.reader import make_reader

from bridge_lake.formats.ros.bag1_recover import recover_bag1, scan_bag1
from bridge_lake.formats.ros.bag2_recover import recover_bag2, scan_bag2
from bridge_lake.formats.ros.damage import CRC, CUT, NO_INDEX
from bridge_lake.formats.ros.mcap_recover import recover_mcap, scan_mcap
from bridge_lake_tests.formats.ros_files import (
    any_messages,
    bag1_chunks,
    mcap_chunks,
    mcap_messages,
    write_bag1,
    write_bag2,
    write_mcap,
)


def _cut(src: Path, at: int, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes()[:at])
    return dst


def _mcap_cuts(path: Path) -> dict[str, int]:
    """Offsets inside each kind of structure of an intact MCAP, from its own summary."""
    with path.open("rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        footer = reader.get_footer() if hasattr(reader, "get_footer") else None
    chunks = sorted(summary.chunk_indexes, key=lambda c: c.chunk_start_offset)
    mid = chunks[len(chunks) // 2]
    size = path.stat().st_size
    summary_start = footer.summary_start if footer else size - 200
    return {
        "record header of a chunk": mid.chunk_start_offset + 4,
        "chunk fields": mid.chunk_start_offset + 30,
        "compressed data": mid.chunk_start_offset + mid.chunk_length // 2,
        "end of compressed data": mid.chunk_start_offset + mid.chunk_length - 3,
        "message index": mid.chunk_start_offset + mid.chunk_length + 5,
        "first chunk": chunks[0].chunk_start_offset + 40,
        "last chunk": chunks[-1].chunk_start_offset + chunks[-1].chunk_length - 100,
        "summary": summary_start + 17,
        "footer": size - 20,
        "closing magic": size - 3,
    }


@pytest.fixture(scope="module")
def mcaps(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mcap")
    return {c: write_mcap(root / f"{c}.mcap", c) for c in ("zstd", "lz4", "none")}


@pytest.mark.parametrize("compression", ["zstd", "lz4", "none"])
def test_mcap_cut_anywhere_keeps_exactly_the_complete_chunks(mcaps, compression, tmp_path):
    src = mcaps[compression]
    chunks = mcap_chunks(src)
    whole = mcap_messages(src)
    assert [m for c in chunks for m in c.messages] == whole
    for where, at in _mcap_cuts(src).items():
        cut = _cut(src, at, tmp_path / "cut.mcap")
        out = tmp_path / f"out-{at}.mcap"
        report = recover_mcap(cut, out)
        got = mcap_messages(out)
        complete = [m for c in chunks if c.end <= at for m in c.messages]
        torn = next((c for c in chunks if c.start < at < c.end), None)
        k = report.partial_chunk_messages
        assert got[: len(complete)] == complete, where
        assert got[len(complete) :] == (torn.messages[:k] if torn else []), where
        assert report.kept == len(got)
        if torn is not None:
            assert report.damages[0].kind == CUT and report.damages[0].offset == torn.start, where
            assert report.valid_end == torn.start
            text = report.damages[0].message
            if at - torn.start >= 9:
                assert f"ends inside chunk {chunks.index(torn)} at offset {torn.start}" in text
            else:
                assert f"ends inside a record header at offset {torn.start}" in text
        else:
            assert report.damages and report.damages[0].kind in (CUT, NO_INDEX), where
        assert Counter(any_messages(out)) == Counter(got)  # rosbags reads it too


def test_mcap_uncompressed_cut_inside_a_message_keeps_the_whole_records_before_it(tmp_path):
    src = write_mcap(tmp_path / "big.mcap", "none", chunk_size=1 << 20)
    chunks = mcap_chunks(src)
    torn = chunks[1]
    at = (torn.start + torn.end) // 2 + 7
    report = recover_mcap(_cut(src, at, tmp_path / "cut.mcap"), tmp_path / "out.mcap")
    got = mcap_messages(tmp_path / "out.mcap")
    assert report.partial_chunk_messages > 0
    assert got == chunks[0].messages + torn.messages[: report.partial_chunk_messages]
    # every message whose record lies before the cut is kept: the next one would not fit
    assert report.partial_chunk_messages < len(torn.messages)


def test_mcap_zstd_cut_late_in_a_big_chunk_keeps_its_decompressible_prefix(tmp_path):
    src = write_mcap(tmp_path / "big.mcap", "zstd", chunk_size=2 << 20, n=3000)
    chunks = mcap_chunks(src)
    at = chunks[0].end - 2000
    report = recover_mcap(_cut(src, at, tmp_path / "cut.mcap"), tmp_path / "out.mcap")
    got = mcap_messages(tmp_path / "out.mcap")
    assert 0 < report.partial_chunk_messages < len(chunks[0].messages)
    assert got == chunks[0].messages[: report.partial_chunk_messages]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_mcap_crc_error_mid_file_drops_only_its_chunk(mcaps, compression, tmp_path):
    src = mcaps[compression]
    chunks = mcap_chunks(src)
    bad = chunks[3]
    data = bytearray(src.read_bytes())
    data[bad.end - 50] ^= 0xFF  # inside the chunk's records (compressed or not)
    damaged = tmp_path / "bad.mcap"
    damaged.write_bytes(bytes(data))
    report = recover_mcap(damaged, tmp_path / "out.mcap")
    got = mcap_messages(tmp_path / "out.mcap")
    assert got == [m for c in chunks if c is not bad for m in c.messages]
    (damage,) = report.damages
    assert damage.chunk == 3 and damage.offset == bad.start
    if compression == "none":
        assert damage.kind == CRC
        assert sum(t.dropped for t in report.topics.values()) == len(bad.messages)
    assert report.dropped_chunks == 1


def test_mcap_recover_is_idempotent(mcaps, tmp_path):
    for src in mcaps.values():
        first, second = tmp_path / "1.mcap", tmp_path / "2.mcap"
        report = recover_mcap(src, first)
        assert report.ok and report.indexed
        assert mcap_messages(first) == mcap_messages(src)
        recover_mcap(first, second)
        assert first.read_bytes() == second.read_bytes()
        first.unlink()
        second.unlink()


def test_scan_of_an_intact_mcap_reports_nothing(mcaps):
    report = scan_mcap(mcaps["zstd"])
    assert report.ok and report.indexed and report.lost_bytes == 0
    assert report.kept == len(mcap_messages(mcaps["zstd"]))


# -- ROS 1 bags ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bags(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bag1")
    return {c: write_bag1(root / f"{c}.bag", c) for c in ("lz4", "bz2", "none")}


def _bag_cuts(path: Path, chunks) -> dict[str, int]:
    mid = chunks[len(chunks) // 2]
    size = path.stat().st_size
    return {
        "bag header": 100,
        "first chunk header": chunks[0].start + 10,
        "chunk data": (mid.start + mid.end) // 2,
        "end of chunk data": mid.end - 2,
        "index data after a chunk": mid.end + 6,
        "last chunk": chunks[-1].end - 10,
        "connections of the index": chunks[-1].end + 400,
        "chunk infos": size - 30,
    }


@pytest.mark.parametrize("compression", ["lz4", "bz2", "none"])
def test_bag1_cut_anywhere_keeps_exactly_the_complete_chunks(bags, compression, tmp_path):
    src = bags[compression]
    chunks = bag1_chunks(src)
    whole = {(t, ts): raw for t, ts, raw in any_messages(src)}
    for where, at in _bag_cuts(src, chunks).items():
        out = tmp_path / f"out-{at}.bag"
        report = recover_bag1(_cut(src, at, tmp_path / "cut.bag"), out)
        got = any_messages(out) if report.kept else []
        keys = Counter((t, ts) for t, ts, _ in got)
        complete = Counter(m for c in chunks if c.end <= at for m in c.messages)
        extra = keys - complete
        assert complete <= keys, where
        torn = next((c for c in chunks if c.start <= at < c.end), None)
        assert sum(extra.values()) == report.partial_chunk_messages, where
        assert not extra or (torn is not None and set(extra) <= torn.messages), where
        assert all(whole[(t, ts)] == raw for t, ts, raw in got)
        assert report.kept == len(got)
        assert report.damages, where
        if torn is not None:
            assert report.damages[0].kind == CUT
            assert report.valid_end == report.damages[0].offset <= torn.start
            assert f"offset {report.valid_end}" in report.damages[0].message


def test_bag1_uncompressed_cut_keeps_the_whole_messages_of_the_cut_chunk(tmp_path):
    src = write_bag1(tmp_path / "big.bag", "none", chunk=1 << 20)
    chunks = bag1_chunks(src)
    at = (chunks[1].start + chunks[1].end) // 2
    report = recover_bag1(_cut(src, at, tmp_path / "cut.bag"), tmp_path / "out.bag")
    got = Counter((t, ts) for t, ts, _ in any_messages(tmp_path / "out.bag"))
    assert 0 < report.partial_chunk_messages < len(chunks[1].messages)
    assert got - Counter(chunks[0].messages) == Counter(
        sorted(chunks[1].messages, key=lambda m: m[1])[: report.partial_chunk_messages]
    )


def test_bag1_recover_of_a_rosbags_bag_is_byte_identical(bags, tmp_path):
    for src in bags.values():
        out = tmp_path / src.name
        report = recover_bag1(src, out)
        assert report.ok and report.indexed
        assert out.read_bytes() == src.read_bytes()


def test_bag1_corrupt_chunk_mid_file_drops_only_it(bags, tmp_path):
    """ROS 1 bags have no checksums: a chunk whose data does not decompress is the damage
    a reader can see (bytes changed inside lz4 literals go unnoticed by any reader)."""
    src = bags["lz4"]
    chunks = bag1_chunks(src)
    bad = chunks[2]
    data = bytearray(src.read_bytes())
    data[bad.data_start : bad.data_start + 4] = b"XXXX"  # the lz4 frame magic
    damaged = tmp_path / "bad.bag"
    damaged.write_bytes(bytes(data))
    report = recover_bag1(damaged, tmp_path / "out.bag")
    got = Counter((t, ts) for t, ts, _ in any_messages(tmp_path / "out.bag"))
    assert got == Counter(m for c in chunks if c is not bad for m in c.messages)
    (damage,) = report.damages
    assert damage.chunk == 2 and report.dropped_chunks == 1


def test_bag1_scan_of_a_crashed_recording(bags, tmp_path):
    """rosbag's own crash: header index_pos=0, chunks up to the cut."""
    src = bags["lz4"]
    chunks = bag1_chunks(src)
    data = bytearray(src.read_bytes()[: chunks[4].end + 3])
    at = 13 + 4 + (4 + 4) + 4 + len("index_pos=")
    data[at : at + 8] = bytes(8)  # index_pos = 0
    crashed = tmp_path / "crashed.bag"
    crashed.write_bytes(bytes(data))
    report = scan_bag1(crashed)
    assert report.complete_chunks == 5 and not report.indexed
    assert report.kept == sum(len(c.messages) for c in chunks[:5])


# -- ROS 2 bags ------------------------------------------------------------------------------


def test_bag2_crashed_folder_without_metadata_is_recovered(tmp_path):
    src = write_bag2(tmp_path / "intact")
    (storage,) = sorted(src.glob("*.mcap"))
    chunks = mcap_chunks(storage)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    at = chunks[2].start + 50
    _cut(storage, at, crashed / storage.name)
    assert not scan_bag2(crashed).ok
    report = recover_bag2(crashed, tmp_path / "out")
    got = any_messages(tmp_path / "out")
    complete = [m for c in chunks[:2] for m in c.messages]
    assert got[: len(complete)] == complete
    assert len(got) == len(complete) + report.partial_chunk_messages
    assert mcap_messages(tmp_path / "out" / storage.name) == got


def test_bag2_intact_folder_recovers_to_the_same_messages(tmp_path):
    src = write_bag2(tmp_path / "intact")
    report = recover_bag2(src, tmp_path / "out")
    assert report.ok
    assert any_messages(tmp_path / "out") == any_messages(src)
    shutil.rmtree(tmp_path / "out")


# -- a dropped chunk that held definitions ------------------------------------------------------


def _corrupt(src: Path, at: int, dst: Path) -> Path:
    data = bytearray(src.read_bytes())
    data[at] ^= 0xFF
    dst.write_bytes(bytes(data))
    return dst


def test_mcap_crc_error_in_the_chunk_defining_the_channels_of_a_finished_file(tmp_path):
    """mcap's writer defines each channel in the chunk where it is first used; the summary
    of a finished file repeats the definitions, so only the damaged chunk is lost."""
    src = write_mcap(tmp_path / "a.mcap", "none")
    chunks = mcap_chunks(src)
    bad = _corrupt(src, chunks[0].end - 50, tmp_path / "bad.mcap")
    report = recover_mcap(bad, tmp_path / "out.mcap")
    assert mcap_messages(tmp_path / "out.mcap") == [m for c in chunks[1:] for m in c.messages]
    (damage,) = report.damages
    assert damage.kind == CRC and damage.chunk == 0


def test_mcap_cut_file_whose_defining_chunk_is_damaged_drops_what_cannot_be_read(tmp_path):
    src = write_mcap(tmp_path / "a.mcap", "none")
    chunks = mcap_chunks(src)
    cut = _cut(src, chunks[5].end, tmp_path / "cut.mcap")
    bad = _corrupt(cut, chunks[0].end - 50, tmp_path / "bad.mcap")
    report = recover_mcap(bad, tmp_path / "out.mcap")
    got = mcap_messages(tmp_path / "out.mcap")  # a valid file: no message on an unknown channel
    assert got == [] and report.kept == 0
    assert report.dropped == sum(len(c.messages) for c in chunks[:6])
    assert [d.kind for d in report.damages[:2]] == [CRC, "corrupt"]
    assert "defined only in a dropped chunk" in report.damages[1].message


def test_bag1_crashed_recording_whose_first_chunk_is_damaged(bags, tmp_path):
    """rosbags writes connection records in the first chunk only; a crashed bag has no index
    repeating them, so the messages of later chunks cannot be read: dropped and counted."""
    src = bags["lz4"]
    chunks = bag1_chunks(src)
    data = bytearray(src.read_bytes()[: chunks[3].end])
    data[chunks[0].data_start : chunks[0].data_start + 4] = b"XXXX"
    crashed = tmp_path / "crashed.bag"
    crashed.write_bytes(bytes(data))
    report = recover_bag1(crashed, tmp_path / "out.bag")
    assert report.kept == 0 and report.dropped == sum(len(c.messages) for c in chunks[1:4])
    assert "defined only in a dropped chunk" in report.damages[1].message
    assert any_messages(tmp_path / "out.bag") == []


def test_bag1_finished_bag_takes_connections_from_its_index(bags, tmp_path):
    src = bags["lz4"]
    chunks = bag1_chunks(src)
    data = bytearray(src.read_bytes())
    data[chunks[0].data_start : chunks[0].data_start + 4] = b"XXXX"
    bad = tmp_path / "bad.bag"
    bad.write_bytes(bytes(data))
    report = recover_bag1(bad, tmp_path / "out.bag")
    got = Counter((t, ts) for t, ts, _ in any_messages(tmp_path / "out.bag"))
    assert got == Counter(m for c in chunks[1:] for m in c.messages)
    assert len(report.damages) == 1


@pytest.mark.parametrize("seed", range(3))
def test_mutated_files_give_typed_errors_or_valid_files(mcaps, bags, tmp_path, seed):
    """Random byte changes and deletions: recover raises RosFormatError or writes a file
    the mcap reader / rosbags read with exactly the messages it reports kept."""
    import random

    from rosbags.rosbag1 import Reader

    from bridge_lake.formats.ros.damage import RosFormatError

    rng = random.Random(seed)
    sources = {
        "mcap": mcaps["zstd"].read_bytes()[:200_000],
        "bag": bags["lz4"].read_bytes()[:200_000],
    }
    for i in range(60):
        kind = rng.choice(sorted(sources))
        data = bytearray(sources[kind])
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(data))
            if rng.random() < 0.7:
                data[at : at + 4] = rng.randbytes(4)
            else:
                del data[at : at + rng.randint(1, 64)]
        src, out = tmp_path / f"{i}.in.{kind}", tmp_path / f"{i}.out.{kind}"
        src.write_bytes(bytes(data))
        try:
            report = (recover_mcap if kind == "mcap" else recover_bag1)(src, out)
        except RosFormatError:
            assert not out.exists()
            continue
        if kind == "mcap":
            n = len(mcap_messages(out))
        else:
            with Reader(out) as reader:
                n = sum(1 for _ in reader.messages())
        assert n == report.kept, (seed, i)


def test_mcap_loose_message_record_too_short_for_its_fields_is_dropped(tmp_path):
    """A Message record needs 22 bytes of fields (channel, sequence, two times): one of 20
    is damage, not a message, and must not reach the recovered file."""
    import struct

    from mcap.writer import Writer

    src = tmp_path / "loose.mcap"
    cdr = b"\x00\x01\x00\x00" + struct.pack("<I", 4) + b"abc\x00"  # std_msgs/String "abc"
    with src.open("wb") as f:
        w = Writer(f, use_chunking=False)
        w.start()
        schema = w.register_schema("std_msgs/msg/String", "ros2msg", b"string data")
        channel = w.register_channel("/chatter", "cdr", schema)
        for i in range(3):
            w.add_message(channel, log_time=10 + i, publish_time=10 + i, data=cdr)
        end = f.tell()  # the data section so far: a recorder that crashed here
        w.finish()
    whole = src.read_bytes()[:end]
    short = struct.pack("<BQHIQ", 5, 20, channel, 3, 13) + bytes(6)  # 20 bytes: too short
    good = struct.pack("<BQHIQQ", 5, 22 + len(cdr), channel, 4, 14, 14) + cdr
    src.write_bytes(whole + short + good)
    report = recover_mcap(src, tmp_path / "out.mcap")
    assert any("too short" in d.message for d in report.damages)
    got = mcap_messages(tmp_path / "out.mcap")
    assert [(topic, t) for topic, t, _ in got] == [("/chatter", t) for t in (10, 11, 12, 14)]

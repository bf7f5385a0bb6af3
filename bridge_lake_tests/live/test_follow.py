"""The ADTF follower on files that grow in slices cutting chunks and headers anywhere,
damaged, rewritten, or not ADTF; checked against the reader's view of the finished file."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from bridge_lake.formats.adtf import open_dat
from bridge_lake.formats.adtf.errors import HeaderError
from bridge_lake.formats.adtf.follow import AdtfFollower, load_catalog
from bridge_lake.synth.adtf import write_adtf_drive
from bridge_lake.synth.record import record


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    """A 3-second synthetic drive re-recorded as ADTF 3 (inline types) and ADTF 2."""
    root = tmp_path_factory.mktemp("follow")
    [src] = write_adtf_drive(root, minutes=0.05, seed=5)
    a3, a2 = root / "a3.dat", root / "a2.dat"
    record(src, a3, speed=0)
    record(src, a2, speed=0, version=0x0201)
    return {"src": src, "adtf3": a3, "adtf2": a2}


def _truth(path: Path) -> list[tuple]:
    with open_dat(path) as f:
        return [(s[0], s.time_ns, s.sample_time_ns, bytes(s.raw), s.offset) for s in f.samples()]


def _grow(data: bytes, target: Path, follower: AdtfFollower, seed: int, most: int) -> list:
    """Append `data` in random slices, polling after each; the samples handed out."""
    rng, got, pos = random.Random(seed), [], 0
    target.write_bytes(b"")
    while pos < len(data):
        step = rng.randint(1, most)
        with target.open("ab") as fh:
            fh.write(data[pos : pos + step])
        pos += step
        poll = follower.poll()
        assert not poll.quarantine, poll.quarantine
        assert not poll.restarted
        got += [(s[0], s.time_ns, s.sample_time_ns, bytes(s.raw), s.offset) for s in poll.samples]
    return got


@pytest.mark.parametrize("kind", ["adtf3", "adtf2"])
@pytest.mark.parametrize("seed,most", [(1, 7), (2, 333), (3, 70_000)])
def test_growth_in_slices_hands_out_every_sample_once_in_order(
    recordings, tmp_path, kind, seed, most
):
    path = recordings[kind]
    data = path.read_bytes()
    if most == 7:  # byte-sized slices over the header and the first chunks only
        data = data[:6000]
    sidecar = Path(f"{path}.description")
    if sidecar.is_file():  # ADTF 2's DDL, written at close beside the file
        Path(f"{tmp_path / 'grow.dat'}.description").write_bytes(sidecar.read_bytes())
    follower = AdtfFollower(tmp_path / "grow.dat", load_catalog(path))
    got = _grow(data, tmp_path / "grow.dat", follower, seed, most)
    truth = [t for t in _truth(path) if t[4] + 32 <= len(data)]
    if most == 7:
        assert got == truth[: len(got)] and len(got) >= len(truth) - 1
        return
    assert got == truth
    assert follower.poll().samples == []  # nothing handed out twice
    assert follower.closed and follower.differences == []


def test_without_catalog_names_are_provisional_and_the_close_reports_the_real_ones(
    recordings, tmp_path
):
    path = recordings["adtf3"]
    follower = AdtfFollower(tmp_path / "grow.dat")
    got = _grow(path.read_bytes(), tmp_path / "grow.dat", follower, 4, 50_000)
    assert got == _truth(path)
    with open_dat(path) as f:
        names = {s.stream_id: s.name for s in f.streams}
        structs = {s.stream_id: s.ddl_struct for s in f.streams}
    live = follower.streams
    assert {sid: s.name for sid, s in live.items()} == {sid: f"stream_{sid}" for sid in names}
    assert {sid: s.ddl_struct for sid, s in live.items()} == structs  # from the type chunks
    diffs = {(d.stream_id, d.what): (d.live, d.final) for d in follower.differences}
    assert diffs == {(sid, "name"): (f"stream_{sid}", name) for sid, name in names.items()}


def test_without_catalog_or_inline_types_sample_times_keep_their_ns(recordings, tmp_path):
    """An ADTF 3.5 file with no type chunks, followed without a catalog: its sample times
    are ns (they were taken as us, and `bridge-lake live` of a synthetic .dat overflowed)."""
    path = recordings["src"]
    follower = AdtfFollower(tmp_path / "grow.dat")
    got = _grow(path.read_bytes(), tmp_path / "grow.dat", follower, 6, 80_000)
    assert all(s.stream_type is None for s in follower.streams.values())
    assert got == _truth(path)


def test_adtf2_without_catalog_publishes_raw_payloads_and_says_so(recordings, tmp_path):
    follower = AdtfFollower(tmp_path / "grow.dat")
    target = tmp_path / "grow.dat"
    target.write_bytes(recordings["adtf2"].read_bytes()[:300_000])
    poll = follower.poll()
    assert poll.samples and all(s.stream_type is None for s in follower.streams.values())
    assert follower.provisional == set(follower.streams)
    assert any("no name before the file closes" in n for n in poll.notices)


def test_a_damaged_chunk_is_quarantined_with_its_offset_and_the_walk_goes_on(recordings, tmp_path):
    path = recordings["adtf3"]
    truth = _truth(path)
    victim = truth[len(truth) // 2]
    chunk_at = victim[4]
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, chunk_at + 16, 7)  # size below the 32-byte header
    target = tmp_path / "grow.dat"
    follower = AdtfFollower(target, load_catalog(path))
    got, quarantined, pos, rng = [], [], 0, random.Random(9)
    target.write_bytes(b"")
    while pos < len(data):
        step = rng.randint(1, 40_000)
        with target.open("ab") as fh:
            fh.write(data[pos : pos + step])
        pos += step
        poll = follower.poll()
        quarantined += poll.quarantine
        got += [(s[0], s.time_ns, s.sample_time_ns, bytes(s.raw), s.offset) for s in poll.samples]
    assert [q.offset for q in quarantined] == [chunk_at]
    assert "chunk size 7" in quarantined[0].reason
    assert got == [t for t in truth if t[4] != chunk_at]


def test_a_file_truncated_and_rewritten_is_followed_from_the_start(recordings, tmp_path):
    first, second = recordings["adtf3"], recordings["adtf2"]
    target = tmp_path / "grow.dat"
    target.write_bytes(first.read_bytes()[:400_000])
    follower = AdtfFollower(target)
    before = follower.poll()
    assert before.samples and not before.restarted
    target.write_bytes(second.read_bytes())  # same path, same inode: truncated, rewritten
    poll = follower.poll()
    assert poll.restarted and any("rewritten" in n for n in poll.notices)
    got = [(s[0], s.time_ns, s.sample_time_ns, bytes(s.raw), s.offset) for s in poll.samples]
    assert got == _truth(second)


def test_not_adtf_is_a_typed_error_at_its_first_bytes(tmp_path):
    target = tmp_path / "x.dat"
    target.write_bytes(b"PK\x03\x04" + bytes(4000))
    with pytest.raises(HeaderError) as err:
        AdtfFollower(target).poll()
    assert err.value.offset == 0 and str(target) in str(err.value)


def test_a_short_or_missing_file_is_waited_for(tmp_path):
    target = tmp_path / "x.dat"
    follower = AdtfFollower(target)
    assert follower.poll().size is None
    target.write_bytes(b"IFHD")
    poll = follower.poll()
    assert poll.samples == [] and follower.header is None

"""`bridge-lake recover`: MCAP files, ROS 1 bags and ADTF recordings, damaged anywhere,
rewritten by the record scanners; the copy must then read back, with the independent
readers for MCAP (mcap) and bags (rosbags), with exactly the messages the report kept.

Input: one selector byte (0 MCAP, 1 ROS 1 bag, 2 ADTF), then the file's bytes."""

from __future__ import annotations

from pathlib import Path

from mcap.reader import make_reader
from rosbags.rosbag1 import Reader as Bag1Reader

from bridge_lake.formats.adtf import open_dat
from bridge_lake.formats.adtf.recover import recover_dat
from bridge_lake.formats.ros.bag1_recover import recover_bag1
from bridge_lake.formats.ros.mcap_recover import recover_mcap
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 32 << 10
KINDS = ("input.mcap", "input.bag", "input.dat")


class RecoveredFileMismatch(AssertionError):
    """A recovered copy that its readers do not read as the report says (a finding)."""


def seeds(work: Path) -> dict[str, bytes]:
    out = {p.name: b"\0" + p.read_bytes() for p in corpus.small_mcaps(work)}
    out["bag1"] = b"\1" + corpus.small_bag1(work).read_bytes()
    for p in corpus.testdata_dat_files():
        out[p.name] = b"\2" + p.read_bytes()
    return {k: v for k, v in out.items() if len(v) <= MAX_LEN}


def one_input(data: bytes) -> None:
    if not data:
        return
    src = scratch_file(KINDS[data[0] % 3], data[1:])
    out = src.with_name("recovered" + src.suffix)
    out.unlink(missing_ok=True)
    if src.suffix == ".mcap":
        kept = recover_mcap(src, out).kept
        with out.open("rb") as f:
            n = sum(1 for _ in make_reader(f, validate_crcs=True).iter_messages())
    elif src.suffix == ".bag":
        kept = recover_bag1(src, out).kept
        with Bag1Reader(out) as reader:
            n = sum(1 for _ in reader.messages())
    else:
        kept = recover_dat(src, out).chunks
        with open_dat(out) as f:
            n = sum(1 for _ in f.items())
    if n != kept:
        raise RecoveredFileMismatch(f"{src.suffix}: report kept {kept}, readers read {n}")

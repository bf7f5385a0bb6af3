"""ADTF recordings (IFHD container, extension table, stream index, chunk walk, sample
envelopes, DDL decode, `bridge-lake info`), strict and salvaging, on whole files.

ADTF 2 inputs get a `.description` sidecar beside them (the real recording's DDL plus the
writer seeds' struct), so mutated samples of DDL streams go through the serialized-to-
deserialized conversion too. Seeds are the recordings up to MAX_LEN: a pass over the
larger ones takes seconds under tracemalloc (they stay covered by the hypothesis damage
tests of bridge_lake_tests/formats/test_adtf_fuzz.py)."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.adtf_info import render_info
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf import open_dat
from bridge_lake.formats.adtf.ddl import DDL, parse_ddl, render_ddl
from bridge_lake.formats.adtf.info import info_dict
from fuzz import corpus
from fuzz.targets import scratch_file

MAX_LEN = 48 << 10


def _sidecar() -> bytes:
    """One DDL describing the streams of every ADTF 2 seed."""
    parts = [parse_ddl(corpus._WRITER_DDL)]
    real = corpus.ADTF_TESTDATA / "test_file_rec_newfile.dat.description"
    if real.is_file():
        parts.append(parse_ddl(real.read_bytes()))
    merged = DDL(*({k: v for p in parts for k, v in getattr(p, f).items()} for f in DDL_FIELDS))
    merged.streams.setdefault("P", "P")
    return render_ddl(merged).encode()


DDL_FIELDS = ("datatypes", "enums", "structs", "streams", "constants")
_SIDECAR = _sidecar()


def seeds(work: Path) -> dict[str, bytes]:
    files = [*corpus.testdata_dat_files(), corpus.synth_adtf(work), *corpus.writer_dat_files(work)]
    return {p.name: p.read_bytes() for p in files if p.stat().st_size <= MAX_LEN}


def _read_all(f, everything: bool) -> None:
    for item in f.items():
        if item.sample is not None:
            bytes(item.sample.data)
            item.sample.sample_info()
    if everything:
        for _ in f.samples():
            pass
        f.index0()
        _ = f.referenced_files
    for s in f.streams:
        if everything:
            f.sample_table(s.stream_id)
        if s.ddl_struct:
            f.decode(s.stream_id)
        if everything and s.ddl_struct and s.stream_type is not None:
            for sub, _ in s.stream_type.substreams().values():
                f.decode(s.stream_id, substream=sub)


def one_input(data: bytes) -> None:
    """Strict reading does everything a caller can; salvage (strict=False) walks and
    decodes what is left; `info` summarises."""
    path = scratch_file("input.dat", data)
    sidecar = path.with_name("input.dat.description")
    if not sidecar.exists():
        sidecar.write_bytes(_SIDECAR)
    for strict in (True, False):
        try:
            with open_dat(path, strict=strict) as f:
                _read_all(f, everything=strict)
        except BridgeLakeError:
            continue
    render_info(info_dict(path))

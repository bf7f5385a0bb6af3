"""Random damage to valid recordings: the reader either reads or raises a typed AdtfError;
salvage mode never raises past the header; nothing hangs or leaks other exceptions."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge_lake.adtf_info import render_info
from bridge_lake.formats.adtf import Property, StreamType, open_dat, parse_ddl
from bridge_lake.formats.adtf.ddl_convert import convert
from bridge_lake.formats.adtf.errors import AdtfError, HeaderError
from bridge_lake.formats.adtf.info import info_dict
from bridge_lake.formats.adtf.writer import DatWriter

DDL = parse_ddl(
    "<struct name='P'><element name='a' type='tUInt16' arraysize='1' bytepos='1' "
    "byteorder='BE' alignment='2'/><element name='n' type='tUInt8' arraysize='1' bytepos='3'/>"
    "<element name='v' type='tInt8' arraysize='n' bytepos='4'/></struct>"
)


def _sample_file(path, version):
    with DatWriter(path, version=version) as w:
        if version < 0x0400:
            a = w.add_stream("P", ddl=DDL, ddl_struct="P")
            b = w.add_stream("u8", major=0x0300, sub=5)
        else:
            a = w.add_stream("a", stream_type=StreamType("adtf/anonymous"))
            b = w.add_stream("b")
            w.write_stream_type(b, 0, StreamType("adtf/anonymous", {"k": Property("tUInt32", "1")}))
        for i in range(12):
            row = bytes([0, 0, i, 3, 1, 2, 3])
            data = convert(DDL, "P", bytes([0, i, 3, 0, 1, 2, 3]), "deserialized", "serialized")
            w.write_sample(a, i * 1000, data if version < 0x0400 else row)
            w.write_sample(
                b, i * 1000 + 500, bytes([i]), substream_id=0 if version < 0x0400 else i % 2
            )
            if version >= 0x0400 and i % 4 == 0:
                w.write_trigger(b, i * 1000 + 600)
    return path


@pytest.fixture(scope="module", params=[0x0201, 0x0400, 0x0500])
def original(request, tmp_path_factory):
    return _sample_file(tmp_path_factory.mktemp("fuzz") / "f.dat", request.param)


def _walk(f):
    for item in f.items():
        if item.sample is not None:
            bytes(item.sample.data)
            item.sample.sample_info()
    list(f.samples())


def _decode_all(f):
    for s in f.streams:
        if s.ddl_struct:
            f.decode(s.stream_id)


@settings(
    # deterministic in CI; explore with e.g. ADTF_FUZZ_EXAMPLES=3000 ADTF_FUZZ_RANDOM=1
    max_examples=int(os.environ.get("ADTF_FUZZ_EXAMPLES", "200")),
    derandomize=not os.environ.get("ADTF_FUZZ_RANDOM"),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_damage_gives_typed_errors_only(original, tmp_path, data):
    raw = bytearray(original.read_bytes())
    sidecar = original.with_name(original.name + ".description")
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(raw))))
    if cut is not None:
        raw = raw[:cut]
    path = tmp_path / "f.dat"
    path.write_bytes(bytes(raw))
    if sidecar.exists():
        (tmp_path / "f.dat.description").write_bytes(sidecar.read_bytes())
    try:
        with open_dat(path) as f:
            _walk(f)
            _decode_all(f)
    except AdtfError as exc:
        assert exc.path is not None
    try:
        f = open_dat(path, strict=False)
    except HeaderError:
        return
    with f:
        _walk(f)  # salvage: never raises past the header
        assert all(isinstance(e, AdtfError) and e.path for e in f.issues.items)
        try:
            _decode_all(f)  # decoding is strict by nature: typed errors only
        except AdtfError as exc:
            assert exc.path is not None
    render_info(info_dict(path))

"""ADTF 2 and ADTF 3 sample deserialization on its own: stream info data (class ids and
media type, or stream type XML and serializer id), a chunk body's sample envelope, the
sample-info table behind it, and a DDL-serialized buffer converted to the deserialized
layout, in the order the reader applies them to one chunk.

Input: one selector byte (which envelope), then the bytes of one chunk body / info block.
"""

from __future__ import annotations

from pathlib import Path

from bridge_lake.formats.adtf import parse_ddl
from bridge_lake.formats.adtf.ddl_convert import convert
from bridge_lake.formats.adtf.samples import (
    ADTF2_INDEXED_SAMPLE_CLASS,
    adtf2_envelope,
    adtf2_sample_infos,
    adtf3_envelope,
    adtf3_sample_infos,
    parse_adtf2_info,
    parse_adtf3_info,
)
from fuzz import corpus

MAX_LEN = 8 << 10
PATH = "<fuzz>"
_DDL = parse_ddl(corpus._WRITER_DDL)
_FIXED = parse_ddl(
    "<struct name='F' alignment='8'><element name='t' type='tUInt64' arraysize='1' "
    "bytepos='0' alignment='8'/><element name='b' type='tUInt16' arraysize='1' bytepos='8' "
    "bitpos='3' numbits='5' byteorder='BE'/><element name='x' type='tFloat32' arraysize='3' "
    "bytepos='10' alignment='4'/></struct>"
)


def seeds(work: Path) -> dict[str, bytes]:
    from bridge_lake.formats.adtf import open_dat

    out: dict[str, bytes] = {}
    for path in [*corpus.testdata_dat_files(), *corpus.writer_dat_files(work)]:
        with open_dat(path, strict=False) as f:
            buf = f.view
            kind = 0 if f.version < 0x0400 else 1
            for n, (pos, _, _, size, _, flags, _) in enumerate(f.chunk_headers()):
                if n >= 12:
                    break
                if not flags & 0x18:
                    out[f"{path.name}-{pos}"] = bytes([kind]) + bytes(buf[pos + 32 : pos + size])
            for s in f.streams:
                info = f.extension(f"index{s.stream_id}")
                if info is not None and len(info) > 256:
                    out[f"{path.name}-info{s.stream_id}"] = bytes([2 + kind]) + bytes(info[256:])
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0] % 6, memoryview(data[1:])
    end = len(body)
    if mode == 0:
        _t, _f, start, stop, info_end = adtf2_envelope(body, 0, end, path=PATH)
        if info_end > stop:
            adtf2_sample_infos(bytes(body[stop:info_end]))
        convert(_DDL, "P", body[start:stop], "serialized", "deserialized")
    elif mode == 1:
        _t, _f, start, stop, info_end, _s = adtf3_envelope(body, 0, end, path=PATH)
        if info_end > stop:
            adtf3_sample_infos(bytes(body[stop:info_end]))
        convert(_FIXED, "F", body[start:stop], "serialized", "deserialized")
    elif mode == 2:
        t = parse_adtf2_info(body, path=PATH, offset=0)
        t.stream_type()
        if t.sample_class == ADTF2_INDEXED_SAMPLE_CLASS:
            adtf2_envelope(body, 0, end, path=PATH)
    elif mode == 3:
        stype, _ = parse_adtf3_info(body, path=PATH, offset=0)
        stype.substreams()
        stype.to_xml()
    elif mode == 4:
        convert(_DDL, "P", body, "deserialized", "serialized")
    else:
        convert(_FIXED, "F", body, "deserialized", "serialized")

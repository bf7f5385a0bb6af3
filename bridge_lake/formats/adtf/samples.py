"""ADTF 2 and ADTF 3 stream descriptions and sample envelopes (spec §8, §9).

The container gives us chunk bodies; this module says where, inside a body, the sample's own
time stamp, flags and buffer are. Parsing returns offsets into the mapped file rather than
copies, so the reader can hand out zero-copy views.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from bridge_lake.formats.adtf.errors import SampleError, StreamIndexError
from bridge_lake.formats.adtf.ifhd import cstr

STREAM_XMLNS = "adtf/xsd/stream_description"

SERIALIZER_COPY = "sample_copy_serialization.serialization.adtf.cid"
SERIALIZER_COPY_NS = "sample_copy_serialization_ns.serialization.adtf.cid"
SERIALIZER_MD = "media_description_sample_serialization.serialization.adtf.cid"
SERIALIZER_MD_NS = "media_description_sample_serialization_ns.serialization.adtf.cid"
NS_SERIALIZERS = (SERIALIZER_COPY_NS, SERIALIZER_MD_NS)
MD_SERIALIZERS = (SERIALIZER_MD, SERIALIZER_MD_NS)

ADTF2_SAMPLE_CLASS = "adtf.core.media_sample"
ADTF2_TYPE_CLASS = "adtf.core.media_type"
ADTF2_INDEXED_SAMPLE_CLASS = "indexed_data_toolbox.indexed_data_media_sample"
ADTF2_INFO_HEAD = 1024
"""Two char[512] class ids precede the serialized media type in ADTF 2 stream info data."""

PLAINTYPE_SUBTYPES = {1: "FLOAT64", 2: "FLOAT32", 3: "UINT32", 4: "UINT16", 5: "UINT8", 7: "UINT64"}
"""ADTF 2 major 0x0300 sub types that are plain numeric arrays, named as the vendor names them."""

ADTF2_VIDEO_TYPE_CLASS = "adtf.type.video"
VIDEO_FORMAT = struct.Struct("<hiiihii")
"""ADTF 2 video format as the type class streams it (spec §8.1): bits_per_pixel,
bytes_per_line, height, palette_size, pixel_format, size, width (then the palette)."""

PIXEL_FORMAT_NAMES = {
    0: "unknown",
    10: "8_bit",
    11: "GREY(8)",
    12: "R(3)G(3)B(2)",
    20: "16_bit",
    21: "GREY(10)",
    22: "GREY(12)",
    23: "GREY(14)",
    24: "GREY(16)",
    25: "R(4)G(4)B(4)",
    26: "R(5)G(5)B(5)(1)",
    27: "R(5)G(6)B(5)",
    28: "R(4)G(4)B(4)A(4)",
    29: "A(4)B(4)G(4)R(4)",
    30: "riii_10",
    31: "riii_12",
    32: "riii_14",
    33: "riii_16",
    34: "(1)B(5)G(5)R(5)",
    35: "B(5)G(6)R(5)",
    40: "24_bit",
    41: "GREY(18)",
    42: "GREY(20)",
    43: "GREY(22)",
    44: "GREY(24)",
    45: "R(8)G(8)B(8)",
    46: "B(8)G(8)R(8)",
    50: "32_bit",
    51: "A(8)R(8)G(8)B(8)",
    52: "A(8)B(8)G(8)R(8)",
    53: "R(8)G(8)B(8)A(8)",
    54: "B(8)G(8)R(8)A(8)",
    55: "GREY(32)",
    56: "greyscale_float_32",
    60: "yuv420p_888",
}
"""ADTF 2 tPixelFormat -> ADTF 3 `format_name`, as the vendor maps it (probed with every enum
value; an unlisted value becomes its decimal text, as PF_CUSTOM = 1000 does)."""

ADTF2_ENVELOPE = struct.Struct("<BIqI")
ADTF3_ENVELOPE = struct.Struct("<qiQ")
ADTF3_FLAG_INFO = 0x100
ADTF3_FLAG_SUBSTREAM = 0x200


@dataclass(frozen=True)
class Property:
    type: str
    value: str


@dataclass(frozen=True)
class StreamType:
    """An ADTF 3 style stream type: meta type plus typed properties (ADTF 2 types are mapped)."""

    meta_type: str
    properties: dict[str, Property] = field(default_factory=dict)

    def substreams(self) -> dict[str, tuple[int, StreamType]]:
        """Substream name -> (id, its own type), from the `substreams/<name>...` properties."""
        out: dict[str, tuple[int, StreamType]] = {}
        for key, prop in self.properties.items():
            parts = key.split("/")
            if len(parts) != 2 or parts[0] != "substreams":
                continue
            prefix = f"{key}/type/"
            meta = self.properties.get(f"{key}/type", Property("cString", "adtf/anonymous"))
            sub_props = {
                k[len(prefix) :]: v for k, v in self.properties.items() if k.startswith(prefix)
            }
            out[parts[1]] = (int(prop.value), StreamType(meta.value, sub_props))
        return out

    def to_xml(self) -> str:
        """The stream type as ADTF 3 writes it (used for index info data and type chunks)."""
        from xml.sax.saxutils import escape, quoteattr

        lines = [f'<stream xmlns="{STREAM_XMLNS}" name="" meta_type={quoteattr(self.meta_type)}>']
        for name, prop in self.properties.items():
            lines.append(
                f"    <property name={quoteattr(name)} type={quoteattr(prop.type)}>"
                f"{escape(prop.value)}</property>"
            )
        lines.append("</stream>")
        return "\n".join(lines) + "\n"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


_UINT = re.compile(r"\s*[0-9]{1,10}\s*")
"""A substream id as the type XML writes it (what `StreamType.substreams` converts)."""


def parse_stream_type(text: str, *, path: str, offset: int) -> StreamType:
    """Parse stream type XML without expanding entities (defusedxml)."""
    try:
        root: Element = SafeET.fromstring(text)
    except (SafeET.ParseError, DefusedXmlException) as exc:
        raise StreamIndexError(
            f"stream type XML is malformed: {exc}", path=path, offset=offset
        ) from None
    if _local(root.tag) != "stream" or "meta_type" not in root.attrib:
        raise StreamIndexError(
            "stream type XML has no <stream meta_type=...> root", path=path, offset=offset
        )
    props = {}
    for el in root:
        if _local(el.tag) == "property" and "name" in el.attrib:
            name, value = el.attrib["name"], el.text or ""
            parts = name.split("/")
            if len(parts) == 2 and parts[0] == "substreams" and not _UINT.fullmatch(value):
                raise StreamIndexError(
                    f"substream {parts[1]!r} has id {value!r}, not an integer",
                    path=path,
                    offset=offset,
                )
            props[name] = Property(el.attrib.get("type", ""), value)
    return StreamType(root.attrib["meta_type"], props)


def read_string(
    buf: memoryview, pos: int, end: int, *, path: str, base: int = 0
) -> tuple[str, int]:
    """An ADTF 3 length-prefixed string (u32 length incl. NUL); returns (text, next pos).

    `base` is the file offset of `buf[0]` when `buf` is a slice, for error offsets."""
    if pos + 4 > end:
        raise StreamIndexError(
            "string length runs past its container", path=path, offset=base + pos
        )
    (n,) = struct.unpack_from("<I", buf, pos)
    if n > end - pos - 4:
        raise StreamIndexError(
            f"string of declared length {n} exceeds the {end - pos - 4} bytes left",
            path=path,
            offset=base + pos,
        )
    raw = bytes(buf[pos + 4 : pos + 4 + n])
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace"), pos + 4 + n


@dataclass(frozen=True)
class Adtf2Type:
    """ADTF 2 stream info data (§8.1): class ids, media type and class-specific extras."""

    sample_class: str
    type_class: str
    major: int
    sub: int
    flags: int
    extra: bytes
    """The bytes after the 12-byte media type (video/audio format, indexed-data entries)."""

    def stream_type(self) -> StreamType:
        """The vendor's mapping of an ADTF 2 media type onto an ADTF 3 stream type."""
        if self.type_class == ADTF2_VIDEO_TYPE_CLASS and len(self.extra) >= VIDEO_FORMAT.size:
            bpp, line, height, _, pixel, size, width = VIDEO_FORMAT.unpack_from(self.extra)
            props = {
                "bits_per_pixel": ("tUInt", bpp),
                "bytes_per_line": ("tUInt", line),
                "data_endianess": ("tUInt", 1),
                "flags": ("tUInt32", self.flags),
                "format_name": ("cString", PIXEL_FORMAT_NAMES.get(pixel, str(pixel))),
                "major": ("tUInt32", self.major),
                "max_byte_size": ("tUInt32", size),
                "pixel_height": ("tUInt", height),
                "pixel_width": ("tUInt", width),
                "sub": ("tUInt32", self.sub),
            }
            return StreamType("adtf/image", {k: Property(t, str(v)) for k, (t, v) in props.items()})
        if self.major == 0x0300 and self.sub in PLAINTYPE_SUBTYPES:
            return StreamType(
                "adtf/plaintype", {"c-type": Property("cString", PLAINTYPE_SUBTYPES[self.sub])}
            )
        return StreamType(
            "adtf2/legacy",
            {
                "flags": Property("tUInt32", str(self.flags)),
                "major": Property("tUInt32", str(self.major)),
                "sub": Property("tUInt32", str(self.sub)),
            },
        )


def parse_adtf2_info(info: memoryview, *, path: str, offset: int) -> Adtf2Type:
    if len(info) < ADTF2_INFO_HEAD + 12:
        raise StreamIndexError(
            f"ADTF 2 stream info of {len(info)} bytes, needs at least {ADTF2_INFO_HEAD + 12}",
            path=path,
            offset=offset,
        )
    sample_class = cstr(bytes(info[0:512])) or ADTF2_SAMPLE_CLASS
    type_class = cstr(bytes(info[512:1024])) or ADTF2_TYPE_CLASS
    major, sub, flags = struct.unpack_from("<III", info, ADTF2_INFO_HEAD)
    return Adtf2Type(
        sample_class, type_class, major, sub, flags, bytes(info[ADTF2_INFO_HEAD + 12 :])
    )


def parse_adtf3_info(info: memoryview, *, path: str, offset: int) -> tuple[StreamType, str]:
    """ADTF 3 stream info data (§9.2): initial stream type XML and serializer class id."""
    xml, pos = read_string(info, 0, len(info), path=path, base=offset)
    serializer, _ = read_string(info, pos, len(info), path=path, base=offset)
    return parse_stream_type(xml, path=path, offset=offset), serializer


def _envelope(
    envelope: struct.Struct, adtf: int, buf: memoryview, body: int, end: int, *, path: str
) -> tuple[int, ...]:
    """The fields of an ADTF `adtf` (2 or 3) sample envelope at `body`, which must fit
    before the chunk's `end`."""
    if body + envelope.size > end:
        raise SampleError(
            f"ADTF {adtf} sample envelope does not fit its chunk", path=path, offset=body
        )
    return envelope.unpack_from(buf, body)


def _data_end(size: int, start: int, end: int, *, path: str, size_at: int) -> int:
    """Where a sample's `size` bytes of data starting at `start` end; they must fit before
    the chunk's `end` (else the error names `size_at`, the offset of the size field)."""
    if size > end - start:
        raise SampleError(
            f"sample buffer_size {size} exceeds the {end - start} bytes left in the chunk",
            path=path,
            offset=size_at,
        )
    return start + size


def _block_end(
    buf: memoryview, pos: int, end: int, head: int, head_name: str, data_name: str, path: str
) -> int:
    """Where a block at `pos` ends: a `head`-byte header ending in the u32 size of the data
    after it. Header and data must fit before the chunk's `end` (the names are for the
    errors)."""
    if pos + head > end:
        raise SampleError(f"{head_name} runs past the chunk", path=path, offset=pos)
    (n,) = struct.unpack_from("<I", buf, pos + head - 4)
    pos += head + n
    if pos > end:
        raise SampleError(f"{data_name} runs past the chunk", path=path, offset=pos)
    return pos


def adtf2_envelope(
    buf: memoryview, body: int, end: int, *, path: str
) -> tuple[int, int, int, int, int]:
    """(sample_time_us, flags, data_start, data_end, info_end) of an ADTF 2 media sample.

    The sample-info table (version >= 3) lies in [data_end, info_end); it is only walked here
    to validate its sizes, and decoded on demand by `adtf2_sample_infos`.
    """
    version, size, time, flags = _envelope(ADTF2_ENVELOPE, 2, buf, body, end, path=path)
    start = body + ADTF2_ENVELOPE.size
    stop = info_end = _data_end(size, start, end, path=path, size_at=body + 1)
    if version >= 3:
        if stop + 4 > end:
            raise SampleError("sample-info count runs past the chunk", path=path, offset=stop)
        (count,) = struct.unpack_from("<I", buf, stop)
        pos = stop + 4
        for _ in range(count):
            pos = _block_end(buf, pos, end, 8, "sample-info entry", "sample-info value", path)
        info_end = pos
    return time, flags, start, stop, info_end


_VARIANT_TYPES = {
    0x2: "?",
    0x4: "b",
    0x8: "B",
    0x10: "h",
    0x20: "H",
    0x40: "i",
    0x80: "I",
    0x100: "f",
    0x200: "d",
    0x800: "q",
    0x1000: "Q",
}


def adtf2_sample_infos(raw: bytes) -> dict[int, object]:
    """Decode an ADTF 2 sample-info table (count + (key, size, variant) entries).

    Scalars are decoded; strings and arrays (upstream does not decode them either) stay bytes.
    """
    (count,) = struct.unpack_from("<I", raw, 0)
    pos, out = 4, {}
    for _ in range(count):
        key, size = struct.unpack_from("<II", raw, pos)
        var = raw[pos + 8 : pos + 8 + size]
        pos += 8 + size
        value: object = var
        if size >= 10 and var[0] == 1:
            endian = "<" if var[1] == 1 else ">"
            (vtype,) = struct.unpack_from(endian + "Q", var, 2)
            code = _VARIANT_TYPES.get(vtype)
            if code is not None and size - 10 >= struct.calcsize(code):
                (value,) = struct.unpack_from(endian + code, var, 10)
        out[key] = value
    return out


def adtf3_envelope(
    buf: memoryview, body: int, end: int, *, path: str
) -> tuple[int, int, int, int, int, int]:
    """(sample_time, user_flags, data_start, data_end, info_end, substream_id) of §9.4."""
    time, flags, size = _envelope(ADTF3_ENVELOPE, 3, buf, body, end, path=path)
    start = body + ADTF3_ENVELOPE.size
    stop = pos = _data_end(size, start, end, path=path, size_at=body + 12)
    if flags & ADTF3_FLAG_INFO:
        block = "sample info block"
        pos = _block_end(buf, pos, end, 5, block, block, path)
    substream = 0
    if flags & ADTF3_FLAG_SUBSTREAM:
        if pos + 4 > end:
            raise SampleError("substream id runs past the chunk", path=path, offset=pos)
        (substream,) = struct.unpack_from("<I", buf, pos)
    return time, flags & ~(ADTF3_FLAG_INFO | ADTF3_FLAG_SUBSTREAM), start, stop, pos, substream


_INFO_VALUE_TYPES = {
    2: "?",
    3: "b",
    4: "B",
    5: "h",
    6: "H",
    7: "i",
    8: "I",
    9: "f",
    10: "d",
    12: "q",
    13: "Q",
}


def adtf3_sample_infos(raw: bytes) -> dict[int, object]:
    """Decode an ADTF 3 sample info block (u8 layout version, u32 size, 16-byte records)."""
    (size,) = struct.unpack_from("<I", raw, 1)
    out: dict[int, object] = {}
    for pos in range(5, 5 + size - size % 16, 16):
        _, _, vtype, _, key = struct.unpack_from("<BBBBI", raw, pos)
        code = _INFO_VALUE_TYPES.get(vtype)
        out[key] = (
            struct.unpack_from("<" + code, raw, pos + 8)[0] if code else raw[pos + 8 : pos + 16]
        )
    return out

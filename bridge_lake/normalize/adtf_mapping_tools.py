"""Tools around the ADTF mapping: where each stream of a recording lands, a mapping skeleton
for a recording, and a dry run of the normalizer (`bridge-lake info`, `bridge-lake mapping
suggest`, `bridge-lake mapping check`).

- `placements(path, mapping)`: per stream (substreams of an unmapped `adtf/substreams`
  stream each on their own, as the normalizer splits them) the rule that takes it, its layer
  and file, the target table, or the generic table it lands in without a rule; the same
  decision `bridge_lake.normalize.adtf` makes, without reading a sample.
- `suggest_mapping(path)`: YAML with one rule per DDL struct of the recording. Every element
  is listed as a comment with its type and unit (when the DDL gives one); where the names make
  it obvious (lat/lon/alt → gnss, acc/gyro → imu, CAN id/data/dlc/channel → can_frames) the
  rule is live with its field mapping filled in, else it is commented out and names the
  generic table the stream lands in without it. The live rules always parse
  (`parse_mapping`); the text is meant to be edited.
- `check_recording(path, mapping)`: runs the normalizer on the recording into a temporary
  lake and reports per stream the table, rows written, rows quarantined and why.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from bridge_lake.cli_common import table_lines
from bridge_lake.formats.adtf import Stream, open_dat
from bridge_lake.formats.adtf.ddl import DDL
from bridge_lake.formats.adtf.info import info_dict
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas import ADTF_PAYLOADS, QUARANTINE
from bridge_lake.normalize.adtf import _check_rule, normalize_adtf
from bridge_lake.normalize.adtf_generic import substream_streams, table_name, with_plain_type
from bridge_lake.normalize.adtf_mapping import Mapping, load_mapping, parse_mapping
from bridge_lake.normalize.sink import DriveSink

DEG = 0.017453292519943295
"""Degrees → radians."""
G = 9.80665
"""Standard gravity, m/s² per g."""

# --------------------------------------------------------------------------------------------
# where each stream lands


@dataclass(frozen=True)
class StreamPlacement:
    """Where a stream's samples go under a mapping."""

    stream: str
    type: str
    """meta type, and `:struct` when a DDL describes the samples"""
    ddl_struct: str | None
    table: str
    target: str
    """mapped (a rule's table), generic (`ddl_<struct>`), payload (adtf_payloads)"""
    rule: str | None = None
    layer: str | None = None
    file: str | None = None
    note: str | None = None
    """why a matching rule does not apply (the stream then lands in its generic table)"""
    frame_id: str | None = None
    """the sensor frame of the rows (mapped streams: the rule's frame_id, else the name)"""

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @property
    def how(self) -> str:
        """One phrase for a terminal: `rule imu (user)`, `generic`, or `generic (rule x: ...)`."""
        if self.target == "mapped":
            return f"rule {self.rule} ({self.layer})"
        return f"{self.target} ({self.note})" if self.note else self.target


def _props(stream: Stream) -> dict[str, str]:
    return {
        k: p.value for k, p in (stream.stream_type.properties.items() if stream.stream_type else ())
    }


def _type(stream: Stream) -> str:
    meta = stream.meta_type or stream.kind
    return f"{meta}:{stream.ddl_struct}" if stream.ddl_struct else meta


def _generic_table(stream: Stream) -> tuple[str, str]:
    if stream.ddl is not None and stream.ddl_struct is not None:
        return table_name(stream.ddl_struct), "generic"
    return ADTF_PAYLOADS.name, "payload"


def stream_placements(stream: Stream, mapping: Mapping) -> Iterator[StreamPlacement]:
    """The placement of one stream, or of each substream when no rule takes the stream and
    it has substreams (the normalizer's decision, in `_make_job`'s order)."""
    stream = with_plain_type(stream)
    found = mapping.lookup(stream.name, stream.meta_type, stream.ddl_struct, _props(stream))
    base = {"stream": stream.name, "type": _type(stream), "ddl_struct": stream.ddl_struct}
    if found is None:
        subs = substream_streams(stream)
        if subs:
            for sub in subs.values():
                yield from stream_placements(sub, mapping)
            return
        table, target = _generic_table(stream)
        yield StreamPlacement(**base, table=table, target=target)
        return
    where = {"rule": found.rule.name, "layer": found.layer, "file": found.path}
    problem = None if found.rule.decoder == "video" else _check_rule(stream, found.rule)
    if problem is not None:
        table, target = _generic_table(stream)
        note = f"rule {found.rule.name} cannot apply: {problem}"
        yield StreamPlacement(**base, table=table, target=target, note=note, **where)
        return
    frame = found.rule.frame_id or stream.name
    yield StreamPlacement(**base, table=found.rule.table, target="mapped", frame_id=frame, **where)


def placements(path: str | Path, mapping: Mapping) -> dict[int, list[StreamPlacement]]:
    """stream id → where its samples land (several entries: its substreams)."""
    with open_dat(path, strict=False) as f:
        return {s.stream_id: list(stream_placements(s, mapping)) for s in f.streams}


def placement_rows(info: dict, found: dict[int, list[StreamPlacement]]) -> list[list[str]]:
    """Rows (id, stream, table, how) for a terminal table, in the order of `info_dict`."""
    rows = []
    for s in info["streams"]:
        for p in found.get(s["stream_id"], []):
            rows.append([str(s["stream_id"]), p.stream, p.table, p.how])
    return rows


def render_placements(mapping: Mapping, rows: list[list[str]]) -> str:
    layers = ", ".join(f"{o.layer} {o.path}" for o in mapping.layers) or "none"
    lines = [f"mapping:     {layers}"]
    lines += table_lines([["id", "stream", "table", "how"], *rows], indent="  ")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# mapping suggest


@dataclass(frozen=True)
class Leaf:
    """One element of a struct as a mapping names it (`a.b`, `arr[2]`)."""

    path: str
    type: str
    arraysize: int | str
    unit: str | None
    words: tuple[str, ...]
    """the path's segments, type prefixes dropped, lower case, letters and digits only"""
    item: bool = False
    """an item of a short array (`acc[0]`), offered as an axis"""

    @property
    def name(self) -> str:
        return self.words[-1] if self.words else ""

    @property
    def scalar(self) -> bool:
        return self.arraysize == 1


_PREFIX = re.compile(
    r"^(?:f32|f64|ui8|ui16|ui32|ui64|i8|i16|i32|i64|u8|u16|u32|u64|aui8|aui16|aui32|af32|af64"
    r"|ai8|ai16|ai32|tm|sz|str|b|n|e|s|st|a|m)(?=[A-Z_])"
)
"""Hungarian type prefixes of ADTF code (`f32AccX`, `ui8Length`, `tmTimeStamp`)."""


def _word(segment: str) -> str:
    return re.sub(r"[^a-z0-9]", "", _PREFIX.sub("", segment).lower())


def _xml(text: str):
    """The DDL text as an XML tree (a fragment wrapped), or None when it does not parse."""
    body = re.sub(r"^\s*<\?xml[^>]*\?>", "", text, count=1, flags=re.S)
    try:
        return SafeET.fromstring(f"<wrap>{body}</wrap>")
    except (SafeET.ParseError, DefusedXmlException):  # units are only a comment
        return None


def _units(texts: list[str]) -> dict[tuple[str, str], str]:
    """(struct, element) → unit as the DDL writes it (a base unit shown by its symbol)."""
    out: dict[tuple[str, str], str] = {}
    for root in filter(lambda r: r is not None, map(_xml, texts)):
        symbols = {}
        for el in root.iter():
            tag = el.tag.rsplit("}", 1)[-1]
            if tag == "baseunit" and el.get("name"):
                symbols[el.get("name")] = el.get("symbol") or el.get("name")
        for st in root.iter():
            if st.tag.rsplit("}", 1)[-1] != "struct" or not st.get("name"):
                continue
            for el in st:
                if el.tag.rsplit("}", 1)[-1] == "element" and el.get("unit"):
                    unit = el.get("unit")
                    out[(st.get("name"), el.get("name", ""))] = symbols.get(unit, unit)
    return out


def _leaves(
    ddl: DDL, struct: str, units: dict, prefix: str = "", words: tuple[str, ...] = (), depth=0
) -> list[Leaf]:
    out: list[Leaf] = []
    for e in ddl.struct(struct).elements:
        path = f"{prefix}{e.name}"
        w = (*words, _word(e.name))
        unit = units.get((struct, e.name))
        if e.type in ddl.structs and e.arraysize == 1 and depth < 8:
            out += _leaves(ddl, e.type, units, f"{path}.", w, depth + 1)
        else:
            out.append(Leaf(path, e.type, e.arraysize, unit, w))
            if isinstance(e.arraysize, int) and 1 < e.arraysize <= 4 and e.type not in ddl.structs:
                for i in range(e.arraysize):  # arr[0..2] as axes
                    out.append(Leaf(f"{path}[{i}]", e.type, 1, unit, (*w, "xyzw"[i]), True))
    return out


def _axis(leaf: Leaf) -> tuple[str, str] | None:
    """(stem, axis) of an axis-like scalar: `accX`, `acc.x`, `acc_x`, `acc[0]`."""
    if not leaf.scalar or not leaf.words:
        return None
    if len(leaf.words) > 1 and leaf.words[-1] in ("x", "y", "z"):
        return leaf.words[-2], leaf.words[-1]
    name = leaf.words[-1]
    if len(name) > 1 and name[-1] in "xyz":
        return name[:-1], name[-1]
    return None


ACC = re.compile(r"^(lin(ear)?)?(acc|accel|acceleration)s?(mps2|ms2|g)?$|^a$")
GYRO = re.compile(
    r"^(gyro|gyr|omega|w|angvel|angularvel|angularvelocity|angularrate|angrate|rotrate"
    r"|rotationrate|turnrate)s?(rads|rps|dps|degs)?$"
)
MAG = re.compile(r"^(mag|magn|magnetic|magneticfield)$")
GNSS_WORDS: dict[str, re.Pattern] = {
    "lat_deg": re.compile(r"^(lat|latitude)(deg|degrees|wgs84)?$"),
    "lon_deg": re.compile(r"^(lon|lng|long|longitude)(deg|degrees|wgs84)?$"),
    "alt_m": re.compile(r"^(alt|altitude|height|elev|elevation|hmsl|altmsl|heightmsl)(m|msl)?$"),
    "speed_mps": re.compile(r"^(speed|groundspeed|gspeed|sog|hspeed|velocity)(mps|ms|kmh|kph)?$"),
    "track_rad": re.compile(r"^(heading|course|track|cog)(deg|rad)?$"),
    "fix_mode": re.compile(r"^(fix|fixtype|fixmode|fixstatus|gpsfix|fixquality|mode)$"),
    "num_sats": re.compile(
        r"^(sats|sat|satellites|numsats|numsat|numsv|nsat|nsats|nsv|svs|satcount|numsatellites"
        r"|satellitesused)$"
    ),
    "error_m": re.compile(r"^(hacc|horizacc|horizontalaccuracy|poserror|accuracy)(m)?$"),
}
CAN_WORDS: dict[str, re.Pattern] = {
    "can_id": re.compile(
        r"^(id|canid|msgid|messageid|identifier|arbid|arbitrationid|frameid|ident)$"
    ),
    "data": re.compile(r"^(data|payload|bytes|candata|msgdata|framedata|msg)$"),
    "dlc": re.compile(r"^(dlc|len|length|size|datalength|datalen|bytecount|numbytes)$"),
    "channel": re.compile(
        r"^(channel|chan|ch|bus|busid|busnumber|port|canchannel|canbus|net|network|channelid)$"
    ),
    "flags": re.compile(r"^(flags|flag|frameflags|msgflags)$"),
    "tag": re.compile(r"^tag$"),
}
TIME_WORDS = re.compile(
    r"^(t|ts|time|timestamp|stamp|tstamp|devicetime|sensortime|hwtime|measurementtime"
    r"|capturetime|acqtime|timestampdevice|devicetimestamp)$"
)
TIME_SUFFIX = (("nsec", "ns"), ("ns", "ns"), ("usec", "us"), ("us", "us"), ("msec", "ms"),
               ("ms", "ms"), ("sec", "s"), ("s", "s"))  # fmt: skip
UNIT_TIME = {"ns": "ns", "nanosecond": "ns", "us": "us", "µs": "us", "microsecond": "us",
             "ms": "ms", "millisecond": "ms", "s": "s", "second": "s", "Second": "s"}  # fmt: skip
INT_TYPES = frozenset({"tInt8", "tUInt8", "tInt16", "tUInt16", "tInt32", "tUInt32", "tInt64",
                       "tUInt64", "tChar"})  # fmt: skip
BYTE_TYPES = frozenset({"tUInt8", "tInt8", "tChar"})


POINT_WORDS: dict[str, re.Pattern] = {
    "x": re.compile(r"^(x|px|posx|xm)$"),
    "y": re.compile(r"^(y|py|posy|ym)$"),
    "z": re.compile(r"^(z|pz|posz|zm)$"),
    "intensity": re.compile(r"^(intensity|int|i|refl|reflectivity|reflectance|amplitude)$"),
    "ring": re.compile(r"^(ring|ringid|layer|laser|laserid|line|beam|channel)$"),
    "time_offset_ns": re.compile(r"^(timeoffset|toffset|offset|dt|time)ns$"),
}
SCAN_ID = re.compile(r"^(frameid|frame|scanid|scan|seq|sequence|counter|framecounter|scancounter)$")


@dataclass
class Guess:
    table: str
    decoder: str = "struct"
    fields: dict[str, tuple[str, float, str | None]] | None = None
    """column → (element, scale, comment)"""
    missing: str | None = None
    """why the rule cannot be live (it is written commented out)"""
    points: tuple[str, dict[str, str]] | None = None
    """lidar: the point array element and point column → point element"""
    scan_id: str | None = None


def _lidar(ddl: DDL, struct: str, units: dict) -> Guess | None:
    """A scan: a dynamic array of point structs with x, y and z."""
    for e in ddl.struct(struct).elements:
        if e.type not in ddl.structs or not isinstance(e.arraysize, str):
            continue
        pleaves = [leaf for leaf in _leaves(ddl, e.type, units) if leaf.scalar and not leaf.item]
        fields: dict[str, str] = {}
        for column, pattern in POINT_WORDS.items():
            hit = next((leaf for leaf in pleaves if pattern.match(leaf.name)), None)
            if hit is not None:
                fields[column] = hit.path
        if not {"x", "y", "z"} <= set(fields):
            continue
        scan_id = next(
            (
                x.name
                for x in ddl.struct(struct).elements
                if x.arraysize == 1 and SCAN_ID.match(_word(x.name)) and x.type in INT_TYPES
            ),
            None,
        )
        return Guess("lidar_scans", "lidar", {}, points=(e.name, fields), scan_id=scan_id)
    return None


def _sensor_time(leaves: list[Leaf]) -> tuple[Leaf, str | None] | None:
    """The device-time element and its unit (None when neither name nor DDL says)."""
    found = []
    for leaf in leaves:
        if not leaf.scalar or leaf.type not in INT_TYPES | {"tFloat64"}:
            continue
        name = leaf.name
        unit = UNIT_TIME.get(leaf.unit or "")
        if TIME_WORDS.match(name):
            found.append((leaf, unit))
            continue
        for suffix, u in TIME_SUFFIX:
            stem = name[: -len(suffix)]
            if name.endswith(suffix) and TIME_WORDS.match(stem.rstrip("_")):
                if u == "s" and leaf.type != "tFloat64" and unit is None:
                    break  # integer seconds: not a device clock
                found.append((leaf, unit or u))
                break
    found.sort(key=lambda f: f[1] is None)  # a known unit first
    return found[0] if found else None


def _guess(leaves: list[Leaf]) -> Guess | None:
    by_name: dict[str, list[Leaf]] = {}
    for leaf in leaves:
        by_name.setdefault(leaf.name, []).append(leaf)
    # CAN: an id, a byte array and a length
    can: dict[str, Leaf] = {}
    for column, pattern in CAN_WORDS.items():
        for leaf in leaves:
            if not pattern.match(leaf.name) or leaf.item:
                continue
            if column == "data":
                if (
                    leaf.type in BYTE_TYPES
                    and isinstance(leaf.arraysize, int)
                    and leaf.arraysize >= 8
                ):
                    can[column] = leaf
                    break
            elif leaf.scalar and leaf.type in INT_TYPES:
                can[column] = leaf
                break
    if {"can_id", "data", "dlc"} <= set(can):
        fields = {c: (leaf.path, 1.0, None) for c, leaf in can.items()}
        missing = None if "channel" in can else "no element names the CAN channel (bus)"
        return Guess("can_frames", "can", fields, missing)
    # IMU: three axes of acceleration or of angular rate
    axes: dict[tuple[str, str], Leaf] = {}
    for leaf in leaves:
        ax = _axis(leaf)
        if ax is None or leaf.type not in INT_TYPES | {"tFloat32", "tFloat64"}:
            continue
        stem, axis = ax
        for kind, pattern in (("acc", ACC), ("gyro", GYRO), ("mag", MAG)):
            if pattern.match(stem) and (kind, axis) not in axes:
                axes[(kind, axis)] = leaf
    kinds = {k for k in ("acc", "gyro") if all((k, a) in axes for a in "xyz")}
    if kinds:
        fields = {}
        column = {"acc": "linear_acceleration", "gyro": "angular_velocity", "mag": "magnetic_field"}
        for kind in ("acc", "gyro", "mag"):
            if not all((kind, a) in axes for a in "xyz"):
                continue
            for a in "xyz":
                leaf = axes[(kind, a)]
                scale, note = 1.0, None
                unit = (leaf.unit or "").lower()
                if kind == "gyro" and ("deg" in unit or leaf.name.endswith(("dps", "degs"))):
                    scale, note = DEG, "deg/s → rad/s"
                elif kind == "acc" and (unit == "g" or leaf.name.endswith("g")):
                    scale, note = G, "g → m/s²"
                fields[f"{column[kind]}_{a}"] = (leaf.path, scale, note)
        return Guess("imu", "struct", fields)
    # GNSS: latitude and longitude
    gnss: dict[str, Leaf] = {}
    for column, pattern in GNSS_WORDS.items():
        for leaf in leaves:
            if leaf.scalar and pattern.match(leaf.name) and column not in gnss:
                gnss[column] = leaf
    if {"lat_deg", "lon_deg"} <= set(gnss):
        fields = {}
        for column, leaf in gnss.items():
            scale, note = 1.0, None
            unit = (leaf.unit or "").lower()
            if column in ("lat_deg", "lon_deg") and leaf.type in INT_TYPES:
                note = "an integer: set the scale (1e-7 for degrees * 1e7)"
            elif column == "track_rad":
                if "rad" in unit or leaf.name.endswith("rad"):
                    note = "radians"
                else:
                    scale, note = DEG, "assumed degrees; drop the scale if radians"
            elif column == "speed_mps" and ("km" in unit or leaf.name.endswith(("kmh", "kph"))):
                scale, note = 1 / 3.6, "km/h → m/s"
            elif column == "fix_mode" and leaf.name == "mode":
                note = "check: a GNSS fix mode?"
            fields[column] = (leaf.path, scale, note)
        return Guess("gnss", "struct", fields)
    return None


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_YAML_WORDS = frozenset(
    {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}
)  # plain scalars YAML would not read back as the same string


def _q(text: str) -> str:
    """A YAML scalar for `text` (plain when safe, else JSON-quoted, which YAML reads)."""
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)


def _glob(name: str) -> str:
    """A glob matching exactly `name`."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _rule_name(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "rule"


def _element_comment(leaf: Leaf) -> str:
    size = "" if leaf.arraysize == 1 else f"[{leaf.arraysize}]"
    unit = f"  unit: {leaf.unit}" if leaf.unit else ""
    return f"{leaf.path:<28} {leaf.type}{size}{unit}"


def _topic(table: str) -> str:
    return {
        "imu": "/sensor/imu/{stream}",
        "gnss": "/sensor/gps/{stream}",
        "can_frames": "/vehicle/can/{channel}",
        "lidar_scans": "/sensor/lidar/{stream}",
    }.get(table, "/adtf/{stream}")


def _rule_lines(name: str, struct: str, guess: Guess, leaves: list[Leaf]) -> list[str]:
    lines = [
        f"- name: {_q(name)}",
        f"  match: {{struct: {_q(_glob(struct))}}}",
        f"  table: {guess.table}",
    ]
    if guess.decoder != "struct":
        lines.append(f"  decoder: {guess.decoder}")
    lines.append(f"  topic: {_q(_topic(guess.table))}")
    time = _sensor_time(leaves)
    if time is not None:
        leaf, unit = time
        if unit is None:
            lines.append(
                f"  # sensor_time: {{element: {_q(leaf.path)}, unit: us}}"
                "  # unit? ns|us|ms|s; uncomment"
            )
        else:
            lines.append(f"  sensor_time: {{element: {_q(leaf.path)}, unit: {unit}}}")
    if guess.scan_id:
        lines.append(f"  sensor_scan_id: {_q(guess.scan_id)}")
    if guess.points is not None:
        element, pfields = guess.points
        lines += ["  points:", f"    element: {_q(element)}", "    fields:"]
        lines += [f"      {column}: {_q(e)}" for column, e in pfields.items()]
    if guess.fields:
        lines.append("  fields:")
    for column, (element, scale, note) in (guess.fields or {}).items():
        spec = _q(element) if scale == 1.0 else f"{{element: {_q(element)}, scale: {scale!r}}}"
        lines.append(f"    {column}: {spec}" + (f"  # {note}" if note else ""))
    if guess.decoder == "can":
        lines.append(
            "  # tCANData conventions (bit 31 of the id = extended frame); see the default"
        )
        lines.append("  can: {extended_bit: 31, remote_flag: 2, error_flag: 1, data_tags: [0]}")
    return lines


def _struct_streams(path: Path) -> list[tuple[Stream, dict]]:
    """The recording's streams as the normalizer sees them (plain types described,
    substreams split), each with its sample statistics from `info_dict`."""
    info = {s["stream_id"]: s for s in info_dict(path)["streams"]}
    out = []
    with open_dat(path, strict=False) as f:
        for stream in f.streams:
            stream = with_plain_type(stream)
            stats = info.get(stream.stream_id, {})
            subs = substream_streams(stream) if stream.ddl_struct is None else {}
            sub_stats = {"substream_of": stream.name}  # counts are the parent's
            out += [(sub, sub_stats) for sub in subs.values()] or [(stream, stats)]
    return out


def _ddl_texts(path: Path, stream: Stream) -> list[str]:
    texts = []
    props = _props(stream)
    if "md_definitions" in props:
        texts.append(props["md_definitions"])
    sidecar = Path(f"{path}.description")
    if stream.kind == "adtf2" and sidecar.is_file():
        texts.append(sidecar.read_text(encoding="utf-8", errors="replace"))
    return texts


def _stream_facts(stream: Stream, stats: dict) -> str:
    facts = [stream.meta_type or stream.kind]
    if "substream_of" in stats:
        facts.append(f"a substream of {stats['substream_of']}")
    if "samples" in stats:
        facts.append(f"{stats['samples']} samples")
    if stats.get("rate_hz"):
        facts.append(f"{stats['rate_hz']:.1f} Hz")
    return ", ".join(facts)


def suggest_mapping(path: str | Path) -> str:
    """A mapping skeleton for every stream of the recording at `path` (see the module doc)."""
    path = Path(path)
    default = load_mapping()
    streams = _struct_streams(path)
    by_struct: dict[str, list[tuple[Stream, dict]]] = {}
    no_ddl: list[tuple[Stream, dict]] = []
    for stream, stats in streams:
        if stream.ddl is not None and stream.ddl_struct is not None:
            by_struct.setdefault(stream.ddl_struct, []).append((stream, stats))
        else:
            no_ddl.append((stream, stats))
    out = [
        f"# ADTF stream mapping suggested by `bridge-lake mapping suggest` for {path.name}",
        f"# ({len(streams)} streams, {len(by_struct)} DDL structs). Edit it, then use it as the",
        "# user mapping ($BRIDGE_LAKE_ADTF_MAPPING, or --mapping of `bridge-lake mapping check`)",
        "# or as a drive's own (drive.yaml `mapping: FILE`). Layers match in the order drive,",
        "# user, default; the first matching rule wins. Rules left commented out change nothing:",
        "# their streams land in the generic table named beside them. Syntax: the header of",
        "# bridge_lake/normalize/adtf_mapping.yaml.",
        "version: 1",
        "rules:",
    ]
    live = 0
    names: set[str] = set()
    for struct, members in by_struct.items():
        stream = members[0][0]
        units = _units(_ddl_texts(path, stream))
        axes_leaves = _leaves(stream.ddl, struct, units)
        leaves = [leaf for leaf in axes_leaves if not leaf.item]
        out.append("")
        for s, stats in members:
            out.append(f"# stream {s.name!r} ({_stream_facts(s, stats)})")
        out.append(f"# DDL struct {struct}:")
        out += [f"#   {_element_comment(leaf)}" for leaf in leaves]
        found = default.lookup(stream.name, stream.meta_type, struct, _props(stream))
        if found is not None:
            out.append(
                f"# the shipped default maps it too (rule {found.rule.name} → {found.rule.table})"
            )
        guess = _lidar(stream.ddl, struct, units) or _guess(axes_leaves)
        name = _rule_name(f"{guess.table}_{struct}" if guess else struct)
        while name in names:
            name += "_"
        names.add(name)
        generic = table_name(struct)
        if guess is not None and guess.missing is None:
            out += [f"  {line}" for line in _rule_lines(name, struct, guess, axes_leaves)]
            live += 1
            continue
        if guess is not None:
            out.append(f"# not live: {guess.missing}; without a rule it lands in {generic}")
            body = _rule_lines(name, struct, guess, axes_leaves)
        else:
            out.append(f"# no table guessed: without a rule it lands in {generic}")
            body = [
                f"- name: {_q(name)}",
                f"  match: {{struct: {_q(_glob(struct))}}}",
                "  table: TABLE            # imu, gnss, heading, odometry, wheel_odometry, ...",
                "  fields:",
                "    COLUMN: ELEMENT       # or {element: E, scale: K, offset: C}",
            ]
        out += [f"  # {line}" for line in body]
    for stream, stats in no_ddl:
        out.append("")
        out.append(f"# stream {stream.name!r} ({_stream_facts(stream, stats)}): no DDL")
        props = _props(stream)
        found = default.lookup(stream.name, stream.meta_type, None, props)
        if found is not None:
            out.append(
                f"# the shipped default maps it (rule {found.rule.name} → {found.rule.table})"
            )
        if stream.meta_type == "adtf/video_compressed":
            codec = props.get("codec", "")
            name = _rule_name(f"video_{stream.name}")
            while name in names:
                name += "_"
            names.add(name)
            body = [
                f"- name: {_q(name)}",
                "  match:",
                f"    stream: {_q(_glob(stream.name))}",
                "    meta_type: adtf/video_compressed",
                f"    properties: {{codec: {_q(_glob(codec))}}}",
                "  table: camera_frames",
                "  decoder: video",
                "  encoding: h264",
                f"  topic: {_q('/sensor/camera_{stream}/image_raw/compressed')}",
            ]
            if codec.lower() == "h264":
                out += [f"  {line}" for line in body]
                live += 1
            else:
                out.append(
                    f"# codec {codec!r}: only H.264 is decoded; as it is, it lands in "
                    f"{ADTF_PAYLOADS.name}"
                )
                out += [f"  # {line}" for line in body]
        elif found is None:
            out.append(
                f"# its samples land as bytes in {ADTF_PAYLOADS.name}; a rule needs a DDL struct"
            )
    if live == 0:
        out[out.index("rules:")] = "rules: []  # nothing obvious: uncomment and edit rules below"
    text = "\n".join(out) + "\n"
    parse_mapping(text, path=f"suggestion for {path}")  # never hand out what does not load
    return text


# --------------------------------------------------------------------------------------------
# mapping check


def check_recording(path: str | Path, mapping: Mapping) -> list[dict]:
    """Normalize the recording into a temporary lake; per stream and table: rows read,
    written, quarantined, the most frequent quarantine reasons and how the table was chosen."""
    path = Path(path).resolve()
    found = {p.stream: p for ps in placements(path, mapping).values() for p in ps}
    with tempfile.TemporaryDirectory(prefix="bridge-lake-check-") as tmp:
        lake = Lake(tmp)
        with DriveSink(lake, "check") as sink:
            normalize_adtf(path.parent, sink, mapping, files=[path])
            result = sink.finish()
        reasons: dict[str, Counter] = {}
        if result.quarantined:
            q = lake.read_partition("normalized", QUARANTINE.name, "check", ["stream", "reason"])
            for stream, reason in zip(
                q.column("stream").to_pylist(), q.column("reason").to_pylist(), strict=True
            ):
                reasons.setdefault(stream, Counter())[reason] += 1
    rows = []
    for s in result.streams:
        p = found.get(s.info.stream)
        rows.append(
            {
                "stream": s.info.stream,
                "type": s.info.source_type,
                "table": s.info.table,
                "target": s.info.target,
                "rule": p.rule if p else None,
                "layer": p.layer if p else None,
                "file": p.file if p else None,
                "mapping": s.info.mapping or (p.how if p else None),
                "records_read": s.records_read,
                "rows_written": s.rows_written,
                "rows_quarantined": s.rows_quarantined,
                "reasons": dict(reasons.get(s.info.stream, Counter()).most_common()),
                "problem": p.note if p and p.note else None,
            }
        )
    return rows


def render_check(path: str | Path, mapping: Mapping, rows: list[dict]) -> str:
    layers = ", ".join(f"{o.layer} {o.path}" for o in mapping.layers) or "none"
    table = [["stream", "table", "how", "read", "written", "quarantined", "why"]]
    for r in rows:
        how = f"rule {r['rule']} ({r['layer']})" if r["target"] == "mapped" else r["target"]
        why = "; ".join(f"{reason} ({n})" for reason, n in list(r["reasons"].items())[:3])
        if r["problem"]:
            why = "; ".join(filter(None, [r["problem"], why]))
        table.append(
            [
                r["stream"],
                r["table"],
                how,
                str(r["records_read"]),
                str(r["rows_written"]),
                str(r["rows_quarantined"]),
                why,
            ]
        )
    lines = [f"file:     {path}", f"mapping:  {layers}"]
    lines += table_lines(table, indent="  ", right=(3, 4, 5))
    return "\n".join(lines) + "\n"


__all__ = [
    "StreamPlacement",
    "check_recording",
    "placements",
    "render_check",
    "stream_placements",
    "suggest_mapping",
]

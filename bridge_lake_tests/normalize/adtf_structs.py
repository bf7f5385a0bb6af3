"""Writer-made ADTF 3 recordings with DDL structs of any shape, for the mapping tests.

`Struct("tFoo", [("stamp_ns", "tInt64"), ("acc", "tFloat32", 3, "m/s^2"), ...])` gives the
DDL text (packed, little endian, `unit` attributes) and the numpy dtype of one sample, so a
test writes samples as numpy records and reads them back through the normalizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bridge_lake.formats.adtf.ddl import BASE_TYPES
from bridge_lake.formats.adtf.samples import Property, StreamType
from bridge_lake.formats.adtf.writer import DatWriter

T0 = 1_700_000_000_000_000_000
"""First chunk time (ns since the epoch) of the recordings written here."""


@dataclass(frozen=True)
class Struct:
    name: str
    elements: list[tuple]
    """(name, DDL type[, arraysize[, unit]]) in byte order, packed."""

    @property
    def dtype(self) -> np.dtype:
        fields = []
        for e in self.elements:
            code = "<" + BASE_TYPES[e[1]]
            size = e[2] if len(e) > 2 else 1
            fields.append((e[0], code, size) if size > 1 else (e[0], code))
        return np.dtype(fields)

    @property
    def ddl(self) -> str:
        out, pos = [f'<struct name="{self.name}" alignment="1" version="1">'], 0
        for e in self.elements:
            size = e[2] if len(e) > 2 else 1
            unit = f' unit="{e[3]}"' if len(e) > 3 and e[3] else ""
            out.append(
                f'<element name="{e[0]}" type="{e[1]}" arraysize="{size}" bytepos="{pos}" '
                f'byteorder="LE" alignment="1"{unit}/>'
            )
            pos += np.dtype(BASE_TYPES[e[1]]).itemsize * size
        out.append("</struct>")
        return "".join(out)

    def stream_type(self) -> StreamType:
        return StreamType(
            "adtf/default",
            {
                "md_struct": Property("cString", self.name),
                "md_definitions": Property("cString", f"<structs>{self.ddl}</structs>"),
                "md_data_serialized": Property("tBool", "false"),
            },
        )


def write_recording(path: Path, streams: dict[str, tuple[Struct, np.ndarray]]) -> Path:
    """One IFHD 0x0500 recording: stream name -> (struct, records of its dtype), 10 ms apart,
    the streams interleaved."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with DatWriter(path, version=0x0500) as w:
        ids = {
            name: w.add_stream(name, stream_type=s.stream_type())
            for name, (s, _) in streams.items()
        }
        writes = [
            (T0 + k * 10_000_000 + j, ids[name], rec.tobytes())
            for j, (name, (_, records)) in enumerate(streams.items())
            for k, rec in enumerate(records)
        ]
        for t, sid, payload in sorted(writes, key=lambda w: w[0]):
            w.write_sample(sid, t, payload)
    return path


def records(struct: Struct, n: int, **values) -> np.ndarray:
    """`n` zeroed records of `struct` with the given fields set (scalars or arrays)."""
    out = np.zeros(n, dtype=struct.dtype)
    for k, v in values.items():
        out[k] = v
    return out

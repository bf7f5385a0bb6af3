"""The shape of a table spec: columns with the words that document them."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

F64, F32 = pa.float64(), pa.float32()


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True


@dataclass(frozen=True)
class TableSpec:
    layer: str
    name: str
    description: str
    columns: tuple[Column, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns],
            metadata={"bridge_lake.table": f"{self.layer}/{self.name}"},
        )


def lidar_point_columns(scans: str, frame: str) -> tuple[Column, ...]:
    """The columns of a lidar point row, normalized (sensor frame) and calibrated (base_link)
    alike: its scan (`scans`: the lidar_scans table as the layer names it), position in
    `frame` ("" for the sensor frame), intensity, ring and time within the scan."""
    where = f" in {frame}" if frame else ""
    return (
        Column("scan_id", pa.int64(), f"scan ({scans}.scan_id)", nullable=False),
        *(Column(axis, F32, f"{axis}{where} [m]", nullable=False) for axis in "xyz"),
        Column("intensity", F32, "return intensity (sensor units)"),
        Column("ring", pa.int16(), "laser ring, 0 = lowest elevation"),
        Column("time_offset_ns", pa.int32(), "point time minus scan start [ns]"),
    )

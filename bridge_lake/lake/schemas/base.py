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

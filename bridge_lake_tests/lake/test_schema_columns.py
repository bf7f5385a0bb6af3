"""The compact column tables the lake schemas are written in (lake.schemas.base.columns)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from bridge_lake.lake.schemas.base import TIME_NS, Column, columns, struct


def test_columns_reads_types_nullability_continuations_and_groups() -> None:
    point = struct("x float32!, label string")
    cols = columns(
        (TIME_NS,),
        """
        name    string!          who | what
        k       list<float64>[9] camera matrix
        hits    list<POINT>      every point, in order, a description long enough to go on
            past the line
        """,
        structs={"POINT": point},
    )
    assert cols == (
        TIME_NS,
        Column("name", pa.string(), "who | what", nullable=False),
        Column("k", pa.list_(pa.float64(), 9), "camera matrix"),
        Column("hits", pa.list_(point), "every point, in order, a description long enough to "
               "go on past the line"),
    )  # fmt: skip
    assert point == pa.struct([pa.field("x", pa.float32(), False), ("label", pa.string())])


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("\n    name  string\n", "expected `name  type  description`"),
        ("\n    name  float128  a float\n", "'float128' is none of"),
        ("\n    name  list<MATCH>  matches\n", "'MATCH' is none of"),
    ],
)
def test_a_bad_column_line_is_named(table: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        columns(table)

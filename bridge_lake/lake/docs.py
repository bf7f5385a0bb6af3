"""docs/tables.md, generated from bridge_lake.lake.schemas so the two cannot disagree.

Regenerate with `python -m bridge_lake.lake.docs > docs/tables.md`; a test fails when the
committed file is stale.
"""

from __future__ import annotations

from bridge_lake.lake.schemas import TABLES


def render_tables_md() -> str:
    lines = [
        "# Lake tables",
        "",
        "Generated from `bridge_lake/lake/schemas/` by `python -m bridge_lake.lake.docs`; "
        "do not edit by hand.",
        "",
        "Every table lives at `<lake>/<layer>/<table>/drive=<drive_id>/part-<n>.parquet`; "
        "`drive` is the Hive partition column, not stored inside the files.",
        "",
    ]
    for spec in TABLES:
        lines += [f"## {spec.layer}/{spec.name}", "", spec.description, ""]
        lines += ["| column | type | nullable | meaning |", "|---|---|---|---|"]
        for c in spec.columns:
            lines.append(
                f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {c.description} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_tables_md(), end="")

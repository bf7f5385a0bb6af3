"""Scene rules: DuckDB SQL files over the lake's views, with their parameters from a config.

A rule is `sql/scenes/<name>.sql`, one SELECT returning `drive, t_start_ns, t_end_ns, tag,
score` for the drive bound as `$drive`. Every other `$name` in it is a parameter whose value
comes from the params file (bridge_lake/scenes/params.yaml: defaults per rule, overrides per
drive source) and is bound as a prepared-statement parameter, never pasted into the SQL: a
value is only ever a value. Rules and parameters are checked against each other when loaded
(a parameter without a value, a value no rule uses), and every failure raises a
SceneRuleError starting with the file at fault (the rule, or the params file), so a broken
rule says where it is.

The rules live in the repository's sql/ folder beside views.sql, which a wheel does not ship;
`load_rules(folder)` and the asset's `rules_dir` take any other folder.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import yaml

from bridge_lake.errors import BridgeLakeError
from bridge_lake.lake.schemas import TABLES
from bridge_lake.lake.views import view_name
from bridge_lake.yaml_input import safe_load

RULES_DIR = Path(__file__).resolve().parents[2] / "sql" / "scenes"
"""The shipped rules (sql/scenes/ of the repository)."""
PARAMS_FILE = Path(__file__).with_name("params.yaml")
"""The shipped parameters."""
OUTPUT = pa.schema(
    [
        pa.field("drive", pa.string(), nullable=False),
        pa.field("t_start_ns", pa.int64(), nullable=False),
        pa.field("t_end_ns", pa.int64(), nullable=False),
        pa.field("tag", pa.string(), nullable=False),
        pa.field("score", pa.float64(), nullable=False),
    ]
)
"""What every rule returns, in this order."""
HITS = pa.schema([*OUTPUT, pa.field("rule", pa.string()), pa.field("rule_hash", pa.string())])
"""Rule output with the rule's name and the sha256 of its SQL."""
RESERVED = frozenset({"drive"})
"""Parameters the runner binds itself."""
SECTIONS = frozenset({"catalog", "camera_stats", "rules", "sources"})

Scalar = bool | int | float | str


class SceneRuleError(BridgeLakeError):
    """A scene rule or its parameters cannot run; the message starts with the file."""

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Rule:
    """One rule file: its SQL, the hash that identifies this version of it, its parameters."""

    name: str
    path: Path
    sql: str
    sha256: str
    params: frozenset[str]
    """`$names` the SQL uses, `drive` excluded."""
    reads: tuple[tuple[str, str], ...] = ()
    """(layer, table) of every lake view the SQL names."""


@dataclass(frozen=True)
class SceneParams:
    """The parameter file: per-rule defaults, per-source overrides, catalog and camera knobs."""

    path: Path
    rules: dict[str, dict[str, Scalar]]
    sources: dict[str, dict[str, dict[str, Scalar]]] = field(default_factory=dict)
    catalog: dict[str, Scalar] = field(default_factory=dict)
    camera_stats: dict[str, Scalar | None] = field(default_factory=dict)

    def for_rule(self, rule: str, source: str | None) -> dict[str, Scalar]:
        """The values a rule runs with on a drive of `source`: defaults, then overrides."""
        values = dict(self.rules.get(rule, {}))
        values.update(self.sources.get(source or "", {}).get(rule, {}))
        return values

    @property
    def pad_ns(self) -> int:
        return round(float(self.catalog.get("pad_s", 0.0)) * 1e9)

    @property
    def max_rate_hz(self) -> float | None:
        rate = self.camera_stats.get("max_rate_hz")
        return float(rate) if rate else None


@dataclass(frozen=True)
class RuleRun:
    """How one rule went on one drive: its hits (HITS schema), rows and seconds."""

    rule: Rule
    hits: pa.Table
    seconds: float
    params: dict[str, Scalar]


def load_rule(path: Path) -> Rule:
    """One rule file, parsed (DuckDB's parser names its parameters); SceneRuleError if it
    cannot be read or is not exactly one SELECT."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise SceneRuleError(path, f"cannot read the rule: {e.strerror or e}") from e
    try:
        sql = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SceneRuleError(path, f"not UTF-8 text (byte {e.start})") from e
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise SceneRuleError(path, f"not valid SQL: {e}") from e
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = [st.type.name for st in statements] or "nothing"
        raise SceneRuleError(path, f"a rule is one SELECT statement; this holds {kinds}")
    if "drive" not in statements[0].named_parameters:
        raise SceneRuleError(path, "a rule selects its drive with $drive; this one does not")
    params = frozenset(statements[0].named_parameters) - RESERVED
    reads = tuple(
        (spec.layer, spec.name)
        for spec in TABLES
        if re.search(rf"\b{view_name(spec.layer, spec.name)}\b", sql)
    )
    return Rule(path.stem, path, sql, hashlib.sha256(raw).hexdigest(), params, reads)


def load_rules(rules_dir: Path | str | None = None) -> list[Rule]:
    """Every `*.sql` of the rules folder (default RULES_DIR), by name."""
    folder = Path(rules_dir) if rules_dir is not None else RULES_DIR
    if not folder.is_dir():
        raise SceneRuleError(folder, "no such rules folder")
    rules = [load_rule(p) for p in sorted(folder.glob("*.sql"))]
    if not rules:
        raise SceneRuleError(folder, "no rule (*.sql) in the rules folder")
    return rules


def load_params(path: Path | str | None = None) -> SceneParams:
    """The params file (default PARAMS_FILE), its shape checked; values must be scalars."""
    path = Path(path) if path is not None else PARAMS_FILE
    try:
        doc = safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SceneRuleError(path, f"cannot read the parameters: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise SceneRuleError(path, f"not valid YAML: {e}") from e
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise SceneRuleError(path, "the top level must be a mapping")
    unknown = sorted(set(doc) - SECTIONS)
    if unknown:
        raise SceneRuleError(path, f"unknown sections {unknown}; expected {sorted(SECTIONS)}")
    rules = _rule_values(path, "rules", doc.get("rules") or {})
    sources_doc = _mapping(path, "sources", doc.get("sources") or {})
    sources = {str(s): _rule_values(path, f"sources.{s}", v or {}) for s, v in sources_doc.items()}
    catalog = _scalars(path, "catalog", doc.get("catalog") or {})
    camera = _mapping(path, "camera_stats", doc.get("camera_stats") or {})
    for key, value in camera.items():
        if value is not None and not isinstance(value, int | float):
            raise SceneRuleError(path, f"camera_stats.{key} must be a number or null")
    for key, value in catalog.items():
        if key != "pad_s":
            raise SceneRuleError(path, f"catalog.{key} is not a setting (pad_s)")
        if not isinstance(value, int | float) or value < 0:
            raise SceneRuleError(path, "catalog.pad_s must be a number ≥ 0")
    return SceneParams(path, rules, sources, catalog, dict(camera))


def _mapping(path: Path, where: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise SceneRuleError(path, f"{where} must be a mapping")
    return value


def _scalars(path: Path, where: str, value: Any) -> dict[str, Scalar]:
    out = {}
    for key, v in _mapping(path, where, value).items():
        if not isinstance(v, bool | int | float | str):
            raise SceneRuleError(path, f"{where}.{key} must be a number, text or boolean")
        out[str(key)] = v
    return out


def _rule_values(path: Path, where: str, value: Any) -> dict[str, dict[str, Scalar]]:
    return {
        str(rule): _scalars(path, f"{where}.{rule}", v or {})
        for rule, v in _mapping(path, where, value).items()
    }


def check_rules(rules: list[Rule], params: SceneParams) -> None:
    """Rules and parameters agree: every `$name` of a rule has a default value, every value
    (default or override) is a parameter of an existing rule, `drive` is never set."""
    by_name = {r.name: r for r in rules}
    for rule in rules:
        given = set(params.rules.get(rule.name, {}))
        missing = sorted(rule.params - given)
        if missing:
            raise SceneRuleError(
                rule.path,
                f"parameters {['$' + m for m in missing]} have no value in "
                f"{params.path} (rules.{rule.name})",
            )
    sections = [("rules", params.rules)] + [
        (f"sources.{s}", v) for s, v in sorted(params.sources.items())
    ]
    for where, values in sections:
        for name, given in values.items():
            rule = by_name.get(name)
            if rule is None:
                raise SceneRuleError(
                    params.path, f"{where}.{name}: no rule {name}.sql in {_folder(rules)}"
                )
            extra = sorted(set(given) - rule.params)
            if extra:
                raise SceneRuleError(
                    rule.path,
                    f"{where}.{name} in {params.path} sets {extra}, which the rule does not use "
                    f"(its parameters: {sorted(rule.params)})",
                )


def _folder(rules: list[Rule]) -> str:
    return str(rules[0].path.parent) if rules else "the rules folder"


def run_rule(
    con: duckdb.DuckDBPyConnection, rule: Rule, drive: str, values: Mapping[str, Scalar]
) -> RuleRun:
    """Run one rule for one drive with its values bound; its rows checked and typed."""
    bound = {k: values[k] for k in sorted(rule.params)}
    bound["drive"] = drive
    started = time.perf_counter()
    try:
        table = con.sql(rule.sql, params=bound).to_arrow_table()
    except duckdb.Error as e:
        raise SceneRuleError(rule.path, f"the rule failed: {e}") from e
    seconds = time.perf_counter() - started
    if table.column_names != OUTPUT.names:
        raise SceneRuleError(
            rule.path, f"returns columns {table.column_names}; a rule returns {OUTPUT.names}"
        )
    nulls = [c for c in OUTPUT.names if table.column(c).null_count]
    if nulls:
        raise SceneRuleError(rule.path, f"returns nulls in {nulls}")
    try:
        table = table.cast(OUTPUT)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise SceneRuleError(rule.path, f"returns values of the wrong type: {e}") from e
    drives = set(table.column("drive").unique().to_pylist())
    if drives - {drive}:
        raise SceneRuleError(rule.path, f"returns rows of other drives {sorted(drives - {drive})}")
    starts, ends = table.column("t_start_ns").to_numpy(), table.column("t_end_ns").to_numpy()
    if (ends < starts).any():
        raise SceneRuleError(rule.path, "returns a window that ends before it starts")
    n = table.num_rows
    table = table.append_column(HITS.field("rule"), pa.array([rule.name] * n, pa.string()))
    table = table.append_column(HITS.field("rule_hash"), pa.array([rule.sha256] * n, pa.string()))
    return RuleRun(rule, table, seconds, dict(values))


def run_rules(
    con: duckdb.DuckDBPyConnection,
    drive: str,
    rules: list[Rule],
    params: SceneParams,
    source: str | None,
) -> list[RuleRun]:
    """Every rule for one drive, with the values for the drive's source."""
    check_rules(rules, params)
    return [run_rule(con, r, drive, params.for_rule(r.name, source)) for r in rules]


def hits_table(runs: list[RuleRun]) -> pa.Table:
    """All hits of the runs in one table (HITS schema), by start time then rule."""
    tables = [r.hits for r in runs if r.hits.num_rows]
    if not tables:
        return HITS.empty_table()
    hits = pa.concat_tables(tables)
    return hits.sort_by([("t_start_ns", "ascending"), ("rule", "ascending")])

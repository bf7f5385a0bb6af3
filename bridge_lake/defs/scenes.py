"""scene_catalog: what the scene rules (sql/scenes/) found in a drive, as scenes with windows,
tags and the hashes of the rules that found them; the input of scene sets."""

from collections.abc import Iterator

import dagster as dg

from bridge_lake.defs.calibrated import ASSET_TABLES
from bridge_lake.defs.calibrated import asset_name as calibrated_asset
from bridge_lake.defs.checks import check_result, check_specs, column_schema
from bridge_lake.defs.normalized import asset_name as normalized_asset
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.resources import LakeResource
from bridge_lake.defs.versions import REPO_SQL, code_version
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.lake.schemas.scenes import CATALOG
from bridge_lake.scenes.catalog import CHECKS, build_scene_catalog, findings
from bridge_lake.scenes.rules import SceneRuleError

ASSET = "scene_catalog"


class SceneConfig(dg.Config):
    """Where the rules and their parameters come from (default: the shipped ones)."""

    rules_dir: str | None = None
    """folder of rule files (*.sql); default sql/scenes/ of the repository"""
    params_file: str | None = None
    """parameter YAML; default bridge_lake/scenes/params.yaml"""


@dg.asset(
    name=ASSET,
    partitions_def=drives,
    code_version=code_version(__name__, REPO_SQL),
    group_name="scenes",
    kinds={"parquet", "duckdb"},
    deps=[normalized_asset(t) for t in NORMALIZED] + [calibrated_asset(t) for t in ASSET_TABLES],
    description=CATALOG.description,
    metadata={"table": "scenes/catalog"},
    check_specs=check_specs(ASSET, CHECKS),
)
def scene_catalog(
    context: dg.AssetExecutionContext, config: SceneConfig, lake: LakeResource
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    drive = context.partition_key
    store = lake.get()
    try:
        result = build_scene_catalog(
            store, drive, rules_dir=config.rules_dir, params_file=config.params_file
        )
    except SceneRuleError as e:
        raise dg.Failure(str(e)) from e
    runs = sorted(result.runs, key=lambda r: r.rule.name)
    context.log.info(
        f"drive {drive} ({result.source}): {result.catalog.num_rows} scenes from "
        f"{result.hits.num_rows} hits; "
        + ", ".join(f"{k} {v:.2f} s" for k, v in result.seconds.items())
    )
    yield dg.Output(
        None,
        metadata={
            "dagster/row_count": result.catalog.num_rows,
            "dagster/uri": store.url(result.files[0]),
            "dagster/column_schema": column_schema(CATALOG),
            "path": dg.MetadataValue.path(store.url(result.files[0])),
            "source": result.source or "",
            "hits": result.hits.num_rows,
            "seconds": dg.MetadataValue.json({k: round(v, 3) for k, v in result.seconds.items()}),
            "rules": dg.MetadataValue.md(
                "| rule | hits | ms | parameters | sha256 |\n|---|---:|---:|---|---|\n"
                + "\n".join(
                    f"| {r.rule.name} | {r.hits.num_rows} | {r.seconds * 1e3:.0f} | "
                    f"{', '.join(f'{k}={v}' for k, v in sorted(r.params.items()))} | "
                    f"{r.rule.sha256[:12]} |"
                    for r in runs
                )
            ),
            "scenes": dg.MetadataValue.md(
                "| scene | start | s | tags | score |\n|---|---:|---:|---|---:|\n"
                + "\n".join(
                    f"| {s['scene_id']} | {s['t_start_ns']} | "
                    f"{(s['t_end_ns'] - s['t_start_ns']) / 1e9:.1f} | {', '.join(s['tags'])} | "
                    f"{s['score']:.2f} |"
                    for s in result.catalog.slice(0, 100).to_pylist()
                )
            ),
        },
    )
    for f in findings(result, store):
        yield check_result(ASSET, f)

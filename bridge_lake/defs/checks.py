"""Helpers shared by every asset's checks, so each asset declares only what it checks."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from bridge_lake.defs.partitions import drives
from bridge_lake.findings import Finding
from bridge_lake.lake.schemas import TableSpec


def check_spec(name: str, asset: str, description: str, *, blocking: bool) -> dg.AssetCheckSpec:
    """A check recorded per drive partition.

    `partitions_def` on a check is a Dagster preview feature; without it the UI keeps only
    the latest result of the asset instead of one per drive, which is what people look for.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=dg.PreviewWarning)
        return dg.AssetCheckSpec(
            name, asset=asset, description=description, blocking=blocking, partitions_def=drives
        )


def check_specs(asset: str, checks: Mapping[str, tuple[str, bool]]) -> list[dg.AssetCheckSpec]:
    """The specs of an asset's checks from a layer's table: name → (description, blocking)."""
    return [
        check_spec(name, asset, description, blocking=error)
        for name, (description, error) in checks.items()
    ]


def check_result(asset: str, finding: Finding) -> dg.AssetCheckResult:
    """A finding as the UI shows it: a one-line reason as the description, figures as typed
    metadata (dicts and lists as JSON)."""
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=finding.check,
        passed=finding.passed,
        severity=dg.AssetCheckSeverity.ERROR if finding.error else dg.AssetCheckSeverity.WARN,
        description=finding.summary or None,
        metadata={
            k: dg.MetadataValue.json(v) if isinstance(v, dict | list) else v
            for k, v in finding.metadata.items()
        },
    )


def checked(
    asset: str,
    checks: Mapping[str, tuple[str, bool]],
    name: str,
    passed: bool,
    description: str | None,
    metadata: Mapping[str, Any] | None = None,
) -> dg.AssetCheckResult:
    """The result of check `name` of an asset whose checks are listed in `checks` (name →
    (description, blocking), the table its specs come from): a blocking check fails as ERROR,
    the others as WARN, so a result never disagrees with its spec."""
    finding = Finding(asset, name, passed, checks[name][1], dict(metadata or {}), description or "")
    return check_result(asset, finding)


def column_schema(spec: TableSpec) -> dg.TableSchema:
    """A table's columns for the UI, with the schema module's descriptions and units."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                c.name,
                str(c.type),
                description=c.description,
                constraints=dg.TableColumnConstraints(nullable=c.nullable),
            )
            for c in spec.columns
        ]
    )


def report_link(url: str) -> dg.MetadataValue:
    """A report in the lake as a link the UI can open: a file:// URL for a local lake (the
    browser on the machine running `dagster dev` opens it), the object URL otherwise (open it
    with your store's console or `aws s3 cp`)."""
    if "://" not in url:
        return dg.MetadataValue.url(Path(url).resolve().as_uri())
    return dg.MetadataValue.url(url)

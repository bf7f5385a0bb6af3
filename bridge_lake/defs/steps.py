"""What the drive steps share: the op tag of the heavy ones, and for the layers written by one
pass (normalized, calibrated) their multi-asset and their write-audit-publish gate.

A layer step stages every table, audits the staged result against its checks, and publishes
only when every blocking check passes; otherwise the previous partitions stay and the step
fails. From the publish to the last check result recorded it is one `publishing()` span,
which `bridge-lake ingest` never interrupts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from typing import Any

import dagster as dg

from bridge_lake.defs.checks import check_result
from bridge_lake.defs.interrupts import INTERRUPTS, interrupted_failure, publishing
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.versions import code_version
from bridge_lake.errors import BridgeLakeError
from bridge_lake.findings import Finding

HEAVY = {"bridge_lake/heavy": "true"}
"""Op tags of the steps that hold much of a drive at once (normalize, calibrate, export, scene
sets): a label for deployments that limit such steps (an executor's tag_concurrency_limits);
neither dagster.yaml nor docs/deploy limit it today."""

INFRA_RETRY = dg.RetryPolicy(max_retries=2, delay=15, backoff=dg.Backoff.EXPONENTIAL)
"""Retries of a layer step that failed on its infrastructure (a storage or database error,
a lost connection, a crashed step process under the multiprocess executor), 15 s and then
30 s later: a PostgreSQL or S3 blip of up to about 45 s costs a re-run of the step, not the
run. A step is idempotent (it stages, audits and publishes whole partitions). Errors about
the drive itself (BridgeLakeError: bad input, named file/offset/key) fail at once: they
would fail the same way again; so does an interrupted step (Ctrl-C, Terminate)."""


def layer_asset(layer: str, table: str) -> str:
    """The asset of a layer's table, e.g. normalized_imu, calibrated_poses."""
    return f"{layer}_{table}"


def layer_step(
    layer: str,
    descriptions: Mapping[str, str],
    *,
    deps: list[str],
    check_specs: list[dg.AssetCheckSpec],
) -> Callable[[Callable[..., Iterator[Any]]], dg.AssetsDefinition]:
    """The step of `layer` as a multi-asset: one asset `<layer>_<table>` per table of
    `descriptions` (table → description), each reading `deps`, skippable (not materialized
    when a blocking check rejects the drive), made together once per drive.

    The decorated step gets its gate as the keyword argument `publication`; Dagster sees its
    other parameters (context, config, resources)."""

    def decorate(step: Callable[..., Iterator[Any]]) -> dg.AssetsDefinition:
        def run(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:  # an interrupt held by the publishing span comes as the span closes
                with ExitStack() as span:  # the span closes however the step ends
                    yield from step(*args, **kwargs, publication=Publication(span))
            except BridgeLakeError as exc:  # the drive's fault: a retry fails again
                raise dg.Failure(str(exc), allow_retries=False) from exc
            except INTERRUPTS as exc:  # asked to stop: not an error to retry
                raise interrupted_failure(exc) from exc

        signature = inspect.signature(step)
        run.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[p for p in signature.parameters.values() if p.name != "publication"]
        )
        return dg.multi_asset(
            name=layer,
            partitions_def=drives,
            group_name=layer,
            can_subset=False,
            specs=[
                dg.AssetSpec(
                    layer_asset(layer, table),
                    deps=deps,
                    description=description,
                    kinds={"parquet"},
                    group_name=layer,
                    skippable=True,
                    metadata={"table": f"{layer}/{table}"},
                    code_version=code_version(step.__module__),
                )
                for table, description in descriptions.items()
            ],
            check_specs=check_specs,
            op_tags=HEAVY,
            retry_policy=INFRA_RETRY,
        )(run)

    return decorate


class Publication:
    """A layer step's gate: `audit(judge)` is the library's audit callback (staged result →
    publish?); it collects the findings and opens the `publishing()` span on `span`."""

    def __init__(self, span: ExitStack) -> None:
        self.found: list[Finding] = []
        self._span = span

    def audit(self, judge: Callable[[Any], Iterable[Finding]]) -> Callable[[Any], bool]:
        """The audit callback: the findings `judge` makes of the staged result; True (and the
        publishing span opened) when every blocking one passed."""

        def audit(staged: Any) -> bool:
            self.found.extend(judge(staged))
            passed = all(f.passed for f in self.found if f.error)
            if passed:
                self._span.enter_context(publishing())
            return passed

        return audit

    def check_results(self, asset_name: Callable[[str], str]) -> Iterator[dg.AssetCheckResult]:
        """Every finding as the check result of its table's asset."""
        for f in self.found:
            yield check_result(asset_name(f.table), f)

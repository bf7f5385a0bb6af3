"""Which assets of a drive must run: Dagster's stale status, per partition.

Every materialization records its code version and the data versions of its inputs
(provenance); an asset is STALE when its code version or an input's data version has
changed since, MISSING when it has no materialization. That is Dagster's own judgement, the
one the UI shows. Two things are added to it:

- what a stale or missing asset feeds runs with it (its downstream in the job), since a
  fresh asset whose input is about to change is out of date too; and a multi-asset that
  cannot be subset (normalized, calibrated) runs whole;
- an asset whose output (`dagster/uri` of its latest materialization) is gone from the lake
  counts as missing: a wiped lake is not "up to date".

`RunRequest(stale_assets_only=True)` would be the public way, but Dagster 1.13 resolves it
without the partition, and a partitioned asset asked without one is always FRESH
(`CachingStaleStatusResolver._get_status`); so the resolver is called here per drive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import dagster as dg
from dagster._core.definitions.data_version import (  # no public per-partition equivalent
    CachingStaleStatusResolver,
    StaleStatus,
)
from dagster._core.loader import LoadingContext


class _Loading(LoadingContext):
    """The batch loaders' cache of one evaluation (what a workspace request context holds)."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self._instance = instance
        self._loaders: dict = {}

    @property
    def instance(self) -> dg.DagsterInstance:
        return self._instance

    @property
    def loaders(self) -> dict:
        return self._loaders


@dataclass(frozen=True)
class OutOfDate:
    """The assets of one drive to run, each with why (`stale` → Dagster's words)."""

    keys: frozenset[dg.AssetKey]
    why: dict[dg.AssetKey, str]
    """The assets out of date by themselves (not only as the downstream of one)."""

    def summary(self) -> str:
        """One line: which assets are out of date and why, the rest as their downstream."""
        if not self.why:
            return "up to date"
        parts = [f"{k.to_user_string()} {w}" for k, w in sorted(self.why.items())][:3]
        more = len(self.why) - len(parts)
        return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


class Staleness:
    """Out-of-date assets of drives, over one asset graph and one instance."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        asset_graph,
        keys: Iterable[dg.AssetKey],
        exists: Callable[[str], bool] | None = None,
    ) -> None:
        self.instance, self.graph = instance, asset_graph
        self.keys = frozenset(keys)
        self.exists = exists
        self._resolver = CachingStaleStatusResolver(instance, asset_graph, _Loading(instance))

    def drive(self, drive: str) -> OutOfDate:
        why: dict[dg.AssetKey, str] = {}
        for key in sorted(self.keys):
            status = self._resolver.get_status(key, drive)
            if status == StaleStatus.MISSING:
                why[key] = "missing"
            elif status == StaleStatus.STALE:
                causes = self._resolver.get_stale_causes(key, drive)
                why[key] = ", ".join(sorted({_cause(c) for c in causes})) or "stale"
            elif self.exists is not None and not self._output_exists(key, drive):
                why[key] = "missing from the lake"
        if not why:
            return OutOfDate(frozenset(), {})
        down = dg.AssetSelection.assets(*why).downstream().resolve(self.graph) & self.keys
        whole = {k for key in down for k in self.graph.get(key).execution_set_asset_keys}
        return OutOfDate(frozenset(whole & self.keys), why)

    def _output_exists(self, key: dg.AssetKey, drive: str) -> bool:
        records = self.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[drive]), limit=1
        ).records
        m = records[0].asset_materialization if records else None
        uri = m.metadata.get("dagster/uri") if m is not None else None
        value = getattr(uri, "value", uri)
        return value is None or self.exists(str(value))


def _cause(cause) -> str:
    """A stale root cause in Dagster's words, with the input it names."""
    dep = cause.dependency
    if dep is not None and dep.asset_key != cause.key.asset_key:
        return f"{cause.reason} ({dep.asset_key.to_user_string()})"
    return str(cause.reason)

"""Issue 33: a layer step failing on its infrastructure is retried (Dagster's RetryPolicy);
one failing on the drive itself (BridgeLakeError) fails at once, its message intact."""

from __future__ import annotations

import dagster as dg

from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.outcomes import asset_nodes, drive_outcome
from bridge_lake.defs.partitions import drives
from bridge_lake.defs.steps import INFRA_RETRY, layer_step
from bridge_lake.errors import BridgeLakeError

CALLS: list[str] = []


@layer_step("demo", {"t": "a table"}, deps=[], check_specs=[])
def bad_drive(context, publication):
    CALLS.append(context.partition_key)
    raise BridgeLakeError("drive d: drive.yaml has no valid source")
    yield  # a generator, as every layer step


def test_layer_steps_retry_infrastructure_errors() -> None:
    assert normalized.op.retry_policy == INFRA_RETRY
    assert INFRA_RETRY.max_retries >= 2 and INFRA_RETRY.delay


def test_a_drive_error_is_not_retried_and_names_itself(tmp_path) -> None:
    CALLS.clear()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(drives.name, ["d"])
        result = dg.materialize(
            [bad_drive], instance=instance, partition_key="d", raise_on_error=False
        )
        kinds = [e.event_type_value for e in result.all_events]
        outcome = drive_outcome(instance, result.run_id, "d", asset_nodes([bad_drive]), 1.0)
    assert CALLS == ["d"]
    assert "STEP_UP_FOR_RETRY" not in kinds
    assert outcome.assets[0].problems == ("FAILED: drive d: drive.yaml has no valid source",)

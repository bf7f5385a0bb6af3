"""Issue 33, fault 3: PostgreSQL stopped for 20 s while a step runs and writes events. On the
instance storage the deploy files name (bridge_lake.defs.pg_storage.PatientPostgresStorage)
the step waits the outage out: the run ends SUCCESS with every event stored. Dagster's stock
`storage: postgres:` gives up after about 6 s ("too many retries for DB connection"): its
events of the outage are lost (checked by running this test with the stock storage).

A real PostgreSQL server, stopped with `pg_ctl stop -m fast` (every connection cut) and
started again on the same port."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from bridge_lake.defs.compute_logs import COMPUTE_LOGS
from bridge_lake_tests.conftest import free_port
from bridge_lake_tests.deploy.servers import postgres_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

OUTAGE_S = 20.0
TICKS = 30


def _job(marker: Path) -> dg.JobDefinition:
    @dg.op
    def writes_through_the_outage(context) -> int:  # (a string annotation Dagster rejects)
        marker.write_text("started")
        for i in range(TICKS):  # an event a second, before, during and after the outage
            context.log.info(f"tick {i}")
            time.sleep(1)
        return TICKS

    @dg.job(executor_def=dg.in_process_executor)
    def outage_job() -> None:
        writes_through_the_outage()

    return outage_job


def test_a_20_s_postgres_outage_is_waited_out_and_the_run_succeeds(tmp_path):
    marker = tmp_path / "started"
    with postgres_server(free_port()) as pg:
        home = tmp_path / "home"
        home.mkdir()
        db = {"hostname": pg.host, "port": pg.port, "db_name": pg.db, "username": pg.user,
              "password": pg.password, "scheme": "postgresql+psycopg2"}  # fmt: skip
        storage = {"module": "bridge_lake.defs.pg_storage", "class": "PatientPostgresStorage",
                   "config": {"postgres_db": db}}  # fmt: skip
        # compute logs under the home: without DAGSTER_HOME set they went to ./storage
        logs = {**COMPUTE_LOGS, "config": {"base_dir": str(home / "storage")}}
        config = {"storage": {"custom": storage}, "compute_logs": logs}
        (home / "dagster.yaml").write_text(yaml.safe_dump(config))
        outage: list[float] = []

        def stop_when_started() -> None:
            deadline = time.monotonic() + 60
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(3)
            t0 = time.monotonic()
            pg.outage(OUTAGE_S)
            outage.append(time.monotonic() - t0)

        with dg.DagsterInstance.from_config(str(home)) as instance:
            stopper = threading.Thread(target=stop_when_started, daemon=True)
            stopper.start()
            result = _job(marker).execute_in_process(instance=instance, raise_on_error=False)
            stopper.join(60)
            ticks = [
                e.user_message
                for e in instance.all_logs(result.run_id)
                if e.user_message.startswith("tick ")
            ]
            run = instance.get_run_by_id(result.run_id)
        rows = pg.sql(
            "select count(*) from event_logs where run_id = "
            f"'{uuid.UUID(result.run_id)}' and event like '%tick %'"
        )  # read back with psql, not through Dagster
    assert outage and outage[0] >= OUTAGE_S, outage
    assert result.success and run is not None and run.status == dg.DagsterRunStatus.SUCCESS
    assert ticks == [f"tick {i}" for i in range(TICKS)]
    assert rows == [[str(TICKS)]]

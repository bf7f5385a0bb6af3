"""Dagster's PostgreSQL storage, waiting out a database blip instead of failing the step.

dagster-postgres opens a connection for every read and write (NullPool) and retries opening it
5 times over about 6 s, hard-coded; its instance file has no setting for it. A 20 s PostgreSQL
restart therefore failed the step that was writing an event ("too many retries for DB
connection") and lost check results (issue 33). PatientPostgresStorage is the same storage
(same tables, same config, the UI and daemon read it as usual) whose three storages open
their connections with a longer patience: OUTAGE_S, backing off up to 2 s between tries, each
try logged, and the storage itself is built only once the database answers. Queries themselves
are not retried: a statement cut by the outage fails as before (they are short, and
connections are opened per statement, so an outage between statements only delays the next
one); nor are the few reads that connect on their own (dagster-postgres' event-log cursor
walk in `_gen_event_log_entry_from_cursor`). The instance file names this module, so every
process that loads the instance (webserver, daemon, code server, workers) must have
bridge_lake installed.

In dagster.yaml, in place of `storage: postgres:` (the same `postgres_db` block):

    storage:
      custom:
        module: bridge_lake.defs.pg_storage
        class: PatientPostgresStorage
        config:
          postgres_db: ...
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy
from dagster._core.storage.base_storage import DagsterStorage
from dagster._serdes import ConfigurableClassData
from dagster_postgres import (
    DagsterPostgresStorage,
    PostgresEventLogStorage,
    PostgresRunStorage,
    PostgresScheduleStorage,
)
from dagster_postgres.utils import (
    DagsterPostgresException,
    create_pg_engine,
    pg_url_from_config,
)

OUTAGE_S = 90.0
"""How long a connection is waited for before the write fails (a restart, a failover)."""
MAX_WAIT_S = 2.0

_log = logging.getLogger(__name__)
_UNREACHABLE = (
    sqlalchemy.exc.DatabaseError,
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.TimeoutError,
)


@contextmanager
def patient_connection(engine: sqlalchemy.engine.Engine) -> Iterator[sqlalchemy.Connection]:
    """A connection of `engine`, tried for OUTAGE_S before DagsterPostgresException."""
    deadline, wait, tries = time.monotonic() + OUTAGE_S, 0.2, 0
    while True:
        tries += 1
        try:
            conn = engine.connect()
            break
        except _UNREACHABLE as exc:
            if time.monotonic() + wait > deadline:
                raise DagsterPostgresException(
                    f"PostgreSQL unreachable for {OUTAGE_S:.0f} s ({tries} tries): {exc}"
                ) from exc
            _log.warning("PostgreSQL unreachable (try %d), again in %.1f s: %s", tries, wait, exc)
            time.sleep(wait)
            wait = min(wait * 2, MAX_WAIT_S)
    try:
        yield conn
    finally:
        conn.close()


class PatientRunStorage(PostgresRunStorage):
    def connect(self) -> Any:
        return patient_connection(self._engine)


class PatientEventLogStorage(PostgresEventLogStorage):
    def _connect(self) -> Any:
        return patient_connection(self._engine)


class PatientScheduleStorage(PostgresScheduleStorage):
    def connect(self, run_id: str | None = None) -> Any:
        return patient_connection(self._engine)


class PatientPostgresStorage(DagsterPostgresStorage):
    """DagsterPostgresStorage over the patient storages above (module docstring)."""

    def __init__(
        self,
        postgres_url: str,
        should_autocreate_tables: bool = True,
        inst_data: ConfigurableClassData | None = None,
        token_provider: Any = None,
    ) -> None:
        # DagsterPostgresStorage.__init__ builds the stock storages: build these instead, once
        # the database answers (their constructors read the table names with the stock 6 s
        # patience: a worker or run process starting during an outage would fail there)
        engine = create_pg_engine(postgres_url, token_provider, poolclass=sqlalchemy.pool.NullPool)
        try:
            with patient_connection(engine):
                pass
        finally:
            engine.dispose()
        self.postgres_url = postgres_url
        self.should_autocreate_tables = should_autocreate_tables
        self._inst_data = inst_data
        args = (postgres_url, should_autocreate_tables)
        self._run_storage = PatientRunStorage(*args, token_provider=token_provider)
        self._event_log_storage = PatientEventLogStorage(*args, token_provider=token_provider)
        self._schedule_storage = PatientScheduleStorage(*args, token_provider=token_provider)
        DagsterStorage.__init__(self)

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> PatientPostgresStorage:
        from dagster_postgres.utils import get_token_provider_from_config

        return cls(
            inst_data=inst_data,
            postgres_url=pg_url_from_config(config_value),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )

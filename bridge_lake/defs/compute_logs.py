"""Step stdout and stderr captured to files, without Dagster's `tail -F` mirror processes.

Dagster's LocalComputeLogManager (the default, and the capture under S3ComputeLogManager)
redirects a step's stdout/stderr into files and mirrors them back to the process's own
streams with a `tail -F` child per stream, each babysat by a `watch_orphans` Python child.
Those children are what went wrong in production (issue 33): in `bridge-lake ingest` the
terminal's Ctrl-C reached them too and `watch_orphans` printed KeyboardInterrupt tracebacks;
on a Celery worker that lived through a PostgreSQL outage the cleanup waited 30 s per
process (`communicate(timeout=30)`) on every later step, and the `tail` processes outlived
the worker. `FileComputeLogManager` keeps the same files in the same layout (the UI reads
them as before, and a LocalComputeLogManager over the same `base_dir` reads them too) but
redirects the streams with `dup2` only: no child process, nothing to clean up, nothing left
behind. The steps' output is then in the files and the UI, not on the worker's terminal;
every event is in the event log anyway.

Configure it in dagster.yaml (`base_dir` defaults to `$DAGSTER_HOME/storage`, the default
manager's):

    compute_logs:
      module: bridge_lake.defs.compute_logs
      class: FileComputeLogManager

Built on `dagster._core.execution.compute_logs.redirect_to_file`, the redirect the default
manager uses (Dagster 1.13).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import Any

import yaml
from dagster import DagsterInstance, Field, StringSource
from dagster._config.config_schema import UserConfigSchema
from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import (
    IO_TYPE_EXTENSION,
    LocalComputeLogManager,
)
from dagster._serdes import ConfigurableClassData
from dagster._utils import ensure_file, touch_file

STORAGE = "storage"
"""Where Dagster's default manager keeps compute logs inside DAGSTER_HOME."""


class FileComputeLogManager(LocalComputeLogManager):
    """LocalComputeLogManager without the mirror processes (module docstring)."""

    def __init__(
        self,
        base_dir: str | None = None,
        polling_timeout: float | None = None,
        inst_data: ConfigurableClassData | None = None,
    ) -> None:
        if base_dir is None:
            base_dir = os.path.join(os.environ.get("DAGSTER_HOME", "."), STORAGE)
        super().__init__(base_dir, polling_timeout=polling_timeout, inst_data=inst_data)

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return {**super().config_type(), "base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> FileComputeLogManager:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Generator[CapturedLogContext, None, None]:
        out = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        err = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        ensure_file(out)
        ensure_file(err)
        with redirect_to_file(sys.stdout, out), redirect_to_file(sys.stderr, err):
            yield CapturedLogContext(log_key)
        touch_file(self.complete_artifact_path(log_key))  # as the default: capture complete


COMPUTE_LOGS = {"module": __name__, "class": FileComputeLogManager.__name__}
"""The instance config block (dagster.yaml `compute_logs:`) of FileComputeLogManager."""


def open_instance(home: str | os.PathLike[str]) -> DagsterInstance:
    """The instance of the Dagster home `home`. When its dagster.yaml leaves `compute_logs`
    unset (Dagster's default: a mirroring LocalComputeLogManager under `<home>/storage`),
    the instance captures with FileComputeLogManager over the same files instead, so a
    process executing runs in itself (`bridge-lake ingest`) starts no `tail`/`watch_orphans`
    children. A home that configures compute logs keeps its own."""
    home = os.fspath(home)
    path = os.path.join(home, "dagster.yaml")
    config = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    if "compute_logs" in config:
        return DagsterInstance.from_config(home)
    block = {**COMPUTE_LOGS, "config": {"base_dir": os.path.join(home, STORAGE)}}
    return DagsterInstance.from_ref(InstanceRef.from_dir(home, overrides={"compute_logs": block}))

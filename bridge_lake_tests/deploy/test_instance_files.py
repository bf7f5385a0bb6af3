"""The shipped instance and Celery files say what issue 33 needs, and Dagster 1.13 and
dagster-celery accept them as they are: run monitoring on, compute logs without `tail`
processes on Celery hosts, every PostgreSQL setting from the environment, late acks and
reject-on-worker-lost for the steps' tasks on both sides of the queue."""

from __future__ import annotations

import pytest
import yaml
from dagster._config import Shape, process_config
from dagster._core.instance.config import dagster_instance_config_schema
from dagster_celery.executor import CELERY_CONFIG

from bridge_lake.defs import executors
from bridge_lake.defs.pg_storage import PatientPostgresStorage
from bridge_lake_tests.conftest import REPO

DEPLOY = REPO / "docs" / "deploy"
PG_ENV = {"DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_DB", "DAGSTER_PG_USER",
          "DAGSTER_PG_PASSWORD"}  # fmt: skip


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PG_ENV:
        monkeypatch.setenv(name, "5433" if name == "DAGSTER_PG_PORT" else "x")
    monkeypatch.setenv("BRIDGE_LAKE_LOG_BUCKET", "logs")
    monkeypatch.setenv("BRIDGE_LAKE_CELERY_BROKER", "redis://127.0.0.1:6379/0")


def _instance(name: str) -> dict:
    config = yaml.safe_load((DEPLOY / name).read_text())
    result = process_config(Shape(dagster_instance_config_schema()), config)
    assert result.success, result.errors
    return config


def test_both_instance_files_watch_runs_and_take_postgres_from_the_environment() -> None:
    for name in ("dagster.celery.yaml", "dagster.production.yaml"):
        config = _instance(name)
        monitoring = config["run_monitoring"]
        assert monitoring["enabled"] is True
        assert monitoring["poll_interval_seconds"] <= 30
        assert monitoring["start_timeout_seconds"] <= 180
        assert monitoring["cancel_timeout_seconds"] <= 180
        assert monitoring["max_runtime_seconds"] > 2 * 3600  # beyond a drive's lock wait
        custom = config["storage"]["custom"]  # the patient storage: a 20 s outage outlived
        assert (custom["module"], custom["class"]) == (
            PatientPostgresStorage.__module__,
            PatientPostgresStorage.__name__,
        )
        storage = process_config(Shape(PatientPostgresStorage.config_type()), custom["config"])
        assert storage.success, storage.errors
        assert storage.value["postgres_db"]["port"] == 5433  # an int from DAGSTER_PG_PORT
        db = custom["config"]["postgres_db"]
        assert {v["env"] for k, v in db.items() if k != "scheme"} == PG_ENV, name


def test_the_celery_instance_needs_no_kubernetes_and_spawns_no_tail() -> None:
    config = _instance("dagster.celery.yaml")
    assert "run_launcher" not in config  # the default: a local process per run
    assert config["compute_logs"] == {
        "module": "bridge_lake.defs.compute_logs",
        "class": "FileComputeLogManager",
    }


def test_the_k8s_instance_resumes_runs_whose_pod_died() -> None:
    config = _instance("dagster.production.yaml")
    assert config["run_launcher"]["class"] == "K8sRunLauncher"
    assert config["run_monitoring"]["max_resume_run_attempts"] >= 1


def test_executor_and_workers_share_one_celery_file_in_the_package() -> None:
    """The file is package data next to executors.py (in the wheel via `**/*.yaml`), valid
    dagster-celery config, and what the executor is configured with."""
    assert executors.CELERY_YAML.parent == REPO / "bridge_lake" / "defs"
    config = executors.celery_config()
    assert process_config(Shape(CELERY_CONFIG), config).success
    source = config["config_source"]
    assert source["task_acks_late"] is True
    assert source["task_reject_on_worker_lost"] is True
    assert source["task_track_started"] is True  # the worker of a step, for celery_watch
    assert source["worker_prefetch_multiplier"] == 1
    assert source["broker_transport_options"]["visibility_timeout"] >= 600
    assert config["broker"] == config["backend"] == {"env": "BRIDGE_LAKE_CELERY_BROKER"}

"""BRIDGE_LAKE_EXECUTOR picks where lake_job's steps run; bad settings fail naming the variable.

That the Celery executor really spreads a drive's steps over workers is shown by
bridge_lake_tests/deploy/test_production_instance.py.
"""

import pytest

from bridge_lake.defs.executors import lake_executor
from bridge_lake.errors import SettingsError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRIDGE_LAKE_EXECUTOR", raising=False)
    monkeypatch.delenv("BRIDGE_LAKE_CELERY_BROKER", raising=False)


def test_default_is_the_in_process_executor():
    """A drive's steps are a chain: one process per run, no interpreter per step."""
    assert lake_executor().name == "in_process"


def test_multiprocess_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BRIDGE_LAKE_EXECUTOR", "multiprocess")
    assert lake_executor().name == "multiprocess"


def test_celery_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BRIDGE_LAKE_EXECUTOR", "celery")
    monkeypatch.setenv("BRIDGE_LAKE_CELERY_BROKER", "redis://127.0.0.1:6379/0")
    assert lake_executor().name == "celery"


def test_celery_without_a_broker_names_the_missing_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BRIDGE_LAKE_EXECUTOR", "celery")
    with pytest.raises(SettingsError, match="needs BRIDGE_LAKE_CELERY_BROKER"):
        lake_executor()


def test_unknown_executor_names_the_choices(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BRIDGE_LAKE_EXECUTOR", "k8s")
    with pytest.raises(
        SettingsError, match=r"BRIDGE_LAKE_EXECUTOR='k8s': must be one of in_process, multi"
    ):
        lake_executor()

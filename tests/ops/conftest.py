"""Ops fixtures: a free port on 127.0.0.1; tracking switched on into a fresh SQLite store."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store with its tables made once (the migrations take seconds each time)."""
    from mlflow.tracking import MlflowClient

    db = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    return db


@pytest.fixture
def tracking_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, empty_mlflow_db: Path) -> Path:
    """Tracking on, into ``tmp_path/mlflow.db`` (the cwd), nothing inherited from the environment."""
    for var in (
        "MLFLOW_TRACKING_URI",
        "CODETHINKER_PARENT_RUN_ID",
        "CODETHINKER_TRACKING_FALLBACK",
        "CODETHINKER_EXPERIMENT",
        "DVC_STAGE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CODETHINKER_TRACKING", "on")
    monkeypatch.chdir(tmp_path)
    shutil.copy(empty_mlflow_db, tmp_path / "mlflow.db")
    return tmp_path

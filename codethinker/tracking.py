"""MLflow in one place: a parent run per pipeline run, a child run per stage.

Stages call :func:`stage_run`; nothing else in the project imports ``mlflow``.

- Tracking store: ``$MLFLOW_TRACKING_URI`` or ``sqlite:///mlflow.db`` in the project root with
  artifacts under ``mlartifacts/`` (``mlflow ui --backend-store-uri sqlite:///mlflow.db`` shows it).
- Parent run: ``$CODETHINKER_PARENT_RUN_ID`` when set (the Prefect flow and ``make run`` set it);
  otherwise the newest unfinished run tagged ``codethinker.pipeline=1`` in the experiment, made
  on first use, so the stages of one ``dvc repro`` share one parent.
- ``$CODETHINKER_TRACKING=off`` turns tracking into a no-op (unit tests of stage cores).
- An unreachable remote server fails fast (``TrackingUnavailable`` naming the URI), never hangs;
  ``$CODETHINKER_TRACKING_FALLBACK=local`` writes to the local SQLite store instead.

>>> with stage_run("fetch", {"seed": 0}) as run:  # doctest: +SKIP
...     run.log_metrics({"kept": 10})
"""

from __future__ import annotations

import contextlib
import os
import socket
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codethinker.params import flatten

__all__ = ["StageRun", "TrackingUnavailable", "stage_run", "tracking_uri"]

EXPERIMENT = os.environ.get("CODETHINKER_EXPERIMENT", "codethinker")
PIPELINE_TAG = "codethinker.pipeline"


class TrackingUnavailable(RuntimeError):
    """The MLflow tracking server cannot be reached."""


def tracking_uri(root: str | os.PathLike[str] = ".") -> str:
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def _check_reachable(uri: str, timeout_s: float = 3.0) -> None:
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise TrackingUnavailable(
            f"MLflow tracking server {uri} is unreachable ({exc}); start it, unset MLFLOW_TRACKING_URI, "
            "or set CODETHINKER_TRACKING_FALLBACK=local"
        ) from None


class StageRun:
    """Thin handle over an active MLflow run (or a no-op when tracking is off)."""

    def __init__(self, mlflow_mod: Any | None):
        self._m = mlflow_mod
        self.run_id: str | None = None

    def log_params(self, params: dict[str, Any]) -> None:
        if self._m:
            flat = {k: str(v)[:6000] for k, v in flatten(params).items()}
            for i in range(0, len(flat), 100):
                self._m.log_params(dict(list(flat.items())[i : i + 100]))

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if self._m:
            clean = {k: float(v) for k, v in flatten(metrics).items() if isinstance(v, int | float)}
            if clean:
                self._m.log_metrics(clean, step=step)

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        if self._m and Path(path).exists():
            if Path(path).is_dir():
                self._m.log_artifacts(str(path), artifact_path=artifact_path)
            else:
                self._m.log_artifact(str(path), artifact_path=artifact_path)

    def set_tags(self, tags: dict[str, Any]) -> None:
        if self._m:
            self._m.set_tags({k: str(v) for k, v in tags.items()})

    @property
    def mlflow(self) -> Any | None:
        """The ``mlflow`` module while the run is active (for model logging/registry), else None."""
        return self._m


def _parent_run_id(mlflow: Any, experiment_id: str) -> str:
    env = os.environ.get("CODETHINKER_PARENT_RUN_ID")
    if env:
        return env
    client = mlflow.tracking.MlflowClient()
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{PIPELINE_TAG}` = '1' and attributes.status = 'RUNNING'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if runs:
        return runs[0].info.run_id
    run = client.create_run(experiment_id, tags={PIPELINE_TAG: "1", "mlflow.runName": "pipeline"})
    return run.info.run_id


@contextlib.contextmanager
def stage_run(stage: str, params: dict[str, Any] | None = None, root: str = ".") -> Iterator[StageRun]:
    """Open a child run named ``stage`` under the pipeline's parent run and log ``params``."""
    if os.environ.get("CODETHINKER_TRACKING", "on").lower() in ("off", "0", "false"):
        yield StageRun(None)
        return
    import mlflow

    uri = tracking_uri(root)
    try:
        _check_reachable(uri)
    except TrackingUnavailable:
        if os.environ.get("CODETHINKER_TRACKING_FALLBACK") != "local":
            raise
        uri = f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        art = (Path(root).resolve() / "mlartifacts").as_uri()
        exp_id = mlflow.create_experiment(EXPERIMENT, artifact_location=art)
    else:
        exp_id = exp.experiment_id
    parent = _parent_run_id(mlflow, exp_id)
    with mlflow.start_run(experiment_id=exp_id, run_name=stage, nested=True, parent_run_id=parent) as run:
        handle = StageRun(mlflow)
        handle.run_id = run.info.run_id
        handle.set_tags({"codethinker.stage": stage})
        if params:
            handle.log_params(params)
        yield handle

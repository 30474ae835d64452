"""The MLflow handle: the store, the experiment, and :class:`StageRun`, one open run.

Which runs exist and who opens and ends them (a parent run per pipeline run, a child run per
stage, reaping runs of dead processes, what a stage records from its ``dvc.yaml`` entry) is
:mod:`codethinker.ops` (:func:`codethinker.ops.runs.stage_run`, :func:`~codethinker.ops.runs.pipeline_run`).
Training code calls :func:`register_adapter`, reports read runs back through
:func:`tracking_uri` and :func:`experiment_name`. Nothing outside this module and
:mod:`codethinker.ops` imports ``mlflow`` to write runs.

Store
    ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<root>/mlflow.db`` with artifacts under
    ``<root>/mlartifacts/`` (``mlflow ui --backend-store-uri sqlite:///mlflow.db`` shows it).
    ``$CODETHINKER_EXPERIMENT`` names the experiment (default ``codethinker``).

Failure modes
    An unreachable tracking server fails fast with :class:`TrackingUnavailable` naming the URI
    (an HTTP health probe with a short timeout, never a hang); ``$CODETHINKER_TRACKING_FALLBACK=local``
    writes to the local SQLite store instead (runs are tagged ``codethinker.fallback_from``).
    ``$CODETHINKER_TRACKING=off`` makes every run a no-op handle (:func:`enabled`).

>>> with stage_run("fetch", {"seed": 0}) as run:  # doctest: +SKIP  (codethinker.ops.runs)
...     run.log_metrics({"kept": 10})
...     register_adapter("models/sft/adapter", "codethinker-sft")  # inside a stage run
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from codethinker.errors import CodethinkerError
from codethinker.params import flatten

__all__ = [
    "PIPELINE_TAG",
    "StageRun",
    "TrackingUnavailable",
    "activated",
    "clean_key",
    "enabled",
    "experiment_name",
    "local_uri",
    "metric_group",
    "open_store",
    "register_adapter",
    "tracking_uri",
]

PIPELINE_TAG = "codethinker.pipeline"
OWNER_TAG = "codethinker.owner"
KIND_TAG = "codethinker.kind"
STAGE_TAG = "codethinker.stage"
PARENT_TAG = "mlflow.parentRunId"
_ACTIVE: contextvars.ContextVar[StageRun | None] = contextvars.ContextVar("codethinker_stage_run", default=None)
_PROBE_TIMEOUT_S = 5.0


class TrackingUnavailable(CodethinkerError, RuntimeError):
    """The MLflow tracking server cannot be reached."""


def enabled() -> bool:
    return os.environ.get("CODETHINKER_TRACKING", "on").strip().lower() not in ("off", "0", "false", "no")


def experiment_name() -> str:
    return os.environ.get("CODETHINKER_EXPERIMENT", "codethinker")


def local_uri(root: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def tracking_uri(root: str | os.PathLike[str] = ".") -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or local_uri(root)


def _check_reachable(uri: str, timeout_s: float = _PROBE_TIMEOUT_S) -> None:
    """Probe an HTTP tracking server's ``/health``; raise :class:`TrackingUnavailable` fast."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return
    health = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(health, timeout=timeout_s) as resp:
            if resp.status >= 500:
                raise OSError(f"HTTP {resp.status}")
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            raise TrackingUnavailable(_unreachable_msg(uri, f"HTTP {exc.code}")) from None
        # a proxy/server without /health (404, 401): reachable; let MLflow report the rest
    except (OSError, TimeoutError) as exc:
        raise TrackingUnavailable(_unreachable_msg(uri, exc)) from None


def _unreachable_msg(uri: str, why: object) -> str:
    return (
        f"MLflow tracking server {uri} is unreachable ({why}); start it, unset MLFLOW_TRACKING_URI "
        "(local SQLite store), or set CODETHINKER_TRACKING_FALLBACK=local to write locally"
    )


# --- MLflow plumbing --------------------------------------------------------------------------


def open_store(root: str | os.PathLike[str]) -> tuple[Any, Any, str, str | None]:
    """Import mlflow, choose the store, make the experiment: (mlflow, client, experiment id, fallback)."""
    uri = tracking_uri(root)
    fallback_from = None
    try:
        _check_reachable(uri)
    except TrackingUnavailable as exc:
        if os.environ.get("CODETHINKER_TRACKING_FALLBACK", "").lower() != "local":
            raise
        print(f"codethinker.tracking: {exc}; writing to {local_uri(root)} instead", file=sys.stderr)
        fallback_from, uri = uri, local_uri(root)
    if uri.startswith(("http://", "https://")):
        # MLflow's own HTTP retries can add up to many minutes when a server dies mid-run
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "3")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    name = experiment_name()
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return mlflow, client, exp.experiment_id, fallback_from
    artifact_location = None
    if uri.startswith("sqlite:") or uri.startswith("file:") or "://" not in uri:
        artifact_location = (Path(root).resolve() / "mlartifacts").as_uri()
    try:
        exp_id = client.create_experiment(name, artifact_location=artifact_location)
    except Exception:  # created meanwhile by another process
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        exp_id = exp.experiment_id
    return mlflow, client, exp_id, fallback_from


# MLflow names of the trainers' keys (TRL's, the GRPO step statistics) by group: the first prefix that matches
GROUPS = (
    (("completions/", "rollout", "dbs_", "cache_", "groups_", "frac_reward_zero_std", "step_s", "sync_s"), "rollout/"),
    (("rewards/", "reward", "r_proc", "r_res", "fmt_rate", "rcs", "pass_rate", "cycles"), "reward/"),
)


def metric_group(key: str) -> str:
    """A trainer's metric key under its group's prefix (``train/`` when no group claims it)."""
    for prefixes, group in GROUPS:
        if key.startswith(prefixes):
            return group + key
    return "train/" + key


def clean_key(key: str) -> str:
    return re.sub(r"[^\w\-. :/]", "_", str(key))[:250]


class StageRun:
    """Handle on one MLflow run (a stage's child run or the pipeline's parent run).

    Every method is a no-op when tracking is off (``run_id`` is then ``None``).
    """

    def __init__(self, mlflow_mod: Any | None, client: Any | None = None, run_id: str | None = None):
        self._m = mlflow_mod
        self._client = client
        self.run_id = run_id
        self._params: dict[str, str] = {}

    def __bool__(self) -> bool:
        return self._m is not None

    def log_params(self, params: dict[str, Any]) -> None:
        """Log ``params`` flattened (``a.b``); a key already logged with another value becomes a tag."""
        if not self._m:
            return
        from mlflow.entities import Param

        todo = []
        for k, v in flatten(params).items():
            key, val = clean_key(k), str(v)[:6000]
            if key in self._params:
                if self._params[key] != val:
                    self.set_tags({f"param_override.{key}": val})
                continue
            self._params[key] = val
            todo.append(Param(key, val))
        for i in range(0, len(todo), 100):
            self._client.log_batch(self.run_id, params=todo[i : i + 100])

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Log the numbers in ``metrics`` (nested dicts flattened to ``a.b``; other values skipped)."""
        if not self._m:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        todo = []
        for k, v in flatten(metrics).items():
            if isinstance(v, bool) or not isinstance(v, int | float):
                continue
            todo.append(Metric(clean_key(k), float(v), now, step or 0))
        for i in range(0, len(todo), 1000):
            self._client.log_batch(self.run_id, metrics=todo[i : i + 1000])

    def log_metrics_file(self, path: str | os.PathLike[str], prefix: str = "") -> dict[str, Any]:
        """Log the numbers of a JSON/YAML metrics file (flattened, ``prefix`` before each key); return them."""
        p = Path(path)
        if not self._m or not p.is_file():
            return {}
        try:
            data = json.loads(p.read_text()) if p.suffix == ".json" else yaml.safe_load(p.read_text())
        except (ValueError, yaml.YAMLError):
            return {}
        if not isinstance(data, dict):
            return {}
        flat = {f"{prefix}{k}": v for k, v in flatten(data).items()}
        self.log_metrics(flat)
        return flat

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        if self._m and Path(path).exists():
            if Path(path).is_dir():
                self._client.log_artifacts(self.run_id, str(path), artifact_path=artifact_path)
            else:
                self._client.log_artifact(self.run_id, str(path), artifact_path=artifact_path)

    def log_dict(self, data: Any, artifact_file: str) -> None:
        if self._m:
            self._client.log_dict(self.run_id, data, artifact_file)

    def log_text(self, text: str, artifact_file: str) -> None:
        if self._m:
            self._client.log_text(self.run_id, text, artifact_file)

    def set_tags(self, tags: dict[str, Any]) -> None:
        if self._m:
            for k, v in tags.items():
                self._client.set_tag(self.run_id, clean_key(k), str(v)[:5000])

    def register_adapter(
        self,
        path: str | os.PathLike[str],
        name: str,
        *,
        artifact_path: str = "adapter",
        tags: dict | None = None,
        upload: bool = True,
        description: str = "LoRA adapters trained by codethinker (load with peft on model.base)",
    ) -> str | None:
        """Log the adapter folder under this run and register it as a new version of model ``name``.

        ``upload=False``: the run already holds the folder at ``artifact_path``; only register it.
        """
        if not self._m:
            return None
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"register_adapter: {p} does not exist")
        if upload:
            self.log_artifact(p, artifact_path=artifact_path)
        from mlflow.exceptions import MlflowException

        try:
            self._client.create_registered_model(name, description=description)
        except MlflowException as exc:
            if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code):
                raise
        version_tags = {"codethinker.adapter_path": str(p)}
        cfg = p / "adapter_config.json" if p.is_dir() else None
        if cfg and cfg.is_file():
            with contextlib.suppress(ValueError):
                base = json.loads(cfg.read_text()).get("base_model_name_or_path")
                if base:
                    version_tags["base_model"] = str(base)
        version_tags.update({k: str(v) for k, v in (tags or {}).items()})
        mv = self._client.create_model_version(
            name, source=f"runs:/{self.run_id}/{artifact_path}", run_id=self.run_id, tags=version_tags
        )
        return str(mv.version)

    @property
    def params(self) -> dict[str, str]:
        """The params logged to this run so far (flattened keys)."""
        return dict(self._params)

    @property
    def mlflow(self) -> Any | None:
        """The ``mlflow`` module (its fluent API bound to this run inside a stage run), else None."""
        return self._m

    @property
    def client(self) -> Any | None:
        """An ``MlflowClient`` on the chosen store, else None."""
        return self._client


def register_adapter(
    path: str | os.PathLike[str],
    name: str,
    *,
    run: StageRun | None = None,
    artifact_path: str = "adapter",
    tags: dict[str, Any] | None = None,
) -> str | None:
    """Log a LoRA adapter folder as artifacts of the current stage run and register it in the registry.

    ``run`` defaults to the innermost :func:`activated` run (the stage's child run). Returns the new model version
    (``"1"``, ``"2"``, …) of registered model ``name``, or ``None`` when tracking is off or no
    stage run is active. Load it back with
    ``mlflow.artifacts.download_artifacts(f"models:/{name}/{version}")``.
    """
    handle = run or _ACTIVE.get()
    if handle is None or not handle:
        return None
    return handle.register_adapter(path, name, artifact_path=artifact_path, tags=tags)


@contextlib.contextmanager
def activated(handle: StageRun) -> Iterator[StageRun]:
    """Inside the block ``handle`` is the current run (what :func:`register_adapter` logs to)."""
    token = _ACTIVE.set(handle)
    try:
        yield handle
    finally:
        _ACTIVE.reset(token)

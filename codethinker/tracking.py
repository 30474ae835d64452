"""MLflow in one place: a parent run per pipeline run, a child run per stage.

Stages call :func:`stage_run`; the Prefect flow calls :func:`pipeline_run`; training calls
:func:`register_adapter`. Nothing else in the project imports ``mlflow``.

Store
    ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<root>/mlflow.db`` with artifacts under
    ``<root>/mlartifacts/`` (``mlflow ui --backend-store-uri sqlite:///mlflow.db`` shows it).
    ``$CODETHINKER_EXPERIMENT`` names the experiment (default ``codethinker``).

Parent run (who opens it, who ends it)
    1. ``$CODETHINKER_PARENT_RUN_ID`` when set: an *owned* parent. Its owner (the Prefect flow
       through :func:`pipeline_run`) opened it and ends it with the pipeline's status; stages
       only hang their child runs under it.
    2. Otherwise, under ``dvc repro``, the parent belongs to that ``dvc`` process: the first
       stage of the repro creates it (tag ``codethinker.owner`` = host:pid:start-time of the
       ``dvc`` process, found by walking up from the stage to the first ancestor without
       ``$DVC_STAGE``), later stages of the same repro find it by that tag. Each stage marks it
       ``FINISHED`` (or ``FAILED``) when it exits and the next stage marks it ``RUNNING`` again,
       so the parent of a completed or failed repro is never left open.
    3. A stage run by hand (no ``dvc``) gets a parent of its own, ended the same way.
    Runs left ``RUNNING`` by a killed process (SIGKILL, power loss) are reaped: every
    :func:`stage_run`/:func:`pipeline_run` first marks ``KILLED`` the running runs of this
    experiment whose owner process on this host is gone.

Failure modes
    An unreachable tracking server fails the stage fast with :class:`TrackingUnavailable`
    naming the URI (an HTTP health probe with a short timeout, never a hang);
    ``$CODETHINKER_TRACKING_FALLBACK=local`` writes to the local SQLite store instead (runs are
    tagged ``codethinker.fallback_from``). ``$CODETHINKER_TRACKING=off`` makes every call a no-op.

What a stage run records without any code in the stage (``$CODETHINKER_TRACKING_AUTOLOG=off``
turns it off): from the stage's entry in ``dvc.yaml``, the numbers of its ``metrics`` files,
its ``plots`` files and ``metrics`` files as artifacts, a ``manifest.json`` of its ``outs``
(size, lines, sha256) and out files up to ``$CODETHINKER_TRACKING_MAX_ARTIFACT_MB`` (2) MB; an out
folder holding a PEFT adapter (``adapter_config.json``: sft's and grpo's ``models/*/adapter``) is
registered as a new version of model ``codethinker-<stage>`` in the model registry.

>>> with stage_run("fetch", {"seed": 0}) as run:  # doctest: +SKIP
...     run.log_metrics({"kept": 10})
...     register_adapter("models/sft/adapter", "codethinker-sft")  # inside a stage run
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from codethinker.params import ParamsError, flatten, load_params

__all__ = [
    "EXPERIMENT",
    "PIPELINE_TAG",
    "StageRun",
    "TrackingUnavailable",
    "enabled",
    "experiment_name",
    "pipeline_run",
    "process_alive",
    "process_key",
    "register_adapter",
    "stage_run",
    "tracking_uri",
]

EXPERIMENT = os.environ.get("CODETHINKER_EXPERIMENT", "codethinker")  # as of import; see experiment_name()
PIPELINE_TAG = "codethinker.pipeline"
OWNER_TAG = "codethinker.owner"
KIND_TAG = "codethinker.kind"
STAGE_TAG = "codethinker.stage"
PARENT_TAG = "mlflow.parentRunId"
_ACTIVE: contextvars.ContextVar[StageRun | None] = contextvars.ContextVar("codethinker_stage_run", default=None)
_PROBE_TIMEOUT_S = 5.0
_MANIFEST_HASH_LIMIT = 256 * 2**20  # hash files up to 256 MiB
_MANIFEST_MAX_FILES = 2000


class TrackingUnavailable(RuntimeError):
    """The MLflow tracking server cannot be reached."""


def enabled() -> bool:
    return os.environ.get("CODETHINKER_TRACKING", "on").strip().lower() not in ("off", "0", "false", "no")


def experiment_name() -> str:
    return os.environ.get("CODETHINKER_EXPERIMENT", "codethinker")


def _local_uri(root: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def tracking_uri(root: str | os.PathLike[str] = ".") -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or _local_uri(root)


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


# --- processes that own runs ---------------------------------------------------------------


def process_key(pid: int) -> str | None:
    """``host:pid:start`` for a live process (start = clock ticks since boot, Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        start = stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        if sys.platform.startswith("linux"):
            return None
        try:
            os.kill(pid, 0)
        except OSError:
            return None
        start = "?"
    return f"{socket.gethostname()}:{pid}:{start}"


def process_alive(key: str) -> bool:
    """Whether the owner named by ``key`` may still run (other hosts: assumed alive)."""
    try:
        host, pid_s, start = key.rsplit(":", 2)
        pid = int(pid_s)
    except ValueError:
        return True
    if host != socket.gethostname():
        return True
    now = process_key(pid)
    return now is not None and (start == "?" or now == key)


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _repro_owner() -> tuple[str, str]:
    """(owner key, kind) of the pipeline this process belongs to when no parent id is given."""
    if "DVC_STAGE" in os.environ:
        pid = os.getppid()
        for _ in range(16):  # the first ancestor without $DVC_STAGE is the dvc process
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                break
            if b"\0DVC_STAGE=" not in b"\0" + env:
                key = process_key(pid)
                if key:
                    return key, "dvc-repro"
                break
            nxt = _ppid(pid)
            if not nxt or nxt <= 1:
                break
            pid = nxt
        key = process_key(os.getppid())
        if key:
            return key, "dvc-repro"
    return process_key(os.getpid()) or f"{socket.gethostname()}:{os.getpid()}:?", "manual"


# --- MLflow plumbing --------------------------------------------------------------------------


def _setup(root: str | os.PathLike[str]) -> tuple[Any, Any, str, str | None]:
    """Import mlflow, choose the store, make the experiment: (mlflow, client, experiment id, fallback)."""
    uri = tracking_uri(root)
    fallback_from = None
    try:
        _check_reachable(uri)
    except TrackingUnavailable as exc:
        if os.environ.get("CODETHINKER_TRACKING_FALLBACK", "").lower() != "local":
            raise
        print(f"codethinker.tracking: {exc}; writing to {_local_uri(root)} instead", file=sys.stderr)
        fallback_from, uri = uri, _local_uri(root)
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


def _reap(client: Any, experiment_id: str) -> list[str]:
    """Mark KILLED the RUNNING runs whose owner process on this host is gone."""
    host = socket.gethostname().replace("'", "")
    try:
        runs = client.search_runs(
            [experiment_id],
            filter_string=f"attributes.status = 'RUNNING' and tags.`{OWNER_TAG}` LIKE '{host}:%'",
            max_results=500,
        )
    except Exception:
        return []
    reaped = []
    for r in runs:
        owner = r.data.tags.get(OWNER_TAG, "")
        if owner and not process_alive(owner):
            with contextlib.suppress(Exception):
                client.set_terminated(r.info.run_id, status="KILLED")
                client.set_tag(r.info.run_id, "codethinker.reaped", "owner process gone")
                reaped.append(r.info.run_id)
    return reaped


def _clean_key(key: str) -> str:
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
        self._metric_keys: set[str] = set()

    def __bool__(self) -> bool:
        return self._m is not None

    def log_params(self, params: dict[str, Any]) -> None:
        """Log ``params`` flattened (``a.b``); a key already logged with another value becomes a tag."""
        if not self._m:
            return
        from mlflow.entities import Param

        todo = []
        for k, v in flatten(params).items():
            key, val = _clean_key(k), str(v)[:6000]
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
            key = _clean_key(k)
            self._metric_keys.add(key)
            todo.append(Metric(key, float(v), now, step or 0))
        for i in range(0, len(todo), 1000):
            self._client.log_batch(self.run_id, metrics=todo[i : i + 1000])

    def log_metrics_file(self, path: str | os.PathLike[str], prefix: str = "") -> dict[str, Any]:
        """Log the numbers of a JSON/YAML metrics file (keys already logged are skipped); return them."""
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
        self.log_metrics({k: v for k, v in flat.items() if _clean_key(k) not in self._metric_keys})
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
                self._client.set_tag(self.run_id, _clean_key(k), str(v)[:5000])

    def register_adapter(
        self,
        path: str | os.PathLike[str],
        name: str,
        *,
        artifact_path: str = "adapter",
        tags: dict | None = None,
        upload: bool = True,
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
            self._client.create_registered_model(
                name, description="LoRA adapters trained by codethinker (load with peft on model.base)"
            )
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
    def mlflow(self) -> Any | None:
        """The ``mlflow`` module (fluent API bound to this run inside :func:`stage_run`), else None."""
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

    ``run`` defaults to the innermost active :func:`stage_run`. Returns the new model version
    (``"1"``, ``"2"``, …) of registered model ``name``, or ``None`` when tracking is off or no
    stage run is active. Load it back with
    ``mlflow.artifacts.download_artifacts(f"models:/{name}/{version}")``.
    """
    handle = run or _ACTIVE.get()
    if handle is None or not handle:
        return None
    return handle.register_adapter(path, name, artifact_path=artifact_path, tags=tags)


# --- what a stage declares in dvc.yaml ------------------------------------------------------


def _declared(stage: str, root: Path) -> dict[str, list[str]]:
    """``outs``/``metrics``/``plots`` paths of ``stage`` in ``root/dvc.yaml`` (plain YAML, no DVC)."""
    name, _, key = stage.partition("@")
    try:
        data = yaml.safe_load((root / "dvc.yaml").read_text()) or {}
        entry = (data.get("stages") or {}).get(name) or {}
        if key and isinstance(entry.get("do"), dict):  # foreach stage: `${key}` is the part after @
            entry = entry["do"]
    except (OSError, yaml.YAMLError, AttributeError):
        return {}
    out: dict[str, list[str]] = {}
    wdir = root / str(entry.get("wdir", "."))
    for kind in ("outs", "metrics", "plots"):
        paths = []
        for item in entry.get(kind) or []:
            raw = next(iter(item)) if isinstance(item, dict) else item
            if isinstance(raw, str):
                raw = raw.replace("${key}", key) if key else raw
                if "${" not in raw:
                    paths.append(str(wdir / raw))
        out[kind] = paths
    return out


def _manifest(paths: list[str], root: Path) -> dict[str, Any]:
    """Each file under ``paths``: bytes, sha256 (up to 256 MiB), lines (text formats); keys relative to root."""
    files: dict[str, Any] = {}
    for raw in paths:
        p = root / raw
        items = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        for q in items[:_MANIFEST_MAX_FILES]:
            key = os.path.relpath(q, root)
            if not q.is_file():
                files[key] = {"missing": True}
                continue
            info: dict[str, Any] = {"bytes": q.stat().st_size}
            if info["bytes"] <= _MANIFEST_HASH_LIMIT:
                h, lines = hashlib.sha256(), 0
                with q.open("rb") as fh:
                    for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                        h.update(chunk)
                        lines += chunk.count(b"\n")
                info["sha256"] = h.hexdigest()
                if q.suffix in (".jsonl", ".csv", ".tsv", ".txt"):
                    info["lines"] = lines
            files[key] = info
        if p.is_dir() and len(items) > _MANIFEST_MAX_FILES:
            files[raw] = {"files_not_listed": len(items) - _MANIFEST_MAX_FILES}
    return {"files": files, "total_bytes": sum(v.get("bytes", 0) for v in files.values())}


def _autolog(handle: StageRun, stage: str, root: Path) -> None:
    if os.environ.get("CODETHINKER_TRACKING_AUTOLOG", "on").lower() in ("off", "0", "false"):
        return
    decl = _declared(stage, root)
    if not decl:
        return
    for m in decl.get("metrics", []):
        files = sorted(Path(m).rglob("*.json")) if Path(m).is_dir() else [Path(m)]
        for f in files:
            prefix = f"{os.path.relpath(f.with_suffix(''), m)}." if Path(m).is_dir() else ""
            handle.log_metrics_file(f, prefix=prefix)
        handle.log_artifact(m, artifact_path="metrics")
    for p in decl.get("plots", []):
        handle.log_artifact(p, artifact_path="plots")
    outs = decl.get("outs", [])
    for o in outs:  # a PEFT adapter among the outs: a new version of `codethinker-<stage>` in the registry
        q = Path(o)
        if (q / "adapter_config.json").is_file():
            logged = {a.path for a in handle.client.list_artifacts(handle.run_id)} if handle.client else set()
            handle.register_adapter(q, f"codethinker-{_clean_key(stage)}", upload=q.name not in logged)
            break
    if outs:
        rel = [os.path.relpath(o, root) for o in outs]
        handle.log_dict(_manifest(rel, root) | {"outs": rel}, "manifest.json")
        limit = float(os.environ.get("CODETHINKER_TRACKING_MAX_ARTIFACT_MB", "2")) * 2**20
        for o in outs:  # small outs themselves (predictions, reports); big ones only in the manifest
            q = Path(o)
            if q.is_file() and q.stat().st_size <= limit:
                handle.log_artifact(q, artifact_path="outs")
            elif q.is_dir() and sum(f.stat().st_size for f in q.rglob("*") if f.is_file()) <= limit:
                handle.log_artifact(q, artifact_path=f"outs/{q.name}")


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """Inside the block SIGTERM raises SystemExit, so the run is ended (KILLED), not left open."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


# --- parent and child runs -------------------------------------------------------------------


def _implicit_parent(mlflow: Any, client: Any, experiment_id: str, root: str | os.PathLike[str]) -> str:
    owner, kind = _repro_owner()
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{PIPELINE_TAG}` = '1' and tags.`{OWNER_TAG}` = '{owner}'",
        max_results=1,
    )
    if runs:
        run_id = runs[0].info.run_id
        client.update_run(run_id, status="RUNNING")
        return run_id
    name = "pipeline (dvc repro)" if kind == "dvc-repro" else "pipeline (manual stage run)"
    tags = {PIPELINE_TAG: "1", OWNER_TAG: owner, KIND_TAG: kind, **_source_tags(root)}
    run = client.create_run(experiment_id, run_name=name, tags=tags)
    with contextlib.suppress(ParamsError):
        base = load_params(Path(root) / "params.yaml").get("base")
        if isinstance(base, dict):  # profile, seed, mirror: what the whole pipeline run shares
            StageRun(mlflow, client, run.info.run_id).log_params({"base": base})
    return run.info.run_id


def _source_tags(root: str | os.PathLike[str]) -> dict[str, str]:
    """The git commit of ``root`` (MLflow's own tag name, shown in the UI), when there is one."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"mlflow.source.git.commit": out.stdout.strip()}


@contextlib.contextmanager
def stage_run(stage: str, params: dict[str, Any] | None = None, root: str = ".") -> Iterator[StageRun]:
    """Open a child run named ``stage`` under the pipeline's parent run and log ``params``.

    On normal exit the stage's declared metrics, plots and out manifest are logged (see the
    module doc). The run ends ``FINISHED``, ``FAILED`` (exception) or ``KILLED`` (SIGTERM).
    """
    if not enabled():
        handle = StageRun(None)
        token = _ACTIVE.set(handle)
        try:
            yield handle
        finally:
            _ACTIVE.reset(token)
        return
    mlflow, client, exp_id, fallback_from = _setup(root)
    _reap(client, exp_id)
    parent, implicit = os.environ.get("CODETHINKER_PARENT_RUN_ID"), False
    if parent:
        try:
            client.get_run(parent)
        except Exception:
            print(
                f"codethinker.tracking: parent run {parent} is not in {mlflow.get_tracking_uri()}; "
                "grouping under this process's pipeline run instead",
                file=sys.stderr,
            )
            parent = None
    if not parent:
        parent, implicit = _implicit_parent(mlflow, client, exp_id, root), True
    status = "FAILED"
    try:
        with (
            _sigterm_as_exit(),
            mlflow.start_run(experiment_id=exp_id, run_name=stage, nested=True, parent_run_id=parent) as run,
        ):
            handle = StageRun(mlflow, client, run.info.run_id)
            tags = {STAGE_TAG: stage, OWNER_TAG: process_key(os.getpid()) or "", PARENT_TAG: parent}
            if os.environ.get("DVC_STAGE"):
                tags["codethinker.dvc_stage"] = os.environ["DVC_STAGE"]
            if fallback_from:
                tags["codethinker.fallback_from"] = fallback_from
            handle.set_tags(tags)
            if params:
                handle.log_params(params)
            token = _ACTIVE.set(handle)
            try:
                yield handle
                try:
                    _autolog(handle, stage, Path(root).resolve())
                except Exception as exc:  # the stage's work is done: tracking must not fail it now
                    print(f"codethinker.tracking: could not log {stage}'s declared files: {exc!r}", file=sys.stderr)
            except SystemExit as exc:
                if exc.code not in (0, None):
                    mlflow.end_run(status="KILLED" if exc.code == 128 + signal.SIGTERM else "FAILED")
                raise
            finally:
                _ACTIVE.reset(token)
        status = "FINISHED"
    except SystemExit as exc:
        status = "FINISHED" if exc.code in (0, None) else "KILLED" if exc.code == 128 + signal.SIGTERM else "FAILED"
        raise
    finally:
        if implicit:
            with contextlib.suppress(Exception):
                client.set_terminated(parent, status=status)


@contextlib.contextmanager
def pipeline_run(
    name: str = "pipeline",
    *,
    root: str | os.PathLike[str] = ".",
    tags: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Iterator[StageRun]:
    """Open an owned parent run for a whole pipeline run and end it with the pipeline's status.

    The caller passes ``handle.run_id`` to the stages as ``$CODETHINKER_PARENT_RUN_ID`` (in the
    environment of the processes it starts). The run ends ``FINISHED``, ``FAILED`` on an
    exception, ``KILLED`` on KeyboardInterrupt; a SIGKILLed owner's run is reaped later.
    """
    if not enabled():
        yield StageRun(None)
        return
    mlflow, client, exp_id, fallback_from = _setup(root)
    _reap(client, exp_id)
    all_tags = {PIPELINE_TAG: "1", OWNER_TAG: process_key(os.getpid()) or "", KIND_TAG: "flow"}
    if fallback_from:
        all_tags["codethinker.fallback_from"] = fallback_from
    all_tags.update({k: str(v) for k, v in (tags or {}).items()})
    run = client.create_run(exp_id, run_name=name, tags=all_tags)
    handle = StageRun(mlflow, client, run.info.run_id)
    if params:
        handle.log_params(params)
    status = "FAILED"
    try:
        yield handle
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        with contextlib.suppress(Exception):
            client.set_terminated(run.info.run_id, status=status)

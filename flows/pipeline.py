"""The whole pipeline as a Prefect flow whose tasks are the DVC stages (docs/operations.md).

    python -m flows.pipeline                          # local: an ephemeral Prefect API, no server
    python -m flows.pipeline -S gen_inputs.backend=llm -S base.profile=full
    python -m flows.pipeline --target sft --force sft # sft and what it needs; rerun sft anyway
    python -m flows.pipeline --dag                    # the stage order and classes, nothing run
    python -m flows.pipeline --no-preflight           # start without `codethinker preflight`'s checks

- The DAG is read from ``dvc.yaml`` through DVC's Python API on every run (never hard-coded):
  a stage added to ``dvc.yaml`` becomes a task. Each task runs
  ``dvc --wait-for-lock repro --single-item <stage>``, so DVC decides what is stale and a rerun
  skips what is up to date; DVC's repo lock serializes the stages of one workspace.
- ``-S/--set section.key=value`` overrides are written into ``params.yaml`` before the DAG is read,
  with DVC's own ``dvc exp run -S`` code (Hydra override grammar, comments kept); they stay
  there afterwards, as after ``dvc exp run -S`` in the workspace (``git diff params.yaml``).
- Preflight first: the ``preflight`` task runs :func:`codethinker.preflight.run_preflight` on the
  params (after the overrides) for the stages this run selects (LLM endpoints, hub models, GPUs,
  verl, Ray, data; ``codethinker preflight`` prints the same checks). When a check fails the flow
  stops before any stage, with each failed check and what to do in its message; ``preflight=False``
  (``--no-preflight``) skips it. Where the selected stages need nothing probed (every check "not
  needed") no task is made.
- GPU and LLM stages get retries with exponential backoff; GPU stages (and LLM stages, which
  start a local vLLM, unless ``flow.llm_uses_gpu: false``) hold one slot of the Prefect global
  concurrency limit ``codethinker-gpu`` (made with 1 slot when missing).
- One MLflow parent run per flow run (``$CODETHINKER_PARENT_RUN_ID`` in the stages' environment);
  every stage's child run hangs under it.
- Artifacts in the Prefect UI: a markdown table per stage with metrics, the ``funnel`` table
  (every number of every metrics file) and a ``pipeline-summary``.

Optional ``flow:`` section of params.yaml (defaults shown)::

    flow:
      gpu_stages: [sft, grpo, train_eval, evaluate, generalize]
      llm_uses_gpu: true      # LLM stages also take the GPU slot
      retries: 2              # for GPU/LLM stages; other stages fail at once (a bug, not bad luck)
      retry_delay_s: 60       # first retry; doubled each time
      gpu_slots: 1            # size of the limit when the flow creates it
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import yaml
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.sync import concurrency
from prefect.futures import wait
from prefect.runtime import flow_run as runtime_flow_run
from prefect.runtime import task_run as runtime_task_run
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.tasks import exponential_backoff

from codethinker.params import ParamsError, by_profile, flatten, load_params, resolve_params
from codethinker.preflight import format_report, plan_checks, run_preflight
from codethinker.tracking import pipeline_run, process_alive, process_key, tracking_uri

__all__ = [
    "GPU_LIMIT",
    "PreflightFailed",
    "StageSpec",
    "apply_overrides",
    "classify",
    "pipeline",
    "preflight_task",
    "read_dag",
    "run_preflight_step",
    "select",
]

GPU_LIMIT = "codethinker-gpu"
DEFAULT_GPU_STAGES = ("sft", "grpo", "train_eval", "evaluate", "generalize")
LLM_KEYS = ("backend", "teacher", "engine")
GPU_LEASE_S = 60.0  # a killed holder's slot is reclaimed about this long after it died (server mode)


class StageFailed(RuntimeError):
    """``dvc repro`` of one stage exited non-zero."""


class PipelineFailed(RuntimeError):
    """At least one stage failed or did not run."""


class PreflightFailed(RuntimeError):
    """A preflight check failed (or params.yaml does not resolve): no stage was started."""


@dataclass(frozen=True)
class StageSpec:
    """One DVC stage as the flow sees it; paths are relative to the project root."""

    name: str  # DVC addressing: `name`, `name@key` (foreach) or `sub/dvc.yaml:name`
    cmd: str
    upstream: tuple[str, ...]
    outs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()

    @property
    def section(self) -> str:
        """The params.yaml section of the stage (stage name = module name)."""
        return self.name.rsplit(":", 1)[-1].split("@")[0]


# --- the DAG, from dvc.yaml ---------------------------------------------------------------


def read_dag(root: str | os.PathLike[str] = ".") -> list[StageSpec]:
    """The pipeline stages in an order that respects dependencies (ties: dvc.yaml order)."""
    import networkx as nx
    from dvc.repo import Repo
    from dvc.stage import PipelineStage

    root_p = Path(root).resolve()
    # DVC addresses stages relative to the working directory: read from the root
    with contextlib.chdir(root_p), Repo(str(root_p)) as repo:
        graph = repo.index.graph  # edges: stage -> the stage that makes one of its deps
        position = {id(s): i for i, s in enumerate(repo.index.stages)}

        def upstream(stage: Any, seen: set[int]) -> set[str]:
            found: set[str] = set()
            for dep in graph.successors(stage):
                if isinstance(dep, PipelineStage):
                    found.add(dep.addressing)
                elif id(dep) not in seen:  # a .dvc data source: look through it
                    seen.add(id(dep))
                    found |= upstream(dep, seen)
            return found

        def rel(out: Any) -> str:
            return os.path.relpath(out.fs_path, root_p)

        order = nx.lexicographical_topological_sort(
            graph.reverse(copy=True), key=lambda s: f"{position.get(id(s), 10**8):010d}"
        )
        specs = []
        for s in order:
            if not isinstance(s, PipelineStage):
                continue
            cmd = s.cmd if isinstance(s.cmd, str) else " && ".join(s.cmd)
            specs.append(
                StageSpec(
                    name=s.addressing,
                    cmd=cmd,
                    upstream=tuple(sorted(upstream(s, set()))),
                    outs=tuple(rel(o) for o in s.outs),
                    metrics=tuple(rel(o) for o in s.outs if o.metric),
                    plots=tuple(rel(o) for o in s.outs if o.plot),
                )
            )
    return specs


def select(specs: list[StageSpec], targets: list[str] | None) -> list[StageSpec]:
    """``targets`` and everything upstream of them (``dvc repro TARGET`` semantics); all when empty."""
    if not targets:
        return specs
    by_name = {s.name: s for s in specs}
    unknown = [t for t in targets if t not in by_name]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; dvc.yaml has {list(by_name)}")
    keep: set[str] = set()
    todo = list(targets)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(by_name[name].upstream)
    return [s for s in specs if s.name in keep]


def _uses_llm(section: Any, base: dict[str, Any]) -> bool:
    if not isinstance(section, dict):
        return False
    for key, value in section.items():
        with contextlib.suppress(Exception):
            value = by_profile(value, base)
        if isinstance(value, dict):
            if _uses_llm(value, base):
                return True
        elif any(k in str(key).lower() for k in LLM_KEYS) and str(value).strip().lower() == "llm":
            return True
    return False


def classify(specs: list[StageSpec], params: dict[str, Any]) -> dict[str, dict[str, bool]]:
    """For each stage: ``gpu`` (takes the GPU slot), ``llm`` (calls an LLM), ``retry`` (gets retries).

    GPU stages are ``flow.gpu_stages`` (default sft, grpo, train_eval, evaluate, generalize). LLM stages are
    those whose params section has a ``*backend*``/``*teacher*``/``*engine*`` key set to ``llm``
    (for the current ``base.profile``), e.g. ``gen_inputs.backend: llm``, ``contra_sft.teacher: llm``.
    """
    cfg = params.get("flow") or {}
    gpu_names = set(cfg.get("gpu_stages", DEFAULT_GPU_STAGES))
    llm_gpu = bool(cfg.get("llm_uses_gpu", True))
    base = params.get("base") or {}
    out = {}
    for s in specs:
        llm = _uses_llm(params.get(s.section), base)
        gpu = s.section in gpu_names or (llm and llm_gpu)
        out[s.name] = {"gpu": gpu, "llm": llm, "retry": gpu or llm}
    return out


# --- parameter overrides ------------------------------------------------------------------


def _hydra_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ",".join(_hydra_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_hydra_value(x)}" for k, x in v.items()) + "}"
    s = str(v)
    return s if re.fullmatch(r"[\w./\-]+", s) else json.dumps(s)


def normalize_overrides(overrides: list[str] | dict[str, Any] | None) -> list[str]:
    """``{'a.b': 1}`` or ``['a.b=1']`` -> ``['a.b=1']`` (the ``dvc exp run -S`` form)."""
    if not overrides:
        return []
    if isinstance(overrides, dict):
        return [f"{k}={_hydra_value(v)}" for k, v in overrides.items()]
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ValueError(f"overrides must look like section.key=value, got {bad}")
    return list(overrides)


def apply_overrides(root: str | os.PathLike[str], overrides: list[str] | dict[str, Any] | None) -> list[str]:
    """Write ``overrides`` into ``root/params.yaml`` as ``dvc exp run -S`` does; return them as strings.

    A key that does not exist is an error (prefix it with ``+`` to add one: ``+sft.new_key=1``).
    """
    items = normalize_overrides(overrides)
    if items:
        from dvc.exceptions import InvalidArgumentError
        from dvc.utils.hydra import apply_overrides as dvc_apply_overrides

        try:
            dvc_apply_overrides(Path(root) / "params.yaml", items)
        except InvalidArgumentError as exc:
            raise ValueError(f"invalid params override in {items}: {exc.__cause__ or exc}") from None
    return items


# --- the GPU concurrency limit --------------------------------------------------------------


@contextlib.contextmanager
def _local_flows_guard() -> Iterator[bool]:
    """Hold a shared lock on ``$PREFECT_HOME/codethinker-flows.lock`` while a local flow runs.

    Yields True when no other local (ephemeral-API) flow on this machine holds it: then any
    occupied GPU slot in the local database was left by a killed flow, because an ephemeral
    API keeps concurrency leases in its own memory and never reclaims them (Prefect 3.7 runs
    the lease repossessor only in ``prefect server``).
    """
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url:  # a real server reclaims expired leases itself
        yield False
        return
    home = Path(settings.home).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "codethinker-flows.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone = True
        except OSError:
            alone = False
        fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield alone
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _flow_run_registry(flow_run_id: str, logger: Any) -> Iterator[None]:
    """Mark ``Crashed`` the flow runs of this machine whose process died; register this one meanwhile.

    Prefect cannot tell that a SIGKILLed flow's process is gone: its run would stay ``Running``.
    Each flow run leaves ``$PREFECT_HOME/codethinker-flow-runs/<flow run id>`` holding its
    process key (host:pid:start) while it runs; the next flow run crashes the dead ones.
    """
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings
    from prefect.states import Crashed

    folder = Path(get_current_settings().home).expanduser() / "codethinker-flow-runs"
    folder.mkdir(parents=True, exist_ok=True)
    for f in folder.iterdir():
        key = f.read_text().strip() if f.is_file() else ""
        if key and not process_alive(key):
            with contextlib.suppress(Exception), get_client(sync_client=True) as client:
                run = client.read_flow_run(UUID(f.name))
                if run.state and not run.state.is_final():
                    client.set_flow_run_state(
                        f.name, Crashed(message=f"its process {key} died (found by flow run {flow_run_id})"), force=True
                    )
                    logger.info("marked flow run %s (%s) Crashed: its process is gone", run.name, f.name)
            f.unlink(missing_ok=True)
    mine = folder / flow_run_id
    mine.write_text(process_key(os.getpid()) or "")
    try:
        yield
    finally:
        mine.unlink(missing_ok=True)


def ensure_gpu_limit(name: str, slots: int, repair_leaks: bool) -> str:
    """Create the global concurrency limit ``name`` when missing; free leaked slots when told."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate, GlobalConcurrencyLimitUpdate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            gcl = client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            with contextlib.suppress(ObjectAlreadyExists):
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=slots))
            return f"created global concurrency limit {name!r} with {slots} slot(s)"
        if repair_leaks and gcl.active_slots:
            client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(active_slots=0))
            return f"freed {gcl.active_slots} slot(s) of {name!r} left by a killed local flow"
        return f"global concurrency limit {name!r}: {gcl.limit} slot(s), {gcl.active_slots} in use"


# --- one stage --------------------------------------------------------------------------------


def _read_metrics(root: Path, paths: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    out = {}
    for rel in paths:
        p = root / rel
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(p.read_text()) if p.suffix == ".json" else yaml.safe_load(p.read_text())
            if isinstance(data, dict):
                out[rel] = data
    return out


def _numbers(metrics: dict[str, dict[str, Any]]) -> list[tuple[str, str, float]]:
    rows = []
    for path, data in metrics.items():
        for k, v in flatten(data).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                rows.append((path, k, v))
    return rows


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "stage"


def _run_dvc(name: str, root: str, env: dict[str, str], force: bool, logger: Any) -> tuple[int, list[str], bool]:
    """Run ``dvc repro --single-item name``; its output goes to a log file the task follows.

    A file, not a pipe: when the flow process is SIGKILLed, the ``dvc`` process and the stage
    keep a place to write, finish the stage and record it in dvc.lock (a pipe would break under
    them at their next line of output). The logs of all runs of a stage accumulate in
    ``.dvc/tmp/flow-logs/<stage>.log``.
    """
    cmd = [sys.executable, "-m", "dvc", "--wait-for-lock", "repro", "--single-item", name]
    if force:
        cmd.append("--force")
    logger.info("$ %s", " ".join(cmd[2:]))
    env = dict(env, PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)]))
    log_dir = Path(root) / ".dvc" / "tmp" / "flow-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{_slug(name)}.log"
    tail: deque[str] = deque(maxlen=40)
    skipped = False
    # append mode (O_APPEND): a stage left running by a killed flow may still write to this file
    with log_path.open("ab") as out, log_path.open("r", errors="replace") as follow:
        follow.seek(0, os.SEEK_END)
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        partial = ""
        while True:
            done = proc.poll() is not None
            chunk = follow.read()
            if chunk:
                lines = (partial + chunk).split("\n")
                partial = lines.pop()
                for line in lines:
                    line = line.rstrip()
                    tail.append(line)
                    skipped = skipped or "didn't change, skipping" in line
                    logger.info("%s", line)
            elif done:
                break
            else:
                time.sleep(0.2)
        if partial.strip():
            tail.append(partial.rstrip())
            logger.info("%s", partial.rstrip())
    return proc.returncode, list(tail), skipped


def _blocking_pids(lines: list[str]) -> list[int]:
    text = "\n".join(lines)
    if "is busy, it is being blocked by" not in text:
        return []
    return sorted({int(p) for p in re.findall(r"\(PID (\d+)\)", text)})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return (
        not Path(f"/proc/{pid}/stat").is_file()
        or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    )


@task(name="dvc-stage", cache_policy=NO_CACHE, persist_result=False)
def dvc_stage(
    spec: StageSpec, root: str, parent_run_id: str | None, force: bool = False, gpu_limit: str | None = None
) -> dict[str, Any]:
    """``dvc repro --single-item`` one stage (holding a GPU slot when ``gpu_limit`` names one).

    The flow's own interpreter directory leads ``PATH`` so that ``python`` in a stage's ``cmd`` is
    the environment the flow runs in.
    """
    logger = get_run_logger()
    attempt = runtime_task_run.run_count
    # the environment is built here, not passed in: task parameters would show it in the UI
    env = dict(os.environ, PYTHONUNBUFFERED="1", DVC_NO_ANALYTICS="1")
    if parent_run_id:
        env["CODETHINKER_PARENT_RUN_ID"] = parent_run_id
    slot = (
        concurrency(gpu_limit, occupy=1, strict=True, lease_duration=GPU_LEASE_S, raise_on_lease_renewal_failure=False)
        if gpu_limit
        else contextlib.nullcontext()
    )
    t0 = time.monotonic()
    with slot:
        if gpu_limit:
            logger.info("holding a slot of %s", gpu_limit)
        while True:
            rc, tail, skipped = _run_dvc(spec.name, root, env, force, logger)
            blockers = _blocking_pids(tail) if rc else []
            if not blockers:
                break
            # a stage left running by a killed flow (its dvc process still holds the outputs'
            # rwlock): let it finish; DVC then finds this stage up to date or reruns it
            logger.warning("outputs of %s are locked by PID(s) %s; waiting for them to exit", spec.name, blockers)
            while any(_pid_alive(p) for p in blockers):
                time.sleep(5)
    seconds = round(time.monotonic() - t0, 1)
    if rc != 0:
        raise StageFailed(f"dvc repro --single-item {spec.name} exited {rc} (attempt {attempt}):\n" + "\n".join(tail))
    metrics = _read_metrics(Path(root), spec.metrics)
    rows = _numbers(metrics)
    if rows:
        table = "| file | metric | value |\n|---|---|---|\n" + "\n".join(f"| {p} | {k} | {v:g} |" for p, k, v in rows)
        create_markdown_artifact(
            key=f"stage-{_slug(spec.name)}", markdown=f"# {spec.name}\n\n{table}\n", description=f"{spec.name} metrics"
        )
    return {
        "stage": spec.name,
        "status": "skipped" if skipped else "ran",
        "attempts": attempt,
        "seconds": seconds,
        "metrics": metrics,
    }


# --- preflight ---------------------------------------------------------------------------------


@task(name="preflight", cache_policy=NO_CACHE, persist_result=False)
def preflight_task(params_path: str, stages: list[str]) -> list[dict[str, Any]]:
    """``codethinker preflight`` for ``stages`` (params sections): each check logged and in the
    ``preflight`` artifact; :class:`PreflightFailed` naming every failed check and its fix."""
    logger = get_run_logger()
    report = run_preflight(params_path, stages=stages)
    text = format_report(report)
    for line in text.splitlines():
        (logger.info if report.ok else logger.error)("%s", line)
    create_markdown_artifact(
        key="preflight", markdown=f"# preflight\n\n```\n{text}\n```\n", description="what the profile needs"
    )
    if not report.ok:
        failed = "\n".join(f"- {r.name}: {r.detail}" + (f" (to do: {r.fix})" if r.fix else "") for r in report.failed)
        raise PreflightFailed(
            f"preflight failed for profile {report.profile}, no stage was started:\n{failed}\n"
            "fix these, or skip the checks with --no-preflight (flow parameter preflight=False)"
        )
    return [asdict(r) | {"ok": r.ok} for r in report.results]


def run_preflight_step(params_file: Path, sections: list[str], logger: Any) -> list[dict[str, Any]]:
    """The flow's first step: the ``preflight`` task when a check of ``sections`` has something to
    probe, else nothing (a log line). :class:`PreflightFailed` when a check fails or the params
    do not resolve."""
    try:
        planned = plan_checks(resolve_params(load_params(params_file)), params_file.parent, sections)
    except ParamsError as exc:
        raise PreflightFailed(f"preflight: {exc}") from None
    if not any(c.probe is not None for c in planned):
        logger.info("preflight: nothing to check for the stages %s", ", ".join(sections))
        return []
    return preflight_task(str(params_file), sections)


# --- the flow -------------------------------------------------------------------------------


def _summary_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# codethinker pipeline",
        "",
        f"- root: `{summary['root']}`",
        f"- overrides: `{summary['overrides'] or 'none'}`",
        f"- MLflow parent run: `{summary.get('mlflow_parent_run_id')}` in `{summary.get('mlflow_tracking_uri')}`"
        " (`mlflow ui --backend-store-uri <uri>`)",
        "",
        "| stage | state | dvc | attempts | seconds | gpu | llm |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary["stages"]:
        lines.append(
            f"| {s['stage']} | {s['state']} | {s.get('status', '')} | {s.get('attempts', '')} | "
            f"{s.get('seconds', '')} | {s['gpu']} | {s['llm']} |"
        )
    return "\n".join(lines) + "\n"


@flow(name="codethinker-pipeline", task_runner=ThreadPoolTaskRunner(max_workers=16))
def pipeline(
    root: str = ".",
    overrides: list[str] | dict[str, Any] | None = None,
    targets: list[str] | None = None,
    force: list[str] | bool = False,
    retries: int | None = None,
    retry_delay_s: float | None = None,
    summary_path: str | None = None,
    preflight: bool = True,
) -> dict[str, Any]:
    """Run the DVC stages of ``root`` (or ``targets`` and their upstream) as Prefect tasks.

    ``overrides``: ``['section.key=value', ...]`` or ``{'section.key': value}``, written into
    params.yaml first. ``force``: stage names to rerun even when up to date (True: all).
    ``retries``/``retry_delay_s`` override ``flow.retries``/``flow.retry_delay_s`` for GPU/LLM
    stages. ``summary_path``: also write the summary JSON there (even when the flow fails).
    ``preflight``: run the preflight checks first and stop when one fails (False: skip them).
    """
    logger = get_run_logger()
    root_p = Path(root).resolve()
    applied = apply_overrides(root_p, overrides)
    if applied:
        logger.info("params.yaml overrides: %s", applied)
    params_file = root_p / "params.yaml"
    params = load_params(params_file) if params_file.is_file() else {}
    cfg = params.get("flow") or {}
    n_retries = int(cfg.get("retries", 2) if retries is None else retries)
    delay = float(cfg.get("retry_delay_s", 60) if retry_delay_s is None else retry_delay_s)
    specs = select(read_dag(root_p), targets)
    classes = classify(specs, params)
    logger.info("stages in order: %s", ", ".join(s.name for s in specs))

    summary: dict[str, Any] = {
        "root": str(root_p),
        "overrides": applied,
        "flow_run_id": str(runtime_flow_run.id),
        "flow_run_name": runtime_flow_run.name,
        "stages": [],
    }
    if preflight and params_file.is_file():
        try:
            summary["preflight"] = run_preflight_step(
                params_file, list(dict.fromkeys(s.section for s in specs)), logger
            )
        except PreflightFailed as exc:
            summary.update(ok=False, preflight_error=str(exc))
            if summary_path:
                Path(summary_path).write_text(json.dumps(summary, indent=2, default=str))
            raise
    elif not preflight:
        logger.info("preflight skipped (preflight=False)")
    with _local_flows_guard() as alone, _flow_run_registry(str(runtime_flow_run.id), logger):
        if any(c["gpu"] for c in classes.values()):
            logger.info("%s", ensure_gpu_limit(GPU_LIMIT, int(cfg.get("gpu_slots", 1)), repair_leaks=alone))
        try:
            with pipeline_run(
                f"pipeline {runtime_flow_run.name}",
                root=root_p,
                tags={"prefect.flow_run_id": runtime_flow_run.id, "prefect.flow_run_name": runtime_flow_run.name},
                params={"overrides": ";".join(applied) or "none", "targets": ",".join(targets or []) or "all"},
            ) as parent:
                summary["mlflow_parent_run_id"] = parent.run_id
                summary["mlflow_tracking_uri"] = tracking_uri(root_p) if parent.run_id else None
                if parent.run_id:
                    logger.info("MLflow parent run %s (%s)", parent.run_id, summary["mlflow_tracking_uri"])
                parent.log_artifact(params_file)
                _run_stages(specs, classes, root_p, parent.run_id, force, n_retries, delay, summary)
                rows = _funnel_rows(summary)
                parent.log_metrics({f"{r['stage']}.{r['metric']}": r["value"] for r in rows})
                parent.log_dict({"stages": summary["stages"], "funnel": rows}, "pipeline_summary.json")
                parent.log_artifact(root_p / "dvc.lock")
                if rows:
                    create_table_artifact(key="funnel", table=rows, description="every number of every metrics file")
                create_markdown_artifact(
                    key="pipeline-summary", markdown=_summary_markdown(summary), description="stage states"
                )
                bad = [s["stage"] for s in summary["stages"] if s["state"] != "COMPLETED"]
                summary["ok"] = not bad
                if bad:
                    raise PipelineFailed(f"stages that failed or did not run: {bad}")
        finally:
            if summary_path:
                Path(summary_path).write_text(json.dumps(summary, indent=2, default=str))
    return summary


def _run_stages(
    specs: list[StageSpec],
    classes: dict[str, dict[str, bool]],
    root: Path,
    parent_run_id: str | None,
    force: list[str] | bool,
    n_retries: int,
    delay: float,
    summary: dict[str, Any],
) -> None:
    futures = {}
    for spec in specs:
        c = classes[spec.name]
        r = n_retries if c["retry"] else 0
        tags = ["dvc"] + [k for k in ("gpu", "llm") if c[k]]
        task_for_stage = dvc_stage.with_options(
            name=f"dvc:{spec.name}",
            task_run_name=spec.name,
            retries=r,
            retry_delay_seconds=exponential_backoff(backoff_factor=delay) if (r and delay > 0) else 0,
            tags=tags,
        )
        futures[spec.name] = task_for_stage.submit(
            spec,
            str(root),
            parent_run_id,
            force=force is True or (isinstance(force, list) and spec.name in force),
            gpu_limit=GPU_LIMIT if c["gpu"] else None,
            wait_for=[futures[u] for u in spec.upstream if u in futures],
        )
    wait(list(futures.values()))
    for spec in specs:
        fut = futures[spec.name]
        state = fut.state
        entry: dict[str, Any] = {"stage": spec.name, "state": state.type.value, **classes[spec.name]}
        if state.is_completed():
            result = fut.result()
            entry.update({k: result[k] for k in ("status", "attempts", "seconds")})
            entry["metrics"] = result["metrics"]
        else:
            entry["message"] = state.message
        summary["stages"].append(entry)


def _funnel_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for s in summary["stages"]:
        for path, key, value in _numbers(s.get("metrics") or {}):
            rows.append({"stage": s["stage"], "file": path, "metric": key, "value": value})
    return rows


# --- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flows.pipeline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".", help="project root (dvc.yaml, params.yaml)")
    ap.add_argument("-S", "--set", dest="overrides", action="append", default=[], help="section.key=value")
    ap.add_argument("--target", dest="targets", action="append", default=[], help="run this stage and its upstream")
    ap.add_argument("--force", action="append", default=[], help="rerun this stage even if up to date ('all')")
    ap.add_argument("--retries", type=int, help="retries of GPU/LLM stages (default flow.retries or 2)")
    ap.add_argument("--retry-delay", type=float, help="first retry delay in seconds, doubled each time")
    ap.add_argument("--summary", help="write the summary JSON here")
    ap.add_argument("--dag", action="store_true", help="print the stage order and classes, run nothing")
    ap.add_argument("--no-preflight", action="store_true", help="start without the preflight checks")
    args = ap.parse_args(argv)
    if args.dag:
        root = Path(args.root)
        specs = read_dag(root)
        params = load_params(root / "params.yaml") if (root / "params.yaml").is_file() else {}
        classes = classify(specs, params)
        for s in specs:
            print(json.dumps(asdict(s) | classes[s.name]))
        return 0
    force: list[str] | bool = True if "all" in args.force else args.force
    state = pipeline(
        root=args.root,
        overrides=args.overrides,
        targets=args.targets or None,
        force=force,
        retries=args.retries,
        retry_delay_s=args.retry_delay,
        summary_path=args.summary,
        preflight=not args.no_preflight,
        return_state=True,
    )
    if state.is_completed():
        summary = state.result()
        for s in summary["stages"]:
            print(f"{s['stage']:>16}  {s['state']:<10} {s.get('status', '')}")
        return 0
    print(f"pipeline {state.type.value}: {state.message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

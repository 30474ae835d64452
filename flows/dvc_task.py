"""One DVC stage as a Prefect task, and the machine-wide bookkeeping around the flow's tasks.

- :func:`dvc_stage`: ``dvc --wait-for-lock repro --single-item <stage>`` (DVC decides what is
  stale; its repo lock serializes the stages of one workspace), holding a slot of the global
  concurrency limit ``codethinker-gpu`` for GPU stages; its output followed into the task log
  and a markdown artifact of the stage's metrics. Nothing is read from DVC's messages: whether
  the stage was skipped is ``dvc status --json <stage>`` before the run, and the processes that
  kept it busy are those DVC's lock file ``.dvc/tmp/rwlock`` records on its deps and outs.
- :func:`ensure_gpu_limit`: the limit, made when missing; leaked slots freed when told.
- :func:`local_flows_guard` and :func:`flow_run_registry`: flows killed on this machine do not
  leave GPU slots or ``Running`` flow runs behind.
"""

from __future__ import annotations

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
from pathlib import Path
from typing import Any
from uuid import UUID

import yaml
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.sync import concurrency
from prefect.runtime import task_run as runtime_task_run

from codethinker.errors import CodethinkerError
from codethinker.ops.dvc_api import StageSpec, rwlock_holders, stage_up_to_date
from codethinker.ops.dvcfile import declared
from codethinker.ops.procs import pid_alive, process_alive, process_key
from codethinker.params import flatten

__all__ = [
    "GPU_LEASE_S",
    "GPU_LIMIT",
    "StageFailed",
    "dvc_stage",
    "ensure_gpu_limit",
    "flow_run_registry",
    "local_flows_guard",
    "numbers",
    "read_metrics",
]

GPU_LIMIT = "codethinker-gpu"
GPU_LEASE_S = 60.0  # a killed holder's slot is reclaimed about this long after it died (server mode)


class StageFailed(CodethinkerError, RuntimeError):
    """``dvc repro`` of one stage exited non-zero."""


# --- the GPU concurrency limit --------------------------------------------------------------


@contextlib.contextmanager
def local_flows_guard() -> Iterator[bool]:
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
def flow_run_registry(flow_run_id: str, logger: Any) -> Iterator[None]:
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


def read_metrics(root: Path, paths: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    out = {}
    for rel in paths:
        p = root / rel
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(p.read_text()) if p.suffix == ".json" else yaml.safe_load(p.read_text())
            if isinstance(data, dict):
                out[rel] = data
    return out


def numbers(metrics: dict[str, dict[str, Any]]) -> list[tuple[str, str, float]]:
    rows = []
    for path, data in metrics.items():
        for k, v in flatten(data).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                rows.append((path, k, v))
    return rows


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "stage"


def _lock_paths(name: str, root: str) -> tuple[list[str], list[str]]:
    """(deps, outs of every kind) of stage ``name``: the paths DVC locks to read and to write."""
    deps = declared(name, root, ("deps",)).get("deps", [])
    return deps, [p for paths in declared(name, root).values() for p in paths]


def _live(pids: set[int]) -> set[int]:
    """The running ones of ``pids`` (DVC drops a dead holder's entries itself when it meets them)."""
    return {p for p in pids if pid_alive(p)}


def _run_dvc(name: str, root: str, env: dict[str, str], force: bool, logger: Any) -> tuple[int, list[str], set[int]]:
    """Run ``dvc repro --single-item name``; its output goes to a log file the task follows.

    A file, not a pipe: when the flow process is SIGKILLed, the ``dvc`` process and the stage
    keep a place to write, finish the stage and record it in dvc.lock (a pipe would break under
    them at their next line of output). The logs of all runs of a stage accumulate in
    ``.dvc/tmp/flow-logs/<stage>.log``. Also returned: the other processes DVC's rwlock recorded
    on the stage's deps and outs while it ran (:func:`rwlock_holders`, read before and while it runs).
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
    reads, writes = _lock_paths(name, root)
    holders = _live(rwlock_holders(root, reads, writes))
    # append mode (O_APPEND): a stage left running by a killed flow may still write to this file
    with log_path.open("ab") as out, log_path.open("r", errors="replace") as follow:
        follow.seek(0, os.SEEK_END)
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        partial = ""
        while True:
            done = proc.poll() is not None
            holders |= _live(rwlock_holders(root, reads, writes) - {proc.pid})
            chunk = follow.read()
            if chunk:
                lines = (partial + chunk).split("\n")
                partial = lines.pop()
                for line in lines:
                    line = line.rstrip()
                    tail.append(line)
                    logger.info("%s", line)
            elif done:
                break
            else:
                time.sleep(0.2)
        if partial.strip():
            tail.append(partial.rstrip())
            logger.info("%s", partial.rstrip())
    return proc.returncode, list(tail), holders


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
            up_to_date = not force and stage_up_to_date(spec.name, root, env) is True
            rc, tail, holders = _run_dvc(spec.name, root, env, force, logger)
            blockers = sorted(holders) if rc else []
            if not blockers:
                break
            # a stage left running by a killed flow (its dvc process still holds the outputs'
            # rwlock): let it finish; DVC then finds this stage up to date or reruns it
            logger.warning("outputs of %s are locked by PID(s) %s; waiting for them to exit", spec.name, blockers)
            while any(pid_alive(p) for p in blockers):
                time.sleep(5)
    seconds = round(time.monotonic() - t0, 1)
    if rc != 0:
        raise StageFailed(f"dvc repro --single-item {spec.name} exited {rc} (attempt {attempt}):\n" + "\n".join(tail))
    metrics = read_metrics(Path(root), spec.metrics)
    rows = numbers(metrics)
    if rows:
        table = "| file | metric | value |\n|---|---|---|\n" + "\n".join(f"| {p} | {k} | {v:g} |" for p, k, v in rows)
        create_markdown_artifact(
            key=f"stage-{_slug(spec.name)}", markdown=f"# {spec.name}\n\n{table}\n", description=f"{spec.name} metrics"
        )
    return {
        "stage": spec.name,
        "status": "skipped" if up_to_date and rc == 0 else "ran",
        "attempts": attempt,
        "seconds": seconds,
        "metrics": metrics,
    }

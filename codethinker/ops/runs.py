"""Who opens and ends MLflow runs: a parent run per pipeline run, a child run per stage.

Stages open their child run with :func:`stage_run` (through :mod:`codethinker.ops.stage`); the
Prefect flow opens the parent with :func:`pipeline_run`. The run handle itself is
:class:`codethinker.tracking.StageRun`.

Parent run (who opens it, who ends it)
    1. ``$CODETHINKER_PARENT_RUN_ID`` when set: an *owned* parent. Its owner (the Prefect flow
       through :func:`pipeline_run`) opened it and ends it with the pipeline's status; stages
       only hang their child runs under it.
    2. Otherwise, under ``dvc repro``, the parent belongs to that ``dvc`` process: the first
       stage of the repro creates it (tag ``codethinker.owner`` = host:pid:start-time of the
       ``dvc`` process, :func:`codethinker.ops.procs.repro_owner`), later stages of the same
       repro find it by that tag. Each stage marks it ``FINISHED`` (or ``FAILED``) when it exits
       and the next stage marks it ``RUNNING`` again, so the parent of a completed or failed
       repro is never left open.
    3. A stage run by hand (no ``dvc``) gets a parent of its own, ended the same way.
    Runs left ``RUNNING`` by a killed process (SIGKILL, power loss) are reaped: every
    :func:`stage_run`/:func:`pipeline_run` first marks ``KILLED`` the running runs of this
    experiment whose owner process on this host is gone.

On normal exit a stage writes its headline metrics and plot tables (:mod:`codethinker.ops.views`) and its
child run logs what its ``dvc.yaml`` entry declares (:mod:`codethinker.ops.autolog`).
The run ends ``FINISHED``, ``FAILED`` (exception) or ``KILLED`` (SIGTERM, which raises ``SystemExit(143)``
inside the run).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codethinker.ops.autolog import autolog, log_headline
from codethinker.ops.headline import git_commit, run_name
from codethinker.ops.procs import process_alive, process_key, repro_owner
from codethinker.ops.views import end_line, write_views
from codethinker.params import ParamsError, load_params, resolve_params
from codethinker.tracking import (
    KIND_TAG,
    OWNER_TAG,
    PARENT_TAG,
    PIPELINE_TAG,
    STAGE_TAG,
    StageRun,
    activated,
    enabled,
    open_store,
)

__all__ = ["pipeline_run", "reap", "stage_run"]

_KILLED = 128 + signal.SIGTERM


def reap(client: Any, experiment_id: str) -> list[str]:
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


def _implicit_parent(mlflow: Any, client: Any, experiment_id: str, root: str | os.PathLike[str]) -> str:
    owner, kind = repro_owner()
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{PIPELINE_TAG}` = '1' and tags.`{OWNER_TAG}` = '{owner}'",
        max_results=1,
    )
    if runs:
        run_id = runs[0].info.run_id
        client.update_run(run_id, status="RUNNING")
        return run_id
    commit = git_commit(root)
    manual = "manual stage run" + (f" @ {commit[:7]}" if commit else "")
    name = run_name(commit) if kind == "dvc-repro" else manual
    tags = {PIPELINE_TAG: "1", OWNER_TAG: owner, KIND_TAG: kind}
    if commit:  # MLflow's own tag name, shown in the UI
        tags["mlflow.source.git.commit"] = commit
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc.exp_name"] = os.environ["DVC_EXP_NAME"]
    run = client.create_run(experiment_id, run_name=name, tags=tags)
    with contextlib.suppress(ParamsError):  # the params in effect: every section resolved for the profile
        StageRun(mlflow, client, run.info.run_id).log_params(resolve_params(load_params(Path(root) / "params.yaml")))
    return run.info.run_id


def _parent(mlflow: Any, client: Any, exp_id: str, root: str | os.PathLike[str]) -> tuple[str, bool]:
    """(parent run id, whether this stage owns it): ``$CODETHINKER_PARENT_RUN_ID`` or the implicit one."""
    parent = os.environ.get("CODETHINKER_PARENT_RUN_ID")
    if parent:
        try:
            client.get_run(parent)
            return parent, False
        except Exception:
            print(
                f"codethinker.tracking: parent run {parent} is not in {mlflow.get_tracking_uri()}; "
                "grouping under this process's pipeline run instead",
                file=sys.stderr,
            )
    return _implicit_parent(mlflow, client, exp_id, root), True


def _child_tags(stage: str, parent: str, fallback_from: str | None) -> dict[str, str]:
    tags = {STAGE_TAG: stage, OWNER_TAG: process_key(os.getpid()) or "", PARENT_TAG: parent}
    if os.environ.get("DVC_STAGE"):
        tags["codethinker.dvc_stage"] = os.environ["DVC_STAGE"]
    if fallback_from:
        tags["codethinker.fallback_from"] = fallback_from
    return tags


def _exit_status(code: object) -> str:
    return "FINISHED" if code in (0, None) else "KILLED" if code == _KILLED else "FAILED"


@contextlib.contextmanager
def stage_run(stage: str, params: dict[str, Any] | None = None, root: str = ".") -> Iterator[StageRun]:
    """Open a child run named ``stage`` under the pipeline's parent run and log ``params``.

    On normal exit the stage's declared metrics, plots and out manifest are logged (see the
    module doc). The run ends ``FINISHED``, ``FAILED`` (exception) or ``KILLED`` (SIGTERM).
    """
    t0 = time.monotonic()
    if not enabled():
        with activated(StageRun(None)) as handle:
            yield handle
        write_views(stage, root)
        print(end_line(stage, time.monotonic() - t0, root), flush=True)
        return
    mlflow, client, exp_id, fallback_from = open_store(root)
    reap(client, exp_id)
    parent, implicit = _parent(mlflow, client, exp_id, root)
    status = "FAILED"
    try:
        with (
            _sigterm_as_exit(),
            mlflow.start_run(experiment_id=exp_id, run_name=stage, nested=True, parent_run_id=parent) as run,
        ):
            handle = StageRun(mlflow, client, run.info.run_id)
            handle.set_tags(_child_tags(stage, parent, fallback_from))
            if params:
                handle.log_params(params)
            try:
                with activated(handle):
                    yield handle
                write_views(stage, root)  # DVC's outs: an error here fails the stage
                print(end_line(stage, time.monotonic() - t0, root), flush=True)
                try:
                    autolog(handle, stage, Path(root).resolve())
                    log_headline(StageRun(mlflow, client, parent), stage, Path(root).resolve())
                except Exception as exc:  # the stage's work is done: tracking must not fail it now
                    print(f"codethinker.tracking: could not log {stage}'s declared files: {exc!r}", file=sys.stderr)
            except SystemExit as exc:
                if exc.code not in (0, None):
                    mlflow.end_run(status=_exit_status(exc.code))
                raise
        status = "FINISHED"
    except SystemExit as exc:
        status = _exit_status(exc.code)
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
    mlflow, client, exp_id, fallback_from = open_store(root)
    reap(client, exp_id)
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

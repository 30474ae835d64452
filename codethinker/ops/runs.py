"""Who opens and ends MLflow runs: a parent run per pipeline run, a child run per stage.

Whoever launches a pipeline run opens its parent run (:func:`pipeline_run`) and passes the id to the
stages explicitly, as ``$CODETHINKER_PARENT_RUN_ID`` in their environment; it alone ends the parent.
Nothing is discovered from other processes. The run handle itself is :class:`codethinker.tracking.StageRun`.

Launchers (each ends its parent ``FINISHED``, ``FAILED``, or ``KILLED`` on Ctrl-C/SIGTERM)
    - ``codethinker repro [dvc repro args]`` (``make run``) and ``codethinker exp run [dvc exp run
      args]``: :func:`repro` runs dvc with the id in its environment and returns dvc's exit code; the
      parent (kind ``dvc-repro``/``dvc-exp``) is named ``dvc repro @ <commit>`` or after the
      experiment (``-n``) and gets the params in effect when dvc exits.
    - the Prefect flow (``flows/pipeline.py``), one ``dvc repro --single-item`` per stage (kind ``flow``).

A stage (:func:`stage_run`, through :mod:`codethinker.ops.stage`)
    - with ``$CODETHINKER_PARENT_RUN_ID``: a child run under exactly that run; it adds its headline
      numbers to the parent and leaves the parent's status alone. An id that is not in the store
      gets a warning on stderr and a top-level run.
    - without it (a bare ``dvc repro``, a stage run by hand): a top-level run of its own, named by the
      stage (kind ``stage``, the git commit); no other run is looked up or touched.

Runs left ``RUNNING`` by a killed process (SIGKILL, power loss) are reaped: each run records the
``host:pid:start`` of the process that opened it (tag ``codethinker.owner``), and every
:func:`stage_run`/:func:`pipeline_run` first marks ``KILLED`` the running runs of this experiment whose
opener on this host is gone (:func:`reap`).

On normal exit a stage writes its headline metrics and plot tables (:mod:`codethinker.ops.views`) and its
run logs what its ``dvc.yaml`` entry declares (:mod:`codethinker.ops.autolog`).
The run ends ``FINISHED``, ``FAILED`` (exception) or ``KILLED`` (Ctrl-C; SIGTERM, which raises
``SystemExit(143)`` inside the run).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from codethinker.ops.autolog import autolog, log_headline
from codethinker.ops.headline import git_commit, run_name
from codethinker.ops.procs import process_alive, process_key
from codethinker.ops.views import end_line, write_views
from codethinker.params import load_params, resolve_params
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

__all__ = ["pipeline_run", "reap", "repro", "stage_run"]

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


def _given_parent(mlflow: Any, client: Any) -> str | None:
    """``$CODETHINKER_PARENT_RUN_ID`` when it names a run of this store, else None (a top-level run)."""
    parent = os.environ.get("CODETHINKER_PARENT_RUN_ID")
    if not parent:
        return None
    try:
        client.get_run(parent)
        return parent
    except Exception:
        print(
            f"codethinker.tracking: parent run {parent} ($CODETHINKER_PARENT_RUN_ID) is not in "
            f"{mlflow.get_tracking_uri()}; this stage's run is a top-level run",
            file=sys.stderr,
        )
        return None


def _stage_tags(stage: str, parent: str | None, fallback_from: str | None, root: str) -> dict[str, str]:
    tags = {STAGE_TAG: stage, OWNER_TAG: process_key(os.getpid()) or ""}
    if parent:
        tags[PARENT_TAG] = parent
    else:  # a run of its own: what a parent would otherwise say
        tags[KIND_TAG] = "stage"
        commit = git_commit(root)
        if commit:  # MLflow's own tag name, shown in the UI
            tags["mlflow.source.git.commit"] = commit
    if os.environ.get("DVC_STAGE"):
        tags["codethinker.dvc_stage"] = os.environ["DVC_STAGE"]
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc.exp_name"] = os.environ["DVC_EXP_NAME"]
    if fallback_from:
        tags["codethinker.fallback_from"] = fallback_from
    return tags


def _exit_status(code: object) -> str:
    return "FINISHED" if code in (0, None) else "KILLED" if code == _KILLED else "FAILED"


@contextlib.contextmanager
def stage_run(stage: str, params: dict[str, Any] | None = None, root: str = ".") -> Iterator[StageRun]:
    """Open the run named ``stage``: a child of ``$CODETHINKER_PARENT_RUN_ID``, else a top-level run.

    On normal exit the stage's declared metrics, plots and out manifest are logged (see the
    module doc). The run ends ``FINISHED``, ``FAILED`` (exception) or ``KILLED`` (SIGTERM, Ctrl-C);
    the parent is left to whoever opened it.
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
    parent = _given_parent(mlflow, client)
    with (
        _sigterm_as_exit(),
        mlflow.start_run(experiment_id=exp_id, run_name=stage, nested=True, parent_run_id=parent) as run,
    ):
        handle = StageRun(mlflow, client, run.info.run_id)
        handle.set_tags(_stage_tags(stage, parent, fallback_from, root))
        if params:
            handle.log_params(params)
        try:
            with activated(handle):
                yield handle
            write_views(stage, root)  # DVC's outs: an error here fails the stage
            print(end_line(stage, time.monotonic() - t0, root), flush=True)
            try:
                autolog(handle, stage, Path(root).resolve())
                if parent:  # the headline, side by side with the other stages' on the parent
                    log_headline(StageRun(mlflow, client, parent), stage, Path(root).resolve())
            except Exception as exc:  # the stage's work is done: tracking must not fail it now
                print(f"codethinker.tracking: could not log {stage}'s declared files: {exc!r}", file=sys.stderr)
        except SystemExit as exc:
            if exc.code not in (0, None):
                mlflow.end_run(status=_exit_status(exc.code))
            raise
        except KeyboardInterrupt:  # Ctrl-C
            mlflow.end_run(status="KILLED")
            raise


@contextlib.contextmanager
def pipeline_run(
    name: str = "pipeline",
    *,
    root: str | os.PathLike[str] = ".",
    tags: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    kind: str = "flow",
) -> Iterator[StageRun]:
    """Open a parent run for a whole pipeline run and end it with the pipeline's status.

    The caller passes ``handle.run_id`` to the stages as ``$CODETHINKER_PARENT_RUN_ID`` (in the
    environment of the processes it starts). The run ends ``FINISHED``, ``FAILED`` on an
    exception, ``KILLED`` on KeyboardInterrupt or SIGTERM (``SystemExit(143)``); a SIGKILLed
    owner's run is reaped later.
    """
    if not enabled():
        yield StageRun(None)
        return
    mlflow, client, exp_id, fallback_from = open_store(root)
    reap(client, exp_id)
    all_tags = {PIPELINE_TAG: "1", OWNER_TAG: process_key(os.getpid()) or "", KIND_TAG: kind}
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
    except SystemExit as exc:
        status = _exit_status(exc.code)
        raise
    finally:
        with contextlib.suppress(Exception):
            client.set_terminated(run.info.run_id, status=status)


class _DvcFailed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"dvc exited {code}")
        self.code = code


def _project_root(start: Path) -> Path:
    """The DVC project ``start`` is in (the first folder upwards with ``.dvc/``), else ``start``."""
    for folder in (start, *start.parents):
        if (folder / ".dvc").is_dir():
            return folder
    return start


def _exp_name(args: Sequence[str]) -> str | None:
    """The ``-n``/``--name`` of ``dvc exp run`` arguments, or None."""
    for i, a in enumerate(args):
        if a == "--":
            break
        if a in ("-n", "--name") and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--name="):
            return a.split("=", 1)[1]
        if a.startswith("-n") and len(a) > 2 and not a.startswith("--"):
            return a[2:]
    return None


def _stop(proc: subprocess.Popen[bytes], sig: int, grace_s: float) -> None:
    """Send ``sig`` to ``proc``'s process group (dvc and its stage), wait for the group to empty; SIGKILL
    it after ``grace_s`` or at a second Ctrl-C/SIGTERM."""
    try:
        os.killpg(proc.pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            proc.poll()  # reap dvc, so that the group can empty
            os.killpg(proc.pid, 0)
            time.sleep(0.2)
    except ProcessLookupError:
        proc.wait()
        return
    except BaseException:  # a second Ctrl-C or SIGTERM: stop now
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def repro(args: Sequence[str] = (), *, exp: bool = False, grace_s: float = 60.0) -> int:
    """``dvc repro ARGS`` (``dvc exp run ARGS`` with ``exp``) under a parent run it opens and ends.

    The parent's id goes to the stages as ``$CODETHINKER_PARENT_RUN_ID``; the parent ends
    ``FINISHED`` when dvc exits 0, ``FAILED`` otherwise, ``KILLED`` on Ctrl-C or SIGTERM (both sent
    on to dvc's process group, which is given ``grace_s`` to stop). Returns dvc's exit code
    (130 after Ctrl-C, 143 after SIGTERM). Run in the project folder or below it.
    """
    verb = ["exp", "run"] if exp else ["repro"]
    root = _project_root(Path.cwd())
    commit = git_commit(root)
    exp_name = _exp_name(args) if exp else None
    name = run_name(" ".join(["dvc", *verb]), commit, exp_name)
    tags = {"codethinker.command": " ".join(["dvc", *verb, *args])[:5000]}
    if commit:  # MLflow's own tag name, shown in the UI
        tags["mlflow.source.git.commit"] = commit
    if exp_name:
        tags["dvc.exp_name"] = exp_name
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # ``python`` in a stage's cmd is this interpreter's environment, as under the flow
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    try:
        with (
            _sigterm_as_exit(),
            pipeline_run(name, root=root, tags=tags, kind="dvc-exp" if exp else "dvc-repro") as parent,
        ):
            if parent.run_id:
                env["CODETHINKER_PARENT_RUN_ID"] = parent.run_id
                print(f"codethinker: MLflow parent run {parent.run_id} ({name})", file=sys.stderr, flush=True)
            try:
                # a process group of its own: Ctrl-C and SIGTERM reach dvc and the stage through us
                proc = subprocess.Popen([sys.executable, "-m", "dvc", *verb, *args], env=env, process_group=0)
                try:
                    code = proc.wait()
                except KeyboardInterrupt:
                    _stop(proc, signal.SIGINT, grace_s)
                    raise
                except SystemExit:
                    _stop(proc, signal.SIGTERM, grace_s)
                    raise
            finally:  # the params the stages ran with (``dvc exp run -S`` writes them once it starts)
                with contextlib.suppress(Exception):
                    parent.log_params(resolve_params(load_params(root / "params.yaml")))
            if code:
                raise _DvcFailed(code)
    except _DvcFailed as exc:
        return exc.code if exc.code > 0 else 128 - exc.code
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0

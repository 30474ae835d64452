"""The whole pipeline as a Prefect flow whose tasks are the DVC stages (docs/operations.md).

    python -m flows.pipeline                          # local: an ephemeral Prefect API, no server
    python -m flows.pipeline -S gen_inputs.backend=llm -S base.profile=full
    python -m flows.pipeline --target sft --force sft # sft and what it needs; rerun sft anyway
    python -m flows.pipeline --dag                    # the stage order and classes, nothing run
    python -m flows.pipeline --no-preflight           # start without `codethinker preflight`'s checks
    python -m flows.pipeline --serve --cron "0 2 * * *" -S grpo.seed=1   # a deployment on a schedule

- The DAG is read from ``dvc.yaml`` through DVC's Python API on every run (never hard-coded,
  :mod:`flows.dag`): a stage added to ``dvc.yaml`` becomes a task. Each task runs
  ``dvc --wait-for-lock repro --single-item <stage>`` (:mod:`flows.dvc_task`), so DVC decides what
  is stale and a rerun skips what is up to date; DVC's repo lock serializes the stages of one workspace.
- ``-S/--set section.key=value`` overrides are written into ``params.yaml`` before the DAG is read,
  with DVC's own ``dvc exp run -S`` code (Hydra override grammar, comments kept), and params.yaml is
  put back byte for byte when the flow ends, however it ends: a deployment's parameters never rewrite
  the checkout. ``dvc.lock`` records the values the stages ran with, so ``dvc status`` shows them as
  changed against params.yaml afterwards. ``keep_overrides=True`` (``--keep-overrides``) leaves them in
  params.yaml, as ``dvc exp run -S`` does in the workspace.
- ``--serve`` serves the flow as a deployment (``codethinker-pipeline/<--name>``; ``--cron`` a schedule;
  the other options its default parameters) to the Prefect server of ``PREFECT_API_URL``, which runs it
  when triggered (UI, ``prefect deployment run``) or on the schedule; ``prefect.yaml`` declares the same
  deployment for a work pool (``prefect deploy``).
- Preflight first: the ``preflight`` task runs :func:`codethinker.preflight.run_preflight` on the
  params (after the overrides) for the stages this run selects (LLM endpoints, hub models, GPUs,
  verl, Ray, data; ``codethinker preflight`` prints the same checks). When a check fails the flow
  stops before any stage, with each failed check and what to do in its message; ``preflight=False``
  (``--no-preflight``) skips it. Where the selected stages need nothing probed (every check "not
  needed") no task is made.
- GPU and LLM stages get retries with exponential backoff; GPU stages (and LLM stages, which
  start a local vLLM, unless ``flow.llm_uses_gpu: false``) hold one slot of the Prefect global
  concurrency limit ``codethinker-gpu`` (made with 1 slot when missing). Which stages need a GPU
  or call an LLM is declared per stage in ``dvc.yaml`` (``meta: {gpu: true}``,
  ``meta: {llm: <section.key>}``; :func:`flows.dag.classify`).
- One MLflow parent run per flow run (``$CODETHINKER_PARENT_RUN_ID`` in the stages' environment);
  every stage's child run hangs under it.
- Artifacts in the Prefect UI: a markdown table per stage with metrics, the ``funnel`` table
  (every number of every metrics file) and a ``pipeline-summary``.

Optional ``flow:`` section of params.yaml (defaults shown)::

    flow:
      gpu_stages: null        # a list of stage names replaces the dvc.yaml `meta: {gpu: true}` marks
      llm_uses_gpu: true      # LLM stages also take the GPU slot
      retries: 2              # for GPU/LLM stages; other stages fail at once (a bug, not bad luck)
      retry_delay_s: 60       # first retry; doubled each time
      gpu_slots: 1            # size of the limit when the flow creates it
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait
from prefect.runtime import flow_run as runtime_flow_run
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.tasks import exponential_backoff

from codethinker.config.check import check_params
from codethinker.config.loader import ParamsFile
from codethinker.errors import CodethinkerError, error_line
from codethinker.ops.runs import pipeline_run
from codethinker.params import ParamsError, load_params
from codethinker.preflight import format_report, plan_checks, run_preflight
from codethinker.tracking import StageRun, tracking_uri
from flows.dag import StageSpec, apply_overrides, classify, read_dag, select
from flows.dvc_task import GPU_LIMIT, dvc_stage, ensure_gpu_limit, flow_run_registry, local_flows_guard
from flows.summary import funnel_rows, summary_markdown, write_summary

__all__ = [
    "GPU_LIMIT",
    "PipelineFailed",
    "PreflightFailed",
    "pipeline",
    "preflight_task",
    "run_preflight_step",
]


class PipelineFailed(CodethinkerError, RuntimeError):
    """At least one stage failed or did not run."""


class PreflightFailed(CodethinkerError, RuntimeError):
    """A preflight check failed (or params.yaml does not resolve): no stage was started."""


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
        check_params(params_file, only=sections)  # each selected stage's section as it reads it, before DVC
        planned = plan_checks(ParamsFile.read(params_file), params_file.parent, sections)
    except ParamsError as exc:
        raise PreflightFailed(f"preflight: {exc}") from None
    if not any(c.probe is not None for c in planned):
        logger.info("preflight: nothing to check for the stages %s", ", ".join(sections))
        return []
    return preflight_task(str(params_file), sections)


# --- the flow -------------------------------------------------------------------------------


def _preflight(
    preflight: bool, params_file: Path, specs: list[StageSpec], logger: Any, summary: dict[str, Any]
) -> None:
    """The preflight step (when asked and params.yaml exists); on failure the summary says why."""
    if not preflight:
        logger.info("preflight skipped (preflight=False)")
        return
    if not params_file.is_file():
        return
    try:
        summary["preflight"] = run_preflight_step(params_file, list(dict.fromkeys(s.section for s in specs)), logger)
    except PreflightFailed as exc:
        summary.update(ok=False, preflight_error=str(exc))
        raise


def _record(parent: StageRun, root: Path, summary: dict[str, Any]) -> None:
    """The parent run's funnel metrics and summary and the Prefect artifacts; :class:`PipelineFailed`
    when a stage did not complete."""
    rows = funnel_rows(summary)
    parent.log_metrics({f"{r['stage']}.{r['metric']}": r["value"] for r in rows})
    parent.log_dict({"stages": summary["stages"], "funnel": rows}, "pipeline_summary.json")
    parent.log_artifact(root / "dvc.lock")
    if rows:
        create_table_artifact(key="funnel", table=rows, description="every number of every metrics file")
    create_markdown_artifact(key="pipeline-summary", markdown=summary_markdown(summary), description="stage states")
    bad = [s["stage"] for s in summary["stages"] if s["state"] != "COMPLETED"]
    summary["ok"] = not bad
    if bad:
        raise PipelineFailed(f"stages that failed or did not run: {bad}")


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
    keep_overrides: bool = False,
) -> dict[str, Any]:
    """Run the DVC stages of ``root`` (or ``targets`` and their upstream) as Prefect tasks.

    ``overrides``: ``['section.key=value', ...]`` or ``{'section.key': value}``, written into
    params.yaml first. ``force``: stage names to rerun even when up to date (True: all).
    ``retries``/``retry_delay_s`` override ``flow.retries``/``flow.retry_delay_s`` for GPU/LLM
    stages. ``summary_path``: also write the summary JSON there (even when the flow fails).
    ``preflight``: run the preflight checks first and stop when one fails (False: skip them).
    ``keep_overrides``: leave the overrides in params.yaml (default: params.yaml is restored at the end).
    """
    logger = get_run_logger()
    root_p = Path(root).resolve()
    params_file = root_p / "params.yaml"
    original = params_file.read_bytes() if params_file.is_file() else None
    try:
        applied = apply_overrides(root_p, overrides)
        if applied:
            logger.info("params.yaml overrides for this run: %s", applied)
        return _pipeline(root_p, applied, targets, force, retries, retry_delay_s, summary_path, preflight, logger)
    finally:
        if original is not None and not keep_overrides and params_file.read_bytes() != original:
            params_file.write_bytes(original)
            logger.info("params.yaml restored (the overrides were for this run only)")


def _pipeline(
    root_p: Path,
    applied: list[str],
    targets: list[str] | None,
    force: list[str] | bool,
    retries: int | None,
    retry_delay_s: float | None,
    summary_path: str | None,
    preflight: bool,
    logger: Any,
) -> dict[str, Any]:
    params_file = root_p / "params.yaml"
    params = load_params(params_file) if params_file.is_file() else {}
    cfg = params.get("flow") or {}
    n_retries = int(cfg.get("retries", 2) if retries is None else retries)
    delay = float(cfg.get("retry_delay_s", 60) if retry_delay_s is None else retry_delay_s)
    specs = select(read_dag(root_p), targets)
    classes = classify(specs, params)
    logger.info("stages in order: %s", ", ".join(s.name for s in specs))
    summary = _new_summary(root_p, applied)
    try:
        _preflight(preflight, params_file, specs, logger, summary)
    except PreflightFailed:
        write_summary(summary, summary_path)
        raise
    with local_flows_guard() as alone, flow_run_registry(str(runtime_flow_run.id), logger):
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
                _record(parent, root_p, summary)
        finally:
            write_summary(summary, summary_path)
    return summary


def _new_summary(root: Path, applied: list[str]) -> dict[str, Any]:
    """The flow run's summary before any stage ran (the stages' results are appended)."""
    return {
        "root": str(root),
        "overrides": applied,
        "flow_run_id": str(runtime_flow_run.id),
        "flow_run_name": runtime_flow_run.name,
        "stages": [],
    }


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


# --- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m flows.pipeline``: 0 when every stage completed; an expected error in one line."""
    try:
        return _main(argv)
    except CodethinkerError as exc:
        print(error_line("flows.pipeline", exc), file=sys.stderr)
        return exc.exit_code


def _main(argv: list[str] | None) -> int:
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
    ap.add_argument("--keep-overrides", action="store_true", help="leave the -S overrides in params.yaml")
    ap.add_argument("--serve", action="store_true", help="serve as a deployment of PREFECT_API_URL's server")
    ap.add_argument("--name", default="local", help="the served deployment's name (default: local)")
    ap.add_argument("--cron", help="the served deployment's schedule, e.g. '0 2 * * *' (default: none)")
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
    parameters = {
        "root": str(Path(args.root).resolve()) if args.serve else args.root,
        "overrides": args.overrides,
        "targets": args.targets or None,
        "force": force,
        "retries": args.retries,
        "retry_delay_s": args.retry_delay,
        "summary_path": args.summary,
        "preflight": not args.no_preflight,
        "keep_overrides": args.keep_overrides,
    }
    if args.serve:  # until interrupted: runs what the server schedules or is asked to run
        pipeline.serve(name=args.name, cron=args.cron, parameters=parameters, print_starting_message=True)
        return 0
    state = pipeline(**parameters, return_state=True)
    if state.is_completed():
        summary = state.result()
        for s in summary["stages"]:
            print(f"{s['stage']:>16}  {s['state']:<10} {s.get('status', '')}")
        return 0
    print(f"pipeline {state.type.value}: {state.message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

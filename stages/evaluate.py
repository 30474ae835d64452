"""Stage evaluate: one model on CRUXEval-O, REval-FO (and LiveCodeBench-O where the hub is
reachable), ``runs`` sampled runs each; pass@1 (mean, std), RCS, format rate, thinking depth.

Run: ``python -m stages.evaluate --model base --truth data/eval/truth --truth-metrics metrics/eval_truth.json
--out data/eval/base --metrics metrics/eval/base`` (the cmd of ``dvc repro evaluate@base``, one stage per model:
``${key}`` in dvc.yaml).

Reads ``params.yaml: evaluate`` (``models.<name>``: model folder or hub id, optional LoRA
adapter, prompt format; ``runs``, ``temperature``, ``max_tokens``, ``engine``: vLLM's settings, on
CPU an absolute ``kv_cache_gib``, see docs/evaluation.md) and the
``eval_truth`` stage's truth files. Writes ``<out>/<bench>.jsonl`` (every generation,
judged), ``<metrics>/<bench>.json`` (DVC metrics) and logs both to MLflow (child run
``evaluate@<name>``). ``codethinker report`` turns the metrics into the paper's tables.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from codethinker.config import load_config
from codethinker.config.evaluate import EvaluateConfig
from codethinker.engines.kv_cache import KVCacheError
from codethinker.evaluation.benchmarks import BENCHMARKS, load_traced
from codethinker.evaluation.harness import evaluate_model, model_problem
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "evaluate",
    __doc__,
    options={"model": "a key of evaluate.models in params.yaml (e.g. base, sft, grpo)"},
    truth=path("the eval_truth stage's folder of truth files (<bench>.jsonl)"),
    truth_metrics=path(
        "the eval_truth stage's metrics: which benchmarks were skipped and why (JSON)", made_by="eval_truth"
    ),
    out=path("folder of the judged generations, <bench>.jsonl each"),
    metrics=path("folder of the metrics, <bench>.json each"),
)


def benchmarks(args: argparse.Namespace) -> dict:
    """Truth per benchmark, or the message why it was skipped (from the eval_truth stage)."""
    status = json.loads(args.truth_metrics.read_text())
    out: dict = {}
    for name in sorted(status, key=BENCHMARKS.index):
        truth = args.truth / f"{name}.jsonl"
        out[name] = status[name]["skipped"] if "skipped" in status[name] else load_traced(name, truth)
    return out


@stage_main
def main(argv: list[str] | None = None) -> None:
    args = ARGS.parse(argv)
    cfg = load_config(EvaluateConfig)
    spec = cfg.model(args.model, "evaluate").spec(args.model)
    problem = model_problem(spec)
    if problem:
        raise SystemExit(f"evaluate: {problem}")
    config = cfg.sampling
    engine, backend = cfg.engine.options(), cfg.engine.backend
    pred_dir, metrics_dir = args.out, args.metrics
    run_params = {
        "model": asdict(spec),
        "config": asdict(config),
        "engine": {"backend": backend, **engine},
        "profile": cfg.base.profile,
    }
    with stage_run(f"evaluate@{spec.name}", run_params) as run:
        run.set_tags(
            {
                "eval.model": spec.name,
                "eval.path": spec.model,
                "eval.adapter": spec.adapter or "",
                "eval.format": spec.format,
                "eval.profile": run_params["profile"],
            }
        )
        try:
            results = evaluate_model(
                spec,
                benchmarks(args),
                config,
                backend=backend,
                engine_options=engine,
                engine_params_at="evaluate.engine",
                pred_dir=pred_dir,
                metrics_dir=metrics_dir,
                progress=f"evaluate@{spec.name}",
            )
        except KVCacheError as exc:  # the machine cannot give the KV cache the params ask for
            raise SystemExit(f"evaluate@{spec.name}: {exc}") from None
        for bench, m in results.items():
            if m.get("skipped"):
                run.set_tags({f"{bench}.skipped": m["skipped"]})
                continue
            for r, value in enumerate(m["pass1_runs"]):
                run.log_metrics({f"{bench}.pass1_run": value}, step=r)
        if cfg.log_predictions:
            run.log_artifact(pred_dir, "predictions")


if __name__ == "__main__":
    main()

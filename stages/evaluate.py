"""Stage evaluate: one model on CRUXEval-O, REval-FO (and LiveCodeBench-O where the hub is
reachable), ``runs`` sampled runs each; pass@1 (mean, std), RCS, format rate, thinking depth.

    python -m stages.evaluate --model base     # or: dvc repro evaluate@base (one stage per model)

Reads ``params.yaml: evaluate`` (``models.<name>``: model folder or hub id, optional LoRA
adapter, prompt format; ``runs``, ``temperature``, ``max_tokens``, ``engine``: vLLM's settings, on
CPU an absolute ``kv_cache_gib``, see docs/evaluation.md) and the
``eval_truth`` stage's truth files. Writes ``data/eval/<name>/<bench>.jsonl`` (every generation,
judged), ``metrics/eval/<name>/<bench>.json`` (DVC metrics) and logs both to MLflow (child run
``evaluate@<name>``). ``codethinker report`` turns the metrics into the paper's tables.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.evaluate import EvaluateConfig
from codethinker.engines.kv_cache import KVCacheError
from codethinker.evaluation.benchmarks import BENCHMARKS, load_traced
from codethinker.evaluation.harness import evaluate_model, model_problem
from codethinker.ops.stage import stage_main, stage_run

TRUTH = Path("data/eval/truth")
TRUTH_METRICS = Path("metrics/eval_truth.json")


def benchmarks() -> dict:
    """Truth per benchmark, or the message why it was skipped (from the eval_truth stage)."""
    if not TRUTH_METRICS.is_file():
        raise SystemExit(f"evaluate: {TRUTH_METRICS} is missing; run `dvc repro eval_truth` first")
    status = json.loads(TRUTH_METRICS.read_text())
    out: dict = {}
    for name in sorted(status, key=BENCHMARKS.index):
        path = TRUTH / f"{name}.jsonl"
        out[name] = status[name]["skipped"] if "skipped" in status[name] else load_traced(name, path)
    return out


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m stages.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a key of evaluate.models in params.yaml (e.g. base, sft, grpo)")
    args = ap.parse_args(argv)
    cfg = load_config(EvaluateConfig)
    spec = cfg.model(args.model, "evaluate").spec(args.model)
    problem = model_problem(spec)
    if problem:
        raise SystemExit(f"evaluate: {problem}")
    config = cfg.sampling
    engine, backend = cfg.engine.options(), cfg.engine.backend
    pred_dir, metrics_dir = Path("data/eval") / spec.name, Path("metrics/eval") / spec.name
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
                benchmarks(),
                config,
                backend=backend,
                engine_options=engine,
                engine_params_at="evaluate.engine",
                pred_dir=pred_dir,
                metrics_dir=metrics_dir,
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

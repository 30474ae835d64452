"""Stage generalize: one model on the generalization benchmarks (paper RQ4, Tables 4 and 12):
CRUXEval-I, HumanEval(+), MBPP(+), GSM8K, GSM-Hard, MATH500 (codethinker/evaluation/generalize.py).

Run: ``python -m stages.generalize --model base --truth-metrics metrics/generalize_truth.json
--out data/generalize/base --metrics metrics/generalize/base`` (the cmd of ``dvc repro generalize@base``, one
stage per model: ``${key}`` in dvc.yaml).

Reads ``params.yaml: generalize`` (the benchmarks, ``limit`` problems each, ``n`` samples, sampling)
and the model and vLLM settings from ``evaluate.models`` / ``evaluate.engine``; runs after the oracle check
(``--truth-metrics``, the generalize_truth stage's). Writes ``<out>/<bench>.jsonl`` (every answer, judged) and
``<metrics>/<bench>.json``; a benchmark that cannot run here is written as skipped with the reason.
``codethinker report`` renders Table 4 from these files.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.evaluate import EvaluateConfig
from codethinker.config.generalize import GeneralizeConfig
from codethinker.data.io import RecordError
from codethinker.data.sources import SourceError
from codethinker.engines.kv_cache import KVCacheError
from codethinker.evaluation.generalize import run_benchmarks, summary_lines
from codethinker.evaluation.harness import close_engine, model_problem, open_engine
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "generalize",
    __doc__,
    options={"model": "a key of evaluate.models in params.yaml (base, sft, grpo)"},
    truth_metrics=path("the generalize_truth stage's oracle check (JSON)", made_by="generalize_truth"),
    out=path("folder of the judged answers, <bench>.jsonl each"),
    metrics=path("folder of the metrics, <bench>.json each"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    args = ARGS.parse(argv)
    cfg, ev = load_config(GeneralizeConfig), load_config(EvaluateConfig)
    spec = ev.model(args.model, "generalize").spec(args.model, with_format=False)  # generalize: its own prompts
    if problem := model_problem(spec):
        raise SystemExit(f"generalize@{spec.name}: {problem}")
    config = cfg.sampling
    engine_opts, backend = ev.engine.options(), ev.engine.backend
    with stage_run(f"generalize@{spec.name}", {"model": asdict(spec), "config": asdict(config)}) as run:
        try:
            engine = open_engine(spec, backend, params_at="evaluate.engine", **engine_opts)
        except KVCacheError as exc:
            raise SystemExit(f"generalize@{spec.name}: {exc}") from None
        try:
            results = run_benchmarks(
                engine,
                cfg.benchmarks,
                config,
                mirror=cfg.base.mirror_root(),
                cache_dir=Path(cfg.cache_dir),
                pred_dir=args.out,
                metrics_dir=args.metrics,
                extra={"model": asdict(spec)},
                desc=f"generalize@{spec.name}",
            )
        except (SourceError, RecordError, ValueError) as exc:
            raise SystemExit(f"generalize@{spec.name}: {exc}") from None
        finally:
            close_engine(engine)
        for line in summary_lines(results):
            print(f"generalize@{spec.name}: {line}", flush=True)
        for name, m in results.items():
            if "skipped" in m:
                run.set_tags({f"{name}.skipped": m["skipped"]})


if __name__ == "__main__":
    main()

"""Stage codegen_eval: the code-generation policy (after SFT, after GRPO) on codegen_data's held-out problems.

Run: ``python -m stages.codegen_eval --data data/codegen/problems.jsonl --metrics metrics/codegen_eval.json``
(its cmd in dvc.yaml: ``dvc repro codegen_eval``)::

    dvc exp run codegen_eval -n cg-reflexicoder-s0 -S grpo_codegen.reward=reflexicoder -S grpo_codegen.seed=0

Reads ``params.yaml`` ``codegen_eval``, the reward the grpo_codegen stage trained with (``grpo_codegen.reward``,
``reflexicoder``: the prompt format of the answers) and the judge's limits (``codegen``). Input:
codegen_data's problems (split heldout) and the models of ``codegen_eval.models``. Writes the DVC metrics (per
phase: pass@1, format-valid rate, reward, tests' pass rate, tokens
per answer, truncated share, ReflexiCoder's cycles; each with its 95% bootstrap interval), which
``codethinker report --exps auto`` puts side by side per recipe (docs/codegen.md "GRPO recipes").
"""

from __future__ import annotations

import json

from codethinker.config import load_config
from codethinker.config.codegen_eval import CodegenEvalConfig
from codethinker.data.io import write_json
from codethinker.engines.kv_cache import KVCacheError
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.tasks.codegen import read_problems
from codethinker.training.codegen_eval import run_codegen_eval

ARGS = stage_args(
    "codegen_eval",
    __doc__,
    data=path("codegen_data's problems (JSONL; the heldout split is evaluated)", rows=True),
    metrics=path("per phase: pass@1 and the other means with their 95% intervals (JSON)"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(CodegenEvalConfig)  # reward: grpo_codegen's
    problems = read_problems(paths.data, split="heldout")
    with stage_run("codegen_eval", cfg.as_dict()):
        try:
            result = run_codegen_eval({k: v for k, v in cfg.models.items() if v}, problems, cfg.params)
        except KVCacheError as exc:
            raise SystemExit(f"codegen_eval: {exc}") from None
        write_json(paths.metrics, result)
    print(f"codegen_eval: {json.dumps(result)}")


if __name__ == "__main__":
    main()

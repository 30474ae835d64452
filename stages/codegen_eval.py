"""Stage codegen_eval: the code-generation policy (after SFT, after GRPO) on codegen_data's held-out problems.

    python -m stages.codegen_eval   # or: dvc repro codegen_eval
    dvc exp run codegen_eval -n cg-reflexicoder-s0 -S grpo.task=codegen -S grpo.reward=reflexicoder -S grpo.seed=0

Reads ``params.yaml`` ``codegen_eval``, the reward GRPO trained with (``grpo.task``, ``grpo.reward``,
``grpo.reflexicoder``: the prompt format of the answers) and the judge's limits (``codegen``). Input
``data/codegen/problems.jsonl`` (split heldout) and the models of ``codegen_eval.models``. Writes the DVC
metrics ``metrics/codegen_eval.json`` (per phase: pass@1, format-valid rate, reward, tests' pass rate, tokens
per answer, truncated share, ReflexiCoder's cycles; each with its 95% bootstrap interval), which
``codethinker report --exps auto`` puts side by side per recipe (docs/codegen.md "GRPO recipes").
"""

from __future__ import annotations

import json
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.codegen_eval import CodegenEvalConfig
from codethinker.data.io import write_json
from codethinker.engines.kv_cache import KVCacheError
from codethinker.ops.stage import stage_main, stage_run
from codethinker.training.codegen_eval import run_codegen_eval
from codethinker.training.grpo_codegen import read_problems

METRICS = Path("metrics/codegen_eval.json")


@stage_main
def main() -> None:
    cfg = load_config(CodegenEvalConfig)  # reward: grpo's when grpo.task is codegen
    problems = read_problems(cfg.data, split="heldout")
    with stage_run("codegen_eval", cfg.as_dict()):
        try:
            result = run_codegen_eval({k: v for k, v in cfg.models.items() if v}, problems, cfg.params)
        except KVCacheError as exc:
            raise SystemExit(f"codegen_eval: {exc}") from None
        write_json(METRICS, result)
    print(f"codegen_eval: {json.dumps(result)}")


if __name__ == "__main__":
    main()

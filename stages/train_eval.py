"""Stage train_eval: the policy before SFT, after SFT and after GRPO on held-out GRPO prompts.

    python -m stages.train_eval   # or: dvc repro train_eval

Reads ``params.yaml`` ``train_eval`` and ``model.base``; input
``data/contra_sft/grpo_eval.parquet`` (functions held out of GRPO training). Writes the DVC
metrics ``metrics/train_eval.json`` (format-valid rate, mean CRM reward, RCS, answer accuracy,
mean response tokens per phase) and logs them to MLflow as the ``train_eval`` child run.
"""

from __future__ import annotations

from pathlib import Path

from codethinker.data.io import write_json
from codethinker.engines.kv_cache import KVCacheError
from codethinker.params import load_params, load_section
from codethinker.tracking import stage_run
from codethinker.training.common import from_dict, resolve_profile
from codethinker.training.grpo import load_grpo_rows
from codethinker.training.train_eval import EvalParams, run_train_eval

METRICS = Path("metrics/train_eval.json")


def main() -> None:
    section = load_section("train_eval")
    base = section.pop("base")
    section = resolve_profile(section, base)
    data = Path(section.pop("data"))
    models = dict(section.pop("models"))
    models.setdefault("before_sft", load_params().get("model", {}).get("base", "models/base"))
    models["before_sft"] = models["before_sft"] or load_params().get("model", {}).get("base", "models/base")
    section.setdefault("seed", int(base.get("seed", 0)))
    p = from_dict(EvalParams, section)
    rows, _ = load_grpo_rows(data)
    with stage_run("train_eval", {"models": models, **section}) as run:
        try:
            result = run_train_eval(models, rows, p)
        except KVCacheError as exc:  # the machine cannot give the engine's KV cache
            raise SystemExit(f"train_eval: {exc}") from None
        run.log_metrics(result)
    write_json(METRICS, result)
    cols = ("fmt_rate", "reward", "rcs", "answer_acc", "response_tokens")
    print("phase        " + "  ".join(f"{c:>15}" for c in cols))
    for name, m in result.items():
        print(f"{name:12} " + "  ".join(f"{m.get(c, float('nan')):15.3f}" for c in cols))


if __name__ == "__main__":
    main()

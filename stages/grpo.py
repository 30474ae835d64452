"""Stage grpo: GRPO with regular + DBS samples and the CRM reward, from the SFT policy.

    python -m stages.grpo         # or: dvc repro grpo
    dvc exp run -S grpo.reward=orm   # the CodeReasoner baseline (whitebox: ExecVerify's)
    dvc exp run -S grpo.task=codegen -S grpo.reward=reflexicoder   # code generation (docs/codegen.md)

Reads ``params.yaml`` ``grpo`` (``backend: local`` = TRL on this machine, ``verl`` = writes
verl's config and launches ``python -m verl.trainer.main_ppo``; see docs/training.md). ``reward``:
``crm`` (ConTra prompts, DBS + CRM), ``orm`` or ``whitebox`` (the baselines: their prompts rendered
from the rows' truths, every sample regular; :mod:`codethinker.rewards.switch`).
``task: codegen`` trains on codegen_data's problems (``data/codegen/problems.jsonl``, split train) with
``reward`` ``codegen_outcome``, ``reflexicoder``, ``cg_grpo`` or ``cg_grpo_ungated``.
Input: ``data/contra_sft/grpo_train.parquet`` (verl's schema) and the SFT policy
``models/sft/merged``. Writes ``models/grpo/{adapter,merged}``, checkpoints in
``models/grpo/checkpoints`` (a restarted run resumes), ``metrics/grpo.json`` and the per-step
reward curve ``plots/grpo_reward.csv`` (also logged to MLflow as the ``grpo`` child run).
"""

from __future__ import annotations

import json
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.grpo import GRPOConfig
from codethinker.data.io import write_json
from codethinker.engines.kv_cache import KVCacheError
from codethinker.ops.stage import stage_main, stage_run

METRICS, PLOT = Path("metrics/grpo.json"), Path("plots/grpo_reward.csv")


@stage_main
def main() -> None:
    cfg = load_config(GRPOConfig)  # seed null: base.seed; init null: model.base
    data, out, model, p = Path(cfg.train_data), Path(cfg.out), str(cfg.init), cfg.params
    with stage_run("grpo", cfg.as_dict()) as run:
        if p.backend == "verl":
            from codethinker.training.grpo_verl import run_grpo_verl

            metrics = run_grpo_verl(model, data, out, p, root=Path.cwd())
        elif p.backend == "local":
            from codethinker.training.grpo_local import run_grpo_local

            if not (out / "checkpoints").exists():
                PLOT.unlink(missing_ok=True)  # a fresh run starts a fresh curve; a resumed one continues it
            try:
                metrics = run_grpo_local(model, data, out, p, run=run, plot_csv=PLOT)
            except KVCacheError as exc:  # the machine cannot give the rollout engine's KV cache
                raise SystemExit(f"grpo: {exc}") from None
        else:
            raise SystemExit(f"grpo.backend must be local or verl, got {p.backend!r}")
        write_json(METRICS, {"init": model, **metrics})
    print(f"grpo ({p.backend}): {json.dumps(metrics)}")


if __name__ == "__main__":
    main()

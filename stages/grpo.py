"""Stage grpo: GRPO with regular + DBS samples and the CRM reward, from the SFT policy (output prediction).

Run: ``python -m stages.grpo --data data/contra_sft/grpo_train.parquet --out models/grpo --metrics
metrics/grpo.json --plot plots/grpo_reward.csv`` (its cmd in dvc.yaml: ``dvc repro grpo``)::

    dvc exp run -S grpo.reward=orm   # the CodeReasoner baseline (whitebox: ExecVerify's)

Reads ``params.yaml`` ``grpo`` (``backend: local`` = TRL on this machine, ``verl`` = writes
verl's config and launches ``python -m verl.trainer.main_ppo``; see docs/training.md). ``reward``:
``crm`` (ConTra prompts, DBS + CRM), ``orm`` or ``whitebox`` (the baselines: their prompts rendered
from the rows' truths, every sample regular; :mod:`codethinker.rewards.switch`). Code generation is its own
stage, grpo_codegen (stages/grpo_codegen.py), so this one neither waits for nor reruns on the reward model.
Input: ``--data`` (the GRPO parquet, verl's schema) and the policy ``grpo.init`` (the SFT policy). Writes
``<out>/merged`` (and ``<out>/adapter`` with ``finetune: lora``), checkpoints in ``<out>/checkpoints`` (a
restarted run resumes), the metrics and the per-step reward curve (also logged to MLflow as the ``grpo``
child run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from codethinker.config import load_config
from codethinker.config.grpo import GRPOConfig
from codethinker.data.io import write_json
from codethinker.engines.kv_cache import KVCacheError
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.training.grpo_run import run_grpo

ARGS = stage_args(
    "grpo",
    __doc__,
    data=path("the GRPO prompts (verl's parquet schema)"),
    out=path("folder of adapter/, merged/ and checkpoints/"),
    metrics=path("the run's metrics (JSON)"),
    plot=path("the per-step reward curve (CSV, continued by a resumed run)"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    train("grpo", load_config(GRPOConfig), ARGS.parse(argv))  # seed null: base.seed; init null: model.base


def train(stage: str, cfg: GRPOConfig, paths: Any) -> None:
    """The GRPO stage ``stage`` (grpo, grpo_codegen): its MLflow child run, the training, its metrics."""
    p, model = cfg.params, str(cfg.init)
    with stage_run(stage, cfg.as_dict()) as run:
        try:
            metrics = run_grpo(model, paths.data, paths.out, p, run=run, plot=paths.plot, root=Path.cwd(), stage=stage)
        except KVCacheError as exc:  # the machine cannot give the rollout engine's KV cache
            raise SystemExit(f"{stage}: {exc}") from None
        write_json(paths.metrics, {"init": model, **metrics})
    print(f"{stage} ({p.backend}): {json.dumps(metrics)}")


if __name__ == "__main__":
    main()

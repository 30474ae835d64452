"""Stage grpo_codegen: GRPO on code generation (the ReCode / ReflexiCoder recipes, docs/codegen.md), from the
SFT policy, on codegen_data's training problems.

Run: ``python -m stages.grpo_codegen --data data/codegen/problems.jsonl --reward-model models/reward_model
--out models/grpo_codegen --metrics metrics/grpo_codegen.json --plot plots/grpo_codegen_reward.csv`` (its cmd
in dvc.yaml: ``dvc repro grpo_codegen``)::

    dvc exp run codegen_eval -S grpo_codegen.reward=reflexicoder -S grpo_codegen.seed=0

Reads ``params.yaml`` ``grpo_codegen``: any ``grpo`` key it leaves out is grpo's (backend, policy, schedule,
rollout); ``reward``: ``codegen_outcome``, ``reflexicoder``, ``cg_grpo``, ``cg_grpo_ungated`` (these two: R_proc
of the reward_model stage's ``--reward-model``) or ``recode_outcome`` (:mod:`codethinker.rewards.codegen_switch`);
DBS branches at blocks of code; the judge's limits are ``codegen``'s. Writes what the grpo stage writes, under
``--out`` (the MLflow child run ``grpo_codegen``).
"""

from __future__ import annotations

import dataclasses

from codethinker.config import load_config
from codethinker.config.grpo import GRPOCodegenConfig
from codethinker.ops.stage import path, stage_args, stage_main
from stages.grpo import train

ARGS = stage_args(
    "grpo_codegen",
    __doc__,
    data=path("codegen_data's problems (JSONL; GRPO trains on split train)"),
    reward_model=path("the reward_model stage's CRPL reward model (rewards cg_grpo, cg_grpo_ungated)"),
    out=path("folder of adapter/, merged/ and checkpoints/"),
    metrics=path("the run's metrics (JSON)"),
    plot=path("the per-step reward curve (CSV, continued by a resumed run)"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(GRPOCodegenConfig)  # grpo's settings under this section's
    cfg = dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, reward_model=str(paths.reward_model)))
    train("grpo_codegen", cfg, paths)


if __name__ == "__main__":
    main()

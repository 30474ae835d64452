"""Stage grpo: GRPO with regular + DBS samples and the CRM reward, from the SFT policy.

Run: ``python -m stages.grpo --data data/contra_sft/grpo_train.parquet --codegen-data data/codegen/problems.jsonl
--reward-model models/reward_model --out models/grpo --metrics metrics/grpo.json --plot plots/grpo_reward.csv``
(its cmd in dvc.yaml: ``dvc repro grpo``)::

    dvc exp run -S grpo.reward=orm   # the CodeReasoner baseline (whitebox: ExecVerify's)
    dvc exp run -S grpo.task=codegen -S grpo.reward=reflexicoder   # code generation (docs/codegen.md)

Reads ``params.yaml`` ``grpo`` (``backend: local`` = TRL on this machine, ``verl`` = writes
verl's config and launches ``python -m verl.trainer.main_ppo``; see docs/training.md). ``reward``:
``crm`` (ConTra prompts, DBS + CRM), ``orm`` or ``whitebox`` (the baselines: their prompts rendered
from the rows' truths, every sample regular; :mod:`codethinker.rewards.switch`).
``task: codegen`` trains on codegen_data's problems (``--codegen-data``, split train) with ``reward``
``codegen_outcome``, ``reflexicoder``, ``cg_grpo`` or ``cg_grpo_ungated`` (these two: R_proc of the reward_model
stage's ``--reward-model``). Input: ``--data`` (the GRPO parquet, verl's schema) and the policy ``grpo.init``
(the SFT policy). Writes ``<out>/merged`` (and ``<out>/adapter`` with ``finetune: lora``), checkpoints in
``<out>/checkpoints`` (a restarted run resumes), the metrics and the per-step reward curve (also logged to
MLflow as the ``grpo`` child run).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from codethinker.config import load_config
from codethinker.config.grpo import GRPOConfig
from codethinker.data.io import write_json
from codethinker.engines.kv_cache import KVCacheError
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "grpo",
    __doc__,
    data=path("task reasoning: the GRPO prompts (verl's parquet schema)"),
    codegen_data=path("task codegen: codegen_data's problems (JSONL, split train)"),
    reward_model=path("reward cg_grpo / cg_grpo_ungated: the reward_model stage's CRPL reward model"),
    out=path("folder of adapter/, merged/ and checkpoints/"),
    metrics=path("the run's metrics (JSON)"),
    plot=path("the per-step reward curve (CSV, continued by a resumed run)"),
)


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(GRPOConfig)  # seed null: base.seed; init null: model.base
    p = dataclasses.replace(cfg.params, reward_model=str(paths.reward_model))
    cfg = dataclasses.replace(cfg, params=p)
    data = paths.codegen_data if p.task == "codegen" else paths.data
    out, model, plot = paths.out, str(cfg.init), paths.plot
    with stage_run("grpo", cfg.as_dict()) as run:
        if p.backend == "verl":
            from codethinker.training.grpo_verl import run_grpo_verl

            metrics = run_grpo_verl(model, data, out, p, root=Path.cwd())
        elif p.backend == "local":
            from codethinker.training.grpo_local import run_grpo_local

            if not (out / "checkpoints").exists():
                plot.unlink(missing_ok=True)  # a fresh run starts a fresh curve; a resumed one continues it
            try:
                metrics = run_grpo_local(model, data, out, p, run=run, plot_csv=plot)
            except KVCacheError as exc:  # the machine cannot give the rollout engine's KV cache
                raise SystemExit(f"grpo: {exc}") from None
        else:
            raise SystemExit(f"grpo.backend must be local or verl, got {p.backend!r}")
        if p.finetune == "lora":  # not a DVC out (full fine-tuning writes none): logged and registered here
            run.register_adapter(out / "adapter", "codethinker-grpo")
        write_json(paths.metrics, {"init": model, **metrics})
    print(f"grpo ({p.backend}): {json.dumps(metrics)}")


if __name__ == "__main__":
    main()

"""GRPO on a Ray cluster with verl: the configuration written from params.yaml, and the launch.

:func:`verl_overrides` turns :class:`GRPOParams` into hydra overrides of verl's ``ppo_trainer``
config (verl 0.9.1); :func:`run_grpo_verl` writes them (``<out>/verl/overrides.txt`` and the
agent-loop file) and runs ``python -m verl.trainer.main_ppo`` with them (``$VERL_PYTHON``, default
``.venv-verl/bin/python``). The mapping:

- GRPO: ``algorithm.adv_estimator=grpo``, group ``rollout.n = n_regular + n_dbs`` (8), std-normalized
  advantages; no KL loss (``actor.use_kl_loss=false``), no KL in the reward
  (``algorithm.use_kl_in_reward=false``), ``actor.entropy_coeff=0``, ``loss_agg_mode=token-mean``.
- DBS in the rollout: verl's agent loop ``codethinker_dbs``
  (:class:`codethinker.training.verl_dbs.DBSAgentLoop`) makes the first ``n_regular`` samples of each
  group regular and the other ``n_dbs`` one DBS tree, through verl's own vLLM servers.
- Reward: ``reward.custom_reward_function.path`` = ``codethinker/rewards/verl_reward.py``,
  ``name`` = ``compute_score`` (CRM); ablation switches travel as ``$CODETHINKER_CRM``.
- LoRA: ``model.lora_rank/lora_alpha/target_modules``, ``rollout.load_format=safetensors``.
- Logging: ``trainer.logger`` (console + mlflow: verl reads ``$MLFLOW_TRACKING_URI``).
- Checkpoints: ``trainer.default_local_dir=<out>/checkpoints``, ``resume_mode=auto``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from codethinker.training.grpo import GRPOParams

__all__ = ["AGENT_LOOP_NAME", "agent_loop_yaml", "run_grpo_verl", "verl_command", "verl_overrides"]

AGENT_LOOP_NAME = "codethinker_dbs"
REWARD_FILE = Path(__file__).resolve().parents[1] / "rewards" / "verl_reward.py"


def agent_loop_yaml(p: GRPOParams) -> str:
    r = p.rollout
    entry = {
        "name": AGENT_LOOP_NAME,
        "_target_": "codethinker.training.verl_dbs.DBSAgentLoop",
        "n_regular": r.n_regular,
        "n_dbs": r.n_dbs,
        "block_stop": list(r.block_stop),
        "final_stop": list(r.final_stop),
        "max_rounds": r.dbs_max_rounds,
    }
    return "- " + json.dumps(entry) + "\n"  # JSON is YAML


def verl_overrides(
    model: str | Path, train: str | Path, val: str | Path | None, out: Path, p: GRPOParams, agent_loop_path: Path
) -> list[str]:
    """Hydra overrides of verl's ``ppo_trainer`` config for this run."""
    r, v, lora = p.rollout, p.verl, p.lora
    val = val or train
    steps = [] if p.max_steps < 0 else [f"trainer.total_training_steps={p.max_steps}"]
    loggers = "[" + ",".join(v.loggers) + "]"
    modules = "[" + ",".join(lora.target_modules) + "]"
    ov = [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        "algorithm.norm_adv_by_std_in_grpo=true",
        f"data.train_files={Path(train).resolve()}",
        f"data.val_files={Path(val).resolve()}",
        f"data.train_batch_size={p.prompts_per_step}",
        f"data.max_prompt_length={v.max_prompt_length}",
        f"data.max_response_length={r.max_completion_tokens}",
        "data.filter_overlong_prompts=true",
        "data.truncation=error",
        f"data.seed={p.seed}",
        f"actor_rollout_ref.model.path={model}",
        f"actor_rollout_ref.model.lora_rank={lora.r}",
        f"actor_rollout_ref.model.lora_alpha={lora.alpha}",
        f"actor_rollout_ref.model.target_modules={modules}",
        "actor_rollout_ref.model.use_remove_padding=true",
        f"actor_rollout_ref.actor.strategy={v.strategy}",
        f"actor_rollout_ref.actor.optim.lr={p.learning_rate}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={v.ppo_mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={v.micro_batch_size_per_gpu}",
        f"actor_rollout_ref.actor.use_kl_loss={'true' if p.beta > 0 else 'false'}",
        f"actor_rollout_ref.actor.kl_loss_coef={p.beta}",
        f"actor_rollout_ref.actor.entropy_coeff={p.entropy_coeff}",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        f"actor_rollout_ref.rollout.name={v.rollout_name}",
        "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={r.group}",
        f"actor_rollout_ref.rollout.temperature={r.temperature}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={v.tensor_parallel}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={v.gpu_memory_utilization}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={v.micro_batch_size_per_gpu}",
        "actor_rollout_ref.rollout.load_format=safetensors",
        "actor_rollout_ref.rollout.layered_summon=true",
        "actor_rollout_ref.rollout.calculate_log_probs=false",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP_NAME}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loop_path.resolve()}",
        f"reward.custom_reward_function.path={REWARD_FILE}",
        "reward.custom_reward_function.name=compute_score",
        f"trainer.logger={loggers}",
        f"trainer.project_name={v.project}",
        f"trainer.experiment_name={v.experiment}",
        f"trainer.nnodes={v.nnodes}",
        f"trainer.n_gpus_per_node={v.gpus_per_node}",
        f"trainer.total_epochs={int(max(1, round(p.epochs)))}",
        f"trainer.save_freq={p.save_steps}",
        f"trainer.max_actor_ckpt_to_keep={p.save_total_limit}",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={(out / 'checkpoints').resolve()}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        *steps,
        *v.overrides,
    ]
    return ov


def verl_command(overrides: list[str], python: str | None = None) -> list[str]:
    py = python or os.environ.get("VERL_PYTHON") or str(Path(".venv-verl/bin/python").resolve())
    return [py, "-m", "verl.trainer.main_ppo", *overrides]


def run_grpo_verl(
    model: str | Path,
    data: str | Path,
    out: Path,
    p: GRPOParams,
    root: Path | None = None,
    val: str | Path | None = None,
) -> dict[str, Any]:
    """Write the config and launch verl (unless ``verl.dry_run``); returns the stage's metrics."""
    out = Path(out)
    cfg_dir = out / "verl"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    loop_path = cfg_dir / "agent_loop.yaml"
    loop_path.write_text(agent_loop_yaml(p))
    ov = verl_overrides(model, data, val, out, p, loop_path)
    cmd = verl_command(ov)
    (cfg_dir / "overrides.txt").write_text("\n".join(ov) + "\n")
    (cfg_dir / "command.sh").write_text(" ".join(shlex.quote(c) for c in cmd) + "\n")
    metrics: dict[str, Any] = {"backend": "verl", "command": str(cfg_dir / "command.sh"), "launched": False}
    if p.verl.dry_run:
        return metrics
    env = {**os.environ, "CODETHINKER_CRM": json.dumps(p.crm)}
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t0 = time.time()
    subprocess.run(cmd, check=True, env=env)
    metrics.update(launched=True, wall_s=round(time.time() - t0, 1))
    return metrics

"""GRPO on a Ray cluster with verl: the configuration written from params.yaml, the launch, the model.

:func:`verl_overrides` turns :class:`GRPOParams` into hydra overrides of verl's ``ppo_trainer``
config (verl 0.9.1); :func:`run_grpo_verl` writes them (``<out>/verl/overrides.txt`` and the
agent-loop file), runs ``python -m verl.trainer.main_ppo`` with them (``$VERL_PYTHON``, default
``.venv-verl/bin/python``), then turns verl's last checkpoint into ``<out>/adapter`` and
``<out>/merged`` (:mod:`codethinker.training.verl_merge`, in the same interpreter). The mapping:

- GRPO: ``algorithm.adv_estimator=grpo``, group ``rollout.n = n_regular + n_dbs`` (8), std-normalized
  advantages; no KL loss (``actor.use_kl_loss=false``), no KL in the reward
  (``algorithm.use_kl_in_reward=false``), ``actor.entropy_coeff=0``, ``loss_agg_mode=token-mean``.
- DBS in the rollout: verl's agent loop ``codethinker_dbs``
  (:class:`codethinker.training.verl_dbs.DBSAgentLoop`) makes the first ``n_regular`` samples of each
  group regular and the other ``n_dbs`` one DBS tree, through verl's own vLLM servers.
- Reward: ``reward.custom_reward_function.path`` = ``codethinker/rewards/verl_reward.py``,
  ``name`` = ``compute_score``. The reward kind (``grpo.reward``: crm | orm | whitebox) and its settings
  (``grpo.crm`` ablation switches, ``grpo.whitebox``) travel in the config, as
  ``reward.custom_reward_function.reward_kwargs`` (``{reward: crm, crm: {...}}``, :func:`reward_kwargs`):
  verl's loader (``get_custom_reward_fn``) binds them to every call of ``compute_score`` on whichever
  node the reward runs (an environment variable would not reach Ray workers started with ``ray start``).
- Any task (``grpo.task``, :mod:`codethinker.tasks`): its rows as verl's parquet (:meth:`Task.verl_data
  <codethinker.tasks.base.Task.verl_data>`), its name, reward and the reward's settings in ``reward_kwargs``
  (ReCode's kinds: ``reward_model``, the CRPL model's absolute path), and its DBS prefix score in the agent loop.
- Data: for ``crm`` the GRPO parquet as it is (its ``prompt`` is the ConTra prompt); for a baseline
  reward (``orm``, ``whitebox``) a copy with that reward's prompt rendered from each row's truth and
  ``extra_info.reward`` set, ``<out>/verl/grpo_train.<reward>.parquet`` (:func:`write_reward_data`).
  The baselines sample all ``n_regular + n_dbs`` responses regularly (no ConTra blocks for DBS;
  :func:`codethinker.training.grpo.resolve_reward`).
- Paths: every path handed to verl is absolute (model, data, agent-loop file, reward file,
  checkpoints), so every node of the cluster resolves it the same way; a model that is not a local
  path is passed on unchanged as a hub id.
- LoRA: ``model.lora_rank/lora_alpha/target_modules``, ``rollout.load_format=safetensors``.
- Logging: ``trainer.logger`` (console + mlflow: verl reads ``$MLFLOW_TRACKING_URI``).
- Checkpoints: ``trainer.default_local_dir=<out>/checkpoints``, ``resume_mode=auto``,
  ``save_freq >= 1`` (verl then also saves at the last step: the model export needs that checkpoint).

:func:`prompt_token_ids` is the prompt tokenization shared with the agent loop: token ids under every
transformers release (``apply_chat_template(tokenize=True)`` returns a ``BatchEncoding`` in some).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

from codethinker.training.grpo import GRPOParams, VerlParams, resolve_reward
from codethinker.training.grpo_data import load_grpo_rows, resolve_budget

__all__ = [
    "AGENT_LOOP_NAME",
    "agent_loop_yaml",
    "crm_reward_kwargs",
    "export_verl_model",
    "model_ref",
    "prompt_token_ids",
    "reward_kwargs",
    "run_grpo_verl",
    "verl_command",
    "verl_overrides",
    "write_reward_data",
]

AGENT_LOOP_NAME = "codethinker_dbs"
# verl loads the reward by file path: named here as a module too, so `make deps` sees the grpo stage runs it
REWARD_MODULE = "codethinker.rewards.verl_reward"
REWARD_FILE = Path(__file__).resolve().parents[2].joinpath(*REWARD_MODULE.split(".")).with_suffix(".py")


def prompt_token_ids(tokenizer: Any, messages: Sequence[Mapping[str, Any]], **template_kwargs: Any) -> list[int]:
    """The chat prompt's token ids (generation prompt added), as plain ints.

    ``apply_chat_template(tokenize=True)`` returns a list of ids in some transformers releases and a
    ``BatchEncoding`` (``input_ids`` + ``attention_mask``) in others (verl's 5.10 and 5.19 both do);
    ``list()`` of the latter is its key names. Asking for the dict and taking ``input_ids`` works under
    both; a tensor or array (``return_tensors``), a batch of one and numpy integers become a flat list.
    """
    out = tokenizer.apply_chat_template(
        list(messages), add_generation_prompt=True, tokenize=True, return_dict=True, **template_kwargs
    )
    ids = out["input_ids"] if isinstance(out, Mapping) or hasattr(out, "keys") else out
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
        raise TypeError(f"chat template gave no token ids: {ids!r:.80}")
    if len(ids) == 1 and isinstance(ids[0], Sequence) and not isinstance(ids[0], str):  # a batch of one
        [ids] = ids
    if not all(isinstance(i, Integral) and not isinstance(i, bool) for i in ids):
        raise TypeError(f"chat template gave no token ids: {list(ids)[:4]!r}")
    return [int(i) for i in ids]


def model_ref(model: str | Path) -> str:
    """The model as verl's nodes must see it: an absolute path for a local model, a hub id unchanged.

    Local: it exists here, is absolute, starts with ``.``/``..``/``~``, or its first component is a
    directory here (``models/base`` before ``bootstrap`` wrote it). Anything else (``Qwen/...``) is a
    hub id.
    """
    text = str(model)
    path = Path(text).expanduser()
    first_is_dir = any(Path(f).is_dir() for f in Path(text).parts[:1])
    local = path.is_absolute() or path.exists() or text.startswith(("./", "../")) or first_is_dir
    return str(path.resolve()) if local else str(model)


def _hydra_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"not a finite number: {v!r}")
        return repr(v)
    if isinstance(v, str) and v.isidentifier():  # a setting's name (reflexicoder.terminal)
        return v
    raise TypeError(f"reward settings are booleans, numbers or names, got {v!r}")


def _hydra_dict(d: Mapping[str, Any]) -> str:
    return "{" + ",".join(f"{k}:{_hydra_value(d[k])}" for k in sorted(d)) + "}"


def _hydra_str(text: str) -> str:
    """``text`` quoted for hydra (a quote and the backslashes before a quote or the end escaped)."""
    return "'" + re.sub(r"(\\*)('|$)", lambda m: m[1] * 2 + ("\\'" if m[2] else ""), text) + "'"


def crm_reward_kwargs(crm: Mapping[str, Any]) -> str:
    """The hydra override that binds the CRM switches to every ``compute_score`` call verl makes.

    Checked by :class:`codethinker.rewards.crm.CRMConfig` first, so a misspelled switch stops the
    launch instead of training the full CRM.

    >>> crm_reward_kwargs({"gate": False, "alpha": 0.5})
    '++reward.custom_reward_function.reward_kwargs={crm:{alpha:0.5,gate:false}}'
    """
    from codethinker.config.loader import from_mapping
    from codethinker.rewards.crm import CRMConfig

    from_mapping(CRMConfig, dict(crm), "grpo.crm")
    return "++reward.custom_reward_function.reward_kwargs={crm:" + _hydra_dict(crm) + "}"


def reward_kwargs(p: GRPOParams) -> str:
    """The hydra override that binds the run's task and reward to every ``compute_score`` call verl makes: the
    task's name, the reward's, and the reward's settings (:meth:`RewardSpec.kwargs
    <codethinker.tasks.base.RewardSpec.kwargs>`; a model path made absolute).

    Checked first (:meth:`GRPOParams.reward_spec`): a misspelled kind, switch or setting stops the launch.

    >>> from codethinker.training.grpo import grpo_params
    >>> reward_kwargs(grpo_params({"crm": {"gate": False}}))
    "++reward.custom_reward_function.reward_kwargs={task:'output_prediction',reward:crm,crm:{alpha:1.0,ccw:true,gate:false,orm:true,prefix:true,prm:true}}"
    >>> reward_kwargs(grpo_params({"reward": "orm", "crm": {"gate": False}}))
    "++reward.custom_reward_function.reward_kwargs={task:'output_prediction',reward:orm}"
    >>> reward_kwargs(grpo_params({"task": "codegen", "reward": "codegen_outcome", "judge": {"memory_mb": 512}}))
    "++reward.custom_reward_function.reward_kwargs={task:'codegen',reward:codegen_outcome,judge:{memory_mb:512,setup_timeout_s:5.0,test_timeout_s:3.0}}"
    """
    spec = p.reward_spec()
    parts = [f"task:{_hydra_str(p.task)}", f"reward:{spec.kind}"]
    for key, value in spec.kwargs().items():  # the reward's settings; a model path absolute for every node
        if key != "reward":
            text = _hydra_str(str(Path(value).resolve())) if key == "reward_model" else _hydra_dict(value)
            parts.append(f"{key}:{text}")
    return "++reward.custom_reward_function.reward_kwargs={" + ",".join(parts) + "}"


def write_reward_data(data: str | Path, out_dir: Path, p: GRPOParams) -> Path:
    """The parquet verl trains on: the task's rows in ``p``'s reward format (:meth:`Task.verl_data
    <codethinker.tasks.base.Task.verl_data>`; output prediction's ``crm``: ``data`` itself)."""
    return p.task_obj.verl_data(data, out_dir, p.reward_spec())


def agent_loop_yaml(p: GRPOParams) -> str:
    """The agent-loop file: the group's regular and DBS samples and their stop strings, as the reward allows
    (:func:`~codethinker.training.grpo.resolve_reward`: a baseline reward's group is all regular)."""
    r = resolve_reward(p).rollout
    entry = {
        "name": AGENT_LOOP_NAME,
        "_target_": "codethinker.training.verl_dbs.DBSAgentLoop",
        "n_regular": r.n_regular,
        "n_dbs": r.n_dbs,
        "block_stop": list(r.block_stop),
        "final_stop": list(r.final_stop),
        "max_rounds": r.dbs_max_rounds,
        "seed": p.seed,
        "task": p.task,  # DBS's prefix score: the task's (verl_dbs.prefix_scorer_for)
        "reward": p.reward,
    }
    return "- " + json.dumps(entry) + "\n"  # JSON is YAML


def _data_overrides(train: str | Path, val: str | Path, p: GRPOParams) -> list[str]:
    """GRPO itself (advantages normalized per group, no KL in the reward) and the data."""
    return [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"algorithm.norm_adv_by_std_in_grpo={str(p.scale_rewards == 'group').lower()}",
        f"data.train_files={Path(train).resolve()}",
        f"data.val_files={Path(val).resolve()}",
        f"data.train_batch_size={p.prompts_per_step}",
        f"data.max_prompt_length={p.verl.max_prompt_length}",
        f"data.max_response_length={p.rollout.max_completion_tokens}",
        "data.filter_overlong_prompts=true",
        "data.truncation=error",
        f"data.seed={p.seed}",
    ]


def _actor_rollout_overrides(model: str | Path, p: GRPOParams, agent_loop_path: Path) -> list[str]:
    """The policy (LoRA, or every weight with ``finetune: full``: verl's ``lora_rank=0``; optimizer,
    loss) and its rollout (group size, sampling, the DBS agent loop)."""
    r, v, lora = p.rollout, p.verl, p.lora
    modules = "[" + ",".join(lora.target_modules) + "]"
    return [
        f"actor_rollout_ref.model.path={model_ref(model)}",
        f"actor_rollout_ref.model.lora_rank={lora.r if p.finetune == 'lora' else 0}",
        f"actor_rollout_ref.model.lora_alpha={lora.alpha}",
        f"actor_rollout_ref.model.target_modules={modules}",
        "actor_rollout_ref.model.use_remove_padding=true",
        f"actor_rollout_ref.model.enable_gradient_checkpointing={str(p.gradient_checkpointing).lower()}",
        f"actor_rollout_ref.actor.strategy={v.strategy}",
        f"actor_rollout_ref.actor.optim.lr={p.learning_rate}",
        *([f"actor_rollout_ref.actor.optim.lr_warmup_steps={p.warmup_steps}"] if p.warmup_steps else []),
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
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={Path(agent_loop_path).resolve()}",
    ]


def _trainer_overrides(out: Path, p: GRPOParams) -> list[str]:
    """The reward, logging, the cluster's shape, the length of the run and its checkpoints."""
    v = p.verl
    steps = [] if p.max_steps < 0 else [f"trainer.total_training_steps={p.max_steps}"]
    experiment = v.experiment
    if experiment == VerlParams().experiment and p.reward != "crm":  # the default name says DBS + CRM
        experiment = f"grpo-{p.reward}"
    loggers = "[" + ",".join(v.loggers) + "]"
    return [
        f"reward.custom_reward_function.path={REWARD_FILE}",
        "reward.custom_reward_function.name=compute_score",
        reward_kwargs(p),
        f"trainer.logger={loggers}",
        f"trainer.project_name={v.project}",
        f"trainer.experiment_name={experiment}",
        f"trainer.nnodes={v.nnodes}",
        f"trainer.n_gpus_per_node={v.gpus_per_node}",
        f"trainer.total_epochs={int(max(1, round(p.epochs)))}",
        f"trainer.save_freq={max(1, p.save_steps)}",
        f"trainer.max_actor_ckpt_to_keep={p.save_total_limit}",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={(Path(out) / 'checkpoints').resolve()}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        *steps,
        *v.overrides,
    ]


def verl_overrides(
    model: str | Path, train: str | Path, val: str | Path | None, out: Path, p: GRPOParams, agent_loop_path: Path
) -> list[str]:
    """Hydra overrides of verl's ``ppo_trainer`` config for this run (every path absolute)."""
    return [
        *_data_overrides(train, val or train, p),
        *_actor_rollout_overrides(model, p, agent_loop_path),
        *_trainer_overrides(out, p),
    ]


def verl_python(python: str | None = None) -> str:
    """The verl environment's interpreter: ``python``, ``$VERL_PYTHON`` or ``.venv-verl/bin/python``
    (absolute, not resolved: a venv's python is a symlink to the base interpreter, outside the venv)."""
    return python or os.environ.get("VERL_PYTHON") or str(Path(".venv-verl/bin/python").absolute())


def verl_command(overrides: list[str], python: str | None = None) -> list[str]:
    return [verl_python(python), "-m", "verl.trainer.main_ppo", *overrides]


def export_verl_model(
    checkpoints: Path, out: Path, model: str | Path, python: str | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``<out>/adapter`` and ``<out>/merged`` from verl's last checkpoint, in the verl environment
    (``python -m codethinker.training.verl_merge``: verl's own merger, then the adapter merged into
    ``model``); returns what it wrote."""
    cmd = [verl_python(python), "-m", "codethinker.training.verl_merge"]
    cmd += ["--checkpoints", str(Path(checkpoints).resolve()), "--out", str(Path(out).resolve())]
    cmd += ["--base", model_ref(model)]
    res = subprocess.run(cmd, env=dict(env) if env is not None else None, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"exporting the verl checkpoint failed ({shlex.join(cmd)}):\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_grpo_verl(
    model: str | Path,
    data: str | Path,
    out: Path,
    p: GRPOParams,
    root: Path | None = None,
    val: str | Path | None = None,
) -> dict[str, Any]:
    """Write the config (and, for a baseline reward, its data) and launch verl (unless ``verl.dry_run``),
    then export the trained model to ``<out>/adapter`` and ``<out>/merged``; returns the stage's metrics."""
    out = Path(out)
    p = resolve_reward(p)
    if p.rollout.filter_groups:  # verl has it only in its DAPO recipe's trainer, not in main_ppo
        raise ValueError(
            "grpo.rollout.filter_groups (dynamic sampling) is a local-backend option; with grpo.backend: verl set it "
            "to false (the paper's setup has none)"
        )
    if p.rollout.n_greedy:  # verl's agent loop samples every member of a group at the rollout's temperature
        raise ValueError("grpo.rollout.n_greedy is a local-backend option; with grpo.backend: verl set it to 0")
    if p.rollout.max_completion_tokens == "auto":
        p = resolve_budget(p, model, load_grpo_rows(data, None, p)[0])
    cfg_dir = out / "verl"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    train = write_reward_data(data, cfg_dir, p)
    if val is not None:
        val = write_reward_data(val, cfg_dir, p)
    loop_path = cfg_dir / "agent_loop.yaml"
    loop_path.write_text(agent_loop_yaml(p))
    ov = verl_overrides(model, train, val, out, p, loop_path)
    cmd = verl_command(ov)
    (cfg_dir / "overrides.txt").write_text("\n".join(ov) + "\n")
    (cfg_dir / "command.sh").write_text(" ".join(shlex.quote(c) for c in cmd) + "\n")
    metrics: dict[str, Any] = {
        "backend": "verl",
        "reward": p.reward,
        "prompt_format": p.reward_spec().format,
        "n_regular": p.rollout.n_regular,
        "n_dbs": p.rollout.n_dbs,
        "data": str(train),
        "command": str(cfg_dir / "command.sh"),
        "launched": False,
    }
    if p.verl.dry_run:
        return metrics
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(root).resolve()), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t0 = time.time()
    subprocess.run(cmd, check=True, env=env)
    metrics.update(launched=True, train_wall_s=round(time.time() - t0, 1))
    exported = export_verl_model(out / "checkpoints", out, model, env=env)
    metrics.update(exported_step=exported["step"], wall_s=round(time.time() - t0, 1))
    return metrics

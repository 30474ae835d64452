"""GRPO with DBS and the CRM reward: the parameters shared by both backends and their resolution (the rows and
the completion budget: :mod:`codethinker.training.grpo_data`).

Backends (``grpo.backend`` in params.yaml):
- ``local``: TRL's GRPOTrainer on one machine (CPU here), :mod:`codethinker.training.grpo_local`;
- ``verl``: verl on a Ray cluster, :mod:`codethinker.training.grpo_verl` (config written from
  these parameters, then ``python -m verl.trainer.main_ppo``).

Data: the GRPO parquet in verl's schema (``prompt`` chat messages, ``reward_model.ground_truth``
= the truth JSON, ``extra_info.id``); both backends read the same file.

The reward (``grpo.reward``, :mod:`codethinker.rewards.switch`): ``crm`` (CodeThinker, the row's
ConTra prompt), ``orm`` (CodeReasoner, the vanilla prompt) or ``whitebox`` (ExecVerify, the white-box
prompt). The prompt of a baseline is rendered from the row's truth when the rows are loaded
(:func:`~codethinker.training.grpo_rows.with_reward_prompts`), so ``contra_sft``'s data serves every reward.
DBS branches on ConTra blocks, which the baselines' formats lack: for them :func:`resolve_reward` draws the ``n_dbs``
samples as regular ones (the same group size; a logged notice) and ends responses at ``[/ANSWER]``.

The task (:attr:`GRPOParams.task`, :mod:`codethinker.tasks`): ``output_prediction`` (the above; stage grpo),
``codegen`` (stage grpo_codegen: codegen_data's training problems, the code-generation rewards, DBS on blocks of
code) or a user's own (``package.module:attribute``). The task gives the rows, the prompts, the completion
budget, the reward (:meth:`GRPOParams.reward_spec`) and its scores; nothing here asks which task it is.
:func:`check_task_reward` refuses a reward the task does not offer.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from codethinker.config.loader import from_mapping
from codethinker.engines.hf import CACHES as HF_CACHES
from codethinker.training.common import FINETUNE, PRECISIONS, LoRAParams
from codethinker.training.rollout import RolloutParams

__all__ = [
    "GRPOParams",
    "VerlParams",
    "check_task_reward",
    "grpo_params",
    "resolve_model_len",
    "resolve_reward",
]

log = logging.getLogger(__name__)


@dataclass
class VerlParams:
    nnodes: int = field(default=1, metadata={"help": "Ray nodes (trainer.nnodes)"})
    gpus_per_node: int = field(default=8, metadata={"help": "GPUs per node (trainer.n_gpus_per_node)"})
    tensor_parallel: int = field(default=1, metadata={"help": "vLLM tensor parallel size in the rollout"})
    gpu_memory_utilization: float = field(default=0.6, metadata={"help": "vLLM's share of GPU memory"})
    ppo_mini_batch_size: int = field(default=16, metadata={"help": "prompts per PPO mini-batch"})
    micro_batch_size_per_gpu: int = field(default=2, metadata={"help": "sequences per GPU forward"})
    max_prompt_length: int = field(default=2048, metadata={"help": "data.max_prompt_length"})
    rollout_name: str = field(default="vllm", metadata={"help": "verl rollout engine"})
    strategy: str = field(default="fsdp", metadata={"help": "actor strategy (fsdp | fsdp2 | megatron)"})
    loggers: list[str] = field(default_factory=lambda: ["console", "mlflow"], metadata={"help": "trainer.logger"})
    project: str = field(default="codethinker", metadata={"help": "trainer.project_name"})
    experiment: str = field(default="grpo-dbs-crm", metadata={"help": "trainer.experiment_name"})
    overrides: list[str] = field(
        default_factory=list, metadata={"help": "extra hydra overrides passed through unchanged"}
    )
    dry_run: bool = field(default=False, metadata={"help": "write the config and command, do not launch"})


@dataclass
class GRPOParams:
    backend: str = field(default="local", metadata={"help": "local (TRL, one machine) | verl (Ray cluster)"})
    finetune: str = field(
        default="lora",
        metadata={"help": "lora (a pretrained policy) | full (every weight: the policy trained from scratch)"},
    )
    epochs: float = field(default=3.0, metadata={"help": "passes over the GRPO prompts (paper: 3)"})
    max_steps: int = field(default=-1, metadata={"help": "stop after N optimizer steps (-1: epochs)"})
    max_prompts: int | None = field(default=None, metadata={"help": "use the first N prompts (None: all)"})
    sources: list[str] | None = field(
        default=None, metadata={"help": "train on prompts of these sources only (synth, leetcode; None: all)"}
    )
    max_prompt_tokens: int = field(default=2048, metadata={"help": "drop prompts longer than this"})
    max_model_len: int | str = field(
        default="auto",
        metadata={
            "help": "vLLM context in tokens: auto = max_prompt_tokens + rollout.max_completion_tokens; a number "
            "must be at least that (a shorter context would cut completions before their budget)"
        },
    )
    prompts_per_step: int = field(default=32, metadata={"help": "prompts (groups) per optimizer step"})
    micro_batch: int = field(default=8, metadata={"help": "sequences per forward/backward"})
    learning_rate: float = field(default=1e-6, metadata={"help": "learning rate (constant)"})
    warmup_steps: int = field(
        default=0,
        metadata={"help": "optimizer steps over which the learning rate rises linearly from 0 (local backend)"},
    )
    adam_epsilon: float = field(
        default=1e-8,
        metadata={
            "help": "AdamW's epsilon (1e-8: torch's and verl's). About a weight's RMS gradient, it makes the update "
            "follow the gradient's size instead of its sign alone"
        },
    )
    scale_rewards: str = field(
        default="group",
        metadata={
            "help": "advantage = reward - the group's mean, divided by the group's std (group: GRPO's, the paper's) "
            "or by nothing (none: Dr. GRPO's, so a group of nearly equal rewards gets small advantages)"
        },
    )
    negative_weight: float = field(
        default=1.0,
        metadata={
            "help": "the factor on every negative advantage (a sample below its group's mean): 1 = GRPO's, 0 = "
            "positive samples only (PSR: Zhu et al. 2025, 'The Surprising Effectiveness of Negative "
            "Reinforcement in LLM Reasoning'); local backend"
        },
    )
    beta: float = field(default=0.0, metadata={"help": "KL loss coefficient (paper: no KL loss)"})
    entropy_coeff: float = field(default=0.0, metadata={"help": "entropy bonus (paper: 0; verl only)"})
    gradient_checkpointing: bool = field(
        default=True, metadata={"help": "recompute activations in the backward pass (memory for time; TRL's default)"}
    )
    precision: str = field(
        default="auto",
        metadata={
            "help": "auto (bf16-mixed on a bf16 GPU, else fp32) | bf16-mixed (fp32 master weights, bf16 compute) | "
            "bf16 (bf16 weights) | fp32 (codethinker.training.common.Precision)"
        },
    )
    save_steps: int = field(default=1, metadata={"help": "checkpoint every N optimizer steps"})
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept"})
    seed: int = field(default=0, metadata={"help": "data order, sampling seeds, LoRA init"})
    rollout_engine: str = field(default="auto", metadata={"help": "vllm | hf | auto (vLLM when installed)"})
    hf_cache: str = field(
        default="dynamic",
        metadata={
            "help": "rollout_engine hf: generate's KV cache. dynamic (transformers' default) | static (allocated "
            "once per call) | compiled (static, and transformers compiles the decoding step; CUDA only)"
        },
    )
    hf_batch_size: int = field(
        default=16,
        metadata={
            "help": "rollout_engine hf: the most sequences one generate call runs (a DBS round's continuations, or "
            "the regular samples, are one call up to this; more are split into calls of this size)"
        },
    )
    vllm_gpu_memory_utilization: float | None = field(
        default=None,
        metadata={"help": "vLLM's share of GPU memory (None: 0.85); on CPU only when vllm_kv_cache_gib is null"},
    )
    vllm_kv_cache_gib: float | str | None = field(
        default="auto",
        metadata={
            "help": "vLLM's KV cache in GiB. CPU: auto = room for one generation batch (prompts_per_step x group "
            "sequences, x rollout.oversample with rollout.filter_groups) of max_model_len tokens (from the model's "
            "config.json, +20%, >= 0.25 GiB). GPU: auto = what one GPU has left beside the training policy, up to "
            "that need (codethinker.training.gpu_memory). A number = that many; null = vLLM's share of memory "
            "(vllm_gpu_memory_utilization)"
        },
    )
    vllm_sleep: bool = field(
        default=True,
        metadata={
            "help": "GPU: vLLM's sleep mode (level 1) while the policy trains: its weights move to CPU memory "
            "and its KV cache is freed after each rollout, so the update can use that memory. Ignored on CPU"
        },
    )
    trace_thoughts: bool = field(
        default=True,
        metadata={"help": "the policy writes thoughts (contra_sft.teacher != none): sizes max_completion_tokens auto"},
    )
    rollout: RolloutParams = field(default_factory=RolloutParams, metadata={"help": "group and sampling"})
    lora: LoRAParams = field(default_factory=lambda: LoRAParams(dropout=0.0), metadata={"help": "adapter settings"})
    task: str = field(
        default="output_prediction",
        metadata={
            "help": "the task (codethinker.tasks): output_prediction (ConTra traces, the GRPO parquet) | codegen "
            "(codegen_data's training problems; the grpo_codegen stage) | package.module:attribute (your own)"
        },
    )
    reward: str = field(
        default="crm",
        metadata={
            "help": "one of the task's rewards. output_prediction: crm (CodeThinker: ConTra prompt, CRM) | orm "
            "(CodeReasoner: vanilla prompt, outcome reward) | whitebox (ExecVerify: white-box questions), the "
            "baselines sample without DBS; codegen: codegen_outcome (R_fmt + R_out) | reflexicoder | cg_grpo | "
            "cg_grpo_ungated | recode_outcome (ReCode)"
        },
    )
    reflexicoder: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "ReflexiCoder's coefficients (reward reflexicoder; {}: Table 4)"}
    )
    judge: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "task codegen: the judge's limits (test_timeout_s, setup_timeout_s, memory_mb, workers)"},
    )
    reward_model: str = field(
        default="models/reward_model",
        metadata={
            "help": "reward cg_grpo / cg_grpo_ungated: the CRPL reward model (the reward_model stage's out; the grpo "
            "stage sets it from its --reward-model, params.yaml may not)"
        },
    )
    crm: dict[str, Any] = field(
        default_factory=lambda: {"prm": True, "prefix": True, "gate": True, "orm": True, "ccw": True, "alpha": 1.0},
        metadata={"help": "CRM switches: prm, prefix, gate, orm, ccw, alpha (reward crm)"},
    )
    whitebox: dict[str, Any] = field(
        default_factory=lambda: {"a": 0.5, "k": 6},
        metadata={"help": "white-box reward: a (weight of wb_acc), k (questions; reward whitebox)"},
    )
    verl: VerlParams = field(default_factory=VerlParams, metadata={"help": "verl backend settings"})

    def __post_init__(self) -> None:
        from codethinker.engines.kv_cache import parse_kv_setting

        parse_kv_setting(self.vllm_kv_cache_gib, "grpo.vllm_kv_cache_gib")
        if self.backend not in ("local", "verl"):
            raise ValueError(f"grpo.backend must be local or verl, got {self.backend!r}")
        if self.scale_rewards not in ("group", "none"):
            raise ValueError(f"grpo.scale_rewards must be group or none, got {self.scale_rewards!r}")
        if not self.negative_weight >= 0:
            raise ValueError(f"grpo.negative_weight must be >= 0, got {self.negative_weight}")
        if self.negative_weight != 1 and self.backend != "local":
            raise ValueError("grpo.negative_weight is the local backend's (verl's advantages are its own): set it to 1")
        if self.finetune not in FINETUNE:
            raise ValueError(f"grpo.finetune must be one of {', '.join(FINETUNE)}, got {self.finetune!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"grpo.precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.hf_cache not in HF_CACHES:
            raise ValueError(f"grpo.hf_cache must be one of {', '.join(HF_CACHES)}, got {self.hf_cache!r}")
        if self.hf_batch_size < 1:
            raise ValueError(f"grpo.hf_batch_size must be >= 1, got {self.hf_batch_size}")
        if self.max_model_len != "auto" and not (isinstance(self.max_model_len, int) and self.max_model_len > 0):
            raise ValueError(f"grpo.max_model_len must be auto or a number of tokens, got {self.max_model_len!r}")
        try:
            check_task_reward(self.task, self.reward)
        except ValueError as exc:
            raise ValueError(str(exc) if "reward" in str(exc) else f"grpo.task: {exc}") from None
        self.reward_spec()  # a misspelled reward, whitebox setting or CRM switch stops here

    def reward_spec(self) -> Any:
        """The run's reward: the task's :class:`~codethinker.tasks.base.RewardSpec` of ``reward`` with the
        settings the task reads (:attr:`~codethinker.tasks.base.Task.settings`: ``crm`` and ``whitebox`` for
        output prediction; ``reflexicoder``, ``judge`` and ``reward_model`` for code generation)."""
        task = self.task_obj
        unknown = [k for k in task.settings if not hasattr(self, k)]
        if unknown:
            raise ValueError(f"task {task.name} reads settings grpo has none of: {', '.join(unknown)}")
        return task.reward_spec(self.reward, {k: getattr(self, k) for k in task.settings})

    @property
    def task_obj(self) -> Any:
        """The :class:`~codethinker.tasks.base.Task` named by :attr:`task`."""
        from codethinker.tasks import get_task

        return get_task(self.task)

    @property
    def rollout_seqs(self) -> int:
        """The most sequences one rollout call asks the engine for at once (vLLM's ``max_num_seqs``): a
        generation batch of groups (``rollout.oversample`` x the step's prompts with ``filter_groups``)."""
        batch = self.prompts_per_step * (self.rollout.oversample if self.rollout.filter_groups else 1)
        return batch * self.rollout.group

    def kv_params(self) -> Any:
        """The params a vLLM KV-cache error names."""
        from codethinker.engines.kv_cache import KVParamNames

        return KVParamNames(
            "grpo.vllm_kv_cache_gib", ("grpo.prompts_per_step", "grpo.max_model_len"), "grpo.max_model_len"
        )


def check_task_reward(task: str, reward: str) -> None:
    """The reward must be one the task offers (:attr:`~codethinker.tasks.base.Task.rewards`); a ``ValueError``
    names the task's key and, where another task offers the reward, that task's.

    >>> check_task_reward("codegen", "crm")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: grpo_codegen.reward=crm is a reward of task output_prediction (grpo.reward's); choose one of ...
    """
    from codethinker.tasks import TASKS, get_task

    own = get_task(task)
    if reward in own.rewards:
        return
    key = f"{own.section}.reward"
    others = [get_task(n) for n in TASKS if n != own.name and reward in get_task(n).rewards]
    if others:
        o = others[0]
        choose = ", ".join(own.rewards)
        raise ValueError(f"{key}={reward} is a reward of task {o.name} ({o.section}.reward's); choose one of {choose}")
    raise ValueError(f"{key} must be one of {', '.join(own.rewards)}, got {reward!r}")


def grpo_params(section: dict[str, Any]) -> GRPOParams:
    """:class:`GRPOParams` from a plain mapping of its keys (the stage loads ``grpo`` with
    :class:`codethinker.config.training.GRPOConfig`); unknown keys and wrong types are errors."""
    return from_mapping(GRPOParams, section, "grpo")


def resolve_reward(p: GRPOParams) -> GRPOParams:
    """The rollout the reward can use. DBS branches at ConTra block ends; ``orm`` and ``whitebox``
    responses have none, so their ``n_dbs`` samples become regular ones (``n_regular + n_dbs`` regular,
    the same group size and budget; logged once) and responses end at the format's stop string
    (``[/ANSWER]``) unless ``rollout.final_stop`` was set to something else. ``crm``: unchanged."""
    spec = p.reward_spec()
    r = p.rollout
    changes: dict[str, Any] = {}
    if not spec.blocks and r.n_dbs:
        log.warning(
            "grpo.reward=%s: DBS needs ConTra blocks, which the %s format lacks; drawing its %d DBS samples as "
            "regular ones (%d regular + 0 DBS per prompt)",
            spec.kind,
            spec.format,
            r.n_dbs,
            r.n_regular + r.n_dbs,
        )
        changes.update(n_regular=r.n_regular + r.n_dbs, n_dbs=0)
    if list(r.final_stop) == list(RolloutParams().final_stop) and list(r.final_stop) != spec.stop:
        changes["final_stop"] = spec.stop
    if list(r.block_stop) == list(RolloutParams().block_stop) and list(spec.block_stop) != list(r.block_stop):
        changes["block_stop"] = list(spec.block_stop)  # the task's blocks (code generation: blocks of code)
    return dataclasses.replace(p, rollout=dataclasses.replace(r, **changes)) if changes else p


def resolve_model_len(p: GRPOParams) -> GRPOParams:
    """``max_model_len: auto`` -> ``max_prompt_tokens`` + the (resolved) completion budget; a number
    below that is an error, not a silent cut of every long completion.

    >>> p = GRPOParams(max_prompt_tokens=100, rollout=RolloutParams(max_completion_tokens=400))
    >>> resolve_model_len(p).max_model_len
    500
    """
    need = p.max_prompt_tokens + int(p.rollout.max_completion_tokens)
    if p.max_model_len == "auto":
        return dataclasses.replace(p, max_model_len=need)
    if int(p.max_model_len) < need:
        raise ValueError(
            f"grpo.max_model_len {p.max_model_len} < grpo.max_prompt_tokens {p.max_prompt_tokens} + "
            f"grpo.rollout.max_completion_tokens {p.rollout.max_completion_tokens}: completions would be cut "
            "before their budget; set grpo.max_model_len: auto"
        )
    return p

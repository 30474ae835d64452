"""GRPO on one machine: TRL's GRPOTrainer (LoRA or every weight, ``grpo.finetune``) + the project's Rollout.

The group of each prompt is ``n_regular`` regular + ``n_dbs`` DBS samples from the current
policy (vLLM where it runs, transformers' generate otherwise), scored by the run's reward, the task's
(``grpo.task``, :mod:`codethinker.tasks`; :class:`RewardFunc`; output prediction's baselines'
prompts and all-regular groups come from :func:`~codethinker.training.grpo.resolve_reward`) and
normalized together (``grpo.scale_rewards``: divided by the group's std, GRPO's, or not), negative
advantages times ``grpo.negative_weight`` (1: GRPO's; 0: positive samples only, :func:`trainer_class`). No KL
loss (``beta=0``), no KL in the reward, no entropy bonus (TRL has none; verl's ``entropy_coeff`` is
set to 0), alpha = 1 (CRMConfig). Token-level loss aggregation (TRL's ``dapo``), like verl's
``token-mean``. With ``rollout.filter_groups`` (DAPO's dynamic sampling, local backend only) the
rollout hands the update groups whose rewards differ, drawn from further prompts where TRL's have
none (:meth:`~codethinker.training.rollout.Rollout.sample_informative`).

Per step it logs reward mean/std/max for the regular and the DBS subgroup, r_proc, r_res, the
format-valid rate, RCS, response length, the tokens DBS generated and dropped, and the means of the task's
own per-answer numbers (code generation: the pass rate, ReflexiCoder's cycles).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codethinker.training.checkpoint import checkpoint_dir, fingerprint, resume_point, save_policy
from codethinker.training.common import resolve_precision
from codethinker.training.grpo import GRPOParams, resolve_model_len, resolve_reward
from codethinker.training.grpo_data import load_grpo_rows, resolve_budget
from codethinker.training.grpo_rows import with_reward_prompts
from codethinker.training.reward_func import RewardFunc
from codethinker.training.rollout import Rollout, prompt_key

__all__ = [
    "StepStats",
    "gpu_kv_cache_gib",
    "grpo_config",
    "grpo_metrics",
    "make_grpo_trainer",
    "rollout_engine",
    "run_grpo_local",
    "trainer_class",
    "weight_negative",
]

TIMING = ("step_s", "rollout_s", "rollout_regular_s", "rollout_dbs_s", "reward_s", "sync_s", "update_s")
PLOT_COLUMNS = [
    "reward_mean",
    "reward_regular_mean",
    "reward_dbs_mean",
    "reward_regular_max",
    "reward_dbs_max",
    "r_proc",
    "r_res",
    "fmt_rate",
    "rcs",
    "pass_rate",
    "cycles",
    "response_len",
    "dbs_tokens_generated",
    "dbs_tokens_dropped",
    "cache_hit_rate",
    "frac_reward_zero_std",
    "groups_drawn",
    "groups_informative",
    "loss",
    "step_s",
    "rollout_s",
    "rollout_regular_s",
    "rollout_dbs_s",
    "reward_s",
    "sync_s",
    "update_s",
]


def gpu_kv_cache_gib(p: GRPOParams, model: str | Path, total_bytes: int | None = None) -> float | str | None:
    """``grpo.vllm_kv_cache_gib`` for the engine: on a CUDA GPU with ``auto``, the KV cache that
    :func:`~codethinker.training.gpu_memory.plan_local_gpu` leaves vLLM beside the training policy
    (its breakdown printed; :class:`~codethinker.training.gpu_memory.GPUMemoryError` when they cannot
    share the GPU); otherwise the param as it is (the CPU build sizes its own, ``engines.kv_cache``).
    ``total_bytes``: the GPU's memory (default: what CUDA reports for device 0)."""
    from codethinker.training.gpu_memory import GIB, GPUMemoryError, ModelShape, plan_local_gpu

    if p.vllm_kv_cache_gib != "auto":
        return p.vllm_kv_cache_gib
    if total_bytes is None:
        import torch

        if not torch.cuda.is_available():
            return p.vllm_kv_cache_gib
        total_bytes = int(torch.cuda.get_device_properties(0).total_memory)
    from transformers import AutoConfig

    plan = plan_local_gpu(
        ModelShape.from_config(AutoConfig.from_pretrained(str(model)).to_dict()),
        total_bytes=total_bytes,
        max_model_len=int(p.max_model_len),
        max_completion_tokens=int(p.rollout.max_completion_tokens),
        rollout_seqs=p.rollout_seqs,
        micro_batch=p.micro_batch,
        lora_r=p.lora.r if p.finetune == "lora" else None,
        targets=p.lora.target_modules,
        checkpointing=p.gradient_checkpointing,
        sleep=p.vllm_sleep,
    )
    for line in plan.lines():
        print(f"grpo GPU memory: {line}", file=sys.stderr, flush=True)
    if not plan.fits:
        raise GPUMemoryError(
            "grpo (local backend): the policy and vLLM do not fit one GPU: "
            + "; ".join(plan.lines())
            + ". Lower grpo.micro_batch or grpo.max_prompt_tokens, set grpo.vllm_sleep: true, or use grpo.backend: verl"
        )
    return plan.kv_bytes / GIB


def grpo_config(ck: Path, p: GRPOParams) -> Any:
    """TRL's ``GRPOConfig`` of the run: one group of ``rollout.group`` samples per prompt, normalized
    together, no KL, token-level loss, checkpoints in ``ck``."""
    from trl import GRPOConfig

    r = p.rollout
    seqs = p.prompts_per_step * r.group
    if seqs % p.micro_batch:
        raise ValueError(f"prompts_per_step * group ({seqs}) must be a multiple of micro_batch ({p.micro_batch})")
    return GRPOConfig(
        output_dir=str(ck),
        num_generations=r.group,
        per_device_train_batch_size=p.micro_batch,
        gradient_accumulation_steps=seqs // p.micro_batch,
        num_train_epochs=p.epochs,
        max_steps=p.max_steps,
        learning_rate=p.learning_rate,
        adam_epsilon=p.adam_epsilon,
        lr_scheduler_type="constant_with_warmup" if p.warmup_steps else "constant",
        warmup_steps=p.warmup_steps,
        beta=p.beta,
        loss_type="dapo",
        scale_rewards=p.scale_rewards,
        temperature=r.temperature,
        max_completion_length=r.max_completion_tokens,
        logging_steps=1,
        save_strategy="steps",
        save_steps=p.save_steps,
        save_total_limit=p.save_total_limit,
        report_to="none",
        seed=p.seed,
        data_seed=p.seed,
        use_vllm=False,
        num_iterations=1,
        gradient_checkpointing=p.gradient_checkpointing,
        dataloader_num_workers=0,
        **resolve_precision(p.precision).trainer_flags(),
    )


def rollout_engine(p: GRPOParams, model: str | Path) -> tuple[str, Any]:
    """``(kind, engine)`` of the rollouts (``grpo.rollout_engine``; ``auto``: vLLM where it is
    installed): vLLM with LoRA enabled for the policy's pushes (``finetune: full``: whole weights
    instead), its KV cache sized by :func:`gpu_kv_cache_gib`; for ``hf`` no engine, :class:`Rollout`
    samples from the live training model."""
    from codethinker import engines

    kind = engines.resolve_backend(p.rollout_engine)
    if kind == "hf":
        import torch

        if p.hf_cache == "compiled" and not torch.cuda.is_available():
            raise ValueError("grpo.hf_cache compiled needs a CUDA device (transformers compiles generate there only)")
        return kind, None
    if kind != "vllm":
        raise ValueError(f"grpo.rollout_engine must be vllm, hf or auto, got {p.rollout_engine!r}")
    lora = p.finetune == "lora"
    engine = engines.open_engine(
        model,
        "vllm",
        enable_lora=lora,
        max_lora_rank=p.lora.r if lora else None,
        weight_sync=not lora,
        seed=p.seed,
        max_model_len=p.max_model_len,
        gpu_memory_utilization=p.vllm_gpu_memory_utilization,
        kv_cache_gib=gpu_kv_cache_gib(p, model),
        sleep_mode=p.vllm_sleep,
        max_num_seqs=p.rollout_seqs,
        kv_params=p.kv_params(),
    )
    return kind, engine


def group_rewards(func: Any) -> Callable[[list[str], list[str]], list[float]] | None:
    """``(texts, truths) -> rewards`` of a :class:`RewardFunc` (its scores, not counted in its step
    statistics), for the rollout's dynamic sampling; None for another reward function."""
    if not hasattr(func, "score_texts"):
        return None
    return lambda texts, truths: [float(s.reward) for s in func.score_texts(texts, truths)]


def weight_negative(advantages: Any, weight: float) -> Any:
    """The advantages with each negative one multiplied by ``weight`` (``grpo.negative_weight``; 1: unchanged,
    0: the samples below their group's mean are not pushed down, only those above it pulled up).

    >>> import torch
    >>> weight_negative(torch.tensor([1.5, -0.5, 0.0, -1.0]), 0.0).tolist()
    [1.5, 0.0, 0.0, 0.0]
    >>> weight_negative(torch.tensor([1.5, -0.5]), 0.5).tolist()
    [1.5, -0.25]
    """
    return advantages.clamp(min=0) + weight * advantages.clamp(max=0)


def trainer_class(negative_weight: float) -> type:
    """TRL's ``GRPOTrainer``, or with ``negative_weight`` != 1 a subclass whose advantages (TRL's, after its
    group normalization) go through :func:`weight_negative` before the loss. TRL has no option for it; the
    subclass wraps the method that hands the loss its batch (TRL 1.16's ``_generate_and_score_completions``)."""
    from trl import GRPOTrainer

    if negative_weight == 1:
        return GRPOTrainer

    class WeightedGRPOTrainer(GRPOTrainer):
        def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
            batch = super()._generate_and_score_completions(inputs)
            batch["advantages"] = weight_negative(batch["advantages"], negative_weight)
            return batch

    return WeightedGRPOTrainer


def make_grpo_trainer(
    model: str | Path,
    rows: list[dict[str, Any]],
    ck: Path,
    p: GRPOParams,
    reward_funcs: list | None = None,
    callbacks: list | None = None,
    engine: tuple[str, Any] | None = None,
) -> tuple[Any, Rollout]:
    """GRPOTrainer with LoRA (or full fine-tuning: ``p.finetune``) and the rollout hook (``engine``: a
    prebuilt ``(kind, engine)``); the rows' prompts, the rollout and the default reward follow ``p.reward``."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in TRL 1.16
    p = resolve_model_len(resolve_reward(p))
    rows = with_reward_prompts(rows, p.reward_spec(), p.task_obj)
    args = grpo_config(ck, p)
    tok = AutoTokenizer.from_pretrained(str(model))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    kind, eng = engine or rollout_engine(p, model)
    truths = {prompt_key(row["prompt"]): row["truth"] for row in rows}
    scorer_for = p.task_obj.prefix_scorer(p.reward_spec())  # None: the ConTra PRM
    root = ck / "rollout_adapters"
    funcs = reward_funcs or [RewardFunc.from_params(p)]
    rollout = Rollout(
        kind,
        eng,
        tok,
        truths,
        p.rollout,
        adapter_root=root,
        seed=p.seed,
        scorer_for=scorer_for,
        push=p.finetune,
        pool=[row["prompt"] for row in rows],
        group_reward=group_rewards(funcs[0]),
        hf_options={"batch_size": p.hf_batch_size, "cache": p.hf_cache},
    )
    policy = AutoModelForCausalLM.from_pretrained(str(model), dtype=resolve_precision(p.precision).torch_dtype())
    ds = Dataset.from_list([{"prompt": row["prompt"], "truth": row["truth"], "id": row["id"]} for row in rows])
    trainer = trainer_class(p.negative_weight)(
        model=policy,
        reward_funcs=funcs,
        args=args,
        train_dataset=ds,
        processing_class=tok,
        peft_config=p.lora.peft() if p.finetune == "lora" else None,
        rollout_func=rollout,
        callbacks=callbacks or [],
    )
    return trainer, rollout


def cache_rate(hist: list[dict[str, float]]) -> dict[str, float | None]:
    """The prefix-cache hit rate vLLM reports for the run's DBS continuations (None: nothing queried).

    >>> cache_rate([{"cache_queried": 100, "cache_hits": 60}, {"cache_queried": 300, "cache_hits": 20}])
    {'cache_queried': 400, 'cache_hits': 80, 'cache_hit_rate': 0.2}
    """
    queried = int(sum(h.get("cache_queried", 0) for h in hist))
    hits = int(sum(h.get("cache_hits", 0) for h in hist))
    rate = hits / queried if queried else None
    return {"cache_queried": queried, "cache_hits": hits, "cache_hit_rate": rate}


class StepStats:
    """``MetricsCallback``'s ``extra``: per step, the rewards, the DBS tokens, and the step's wall split
    into rollout (regular, DBS), reward, weight sync and the rest (TRL's forward/backward and optimizer
    step: ``update_s``)."""

    def __init__(self, reward: RewardFunc):
        self.reward = reward
        self.rollout: Rollout | None = None  # set once the trainer (and its rollout) exists
        self.t_last = time.perf_counter()

    def __call__(self) -> dict[str, float]:
        assert self.rollout is not None
        stats = self.reward.take()
        stats.update({k.split("/")[-1]: v for k, v in self.rollout.stats.take().items()})
        now = time.perf_counter()
        stats["step_s"] = now - self.t_last
        self.t_last = now
        parts = ("rollout_s", "reward_s", "sync_s")  # regular and DBS overlap inside rollout_s
        stats["update_s"] = max(0.0, stats["step_s"] - sum(stats.get(k, 0.0) for k in parts))
        return stats


def grpo_metrics(
    p: GRPOParams, rows: list, dropped: int, trainer: Any, result: Any, rollout: Rollout, hist: list
) -> dict:
    """The local backend's stage metrics (everything but ``resumed_from`` and ``wall_s``)."""
    rewards = [h.get("reward_mean", 0.0) for h in hist]
    return {
        "backend": "local",
        "task": p.task,
        "reward": p.reward,
        "prompt_format": p.reward_spec().format,
        "n_regular": p.rollout.n_regular,
        "n_dbs": p.rollout.n_dbs,
        "rollout_engine": rollout.kind,
        "prompts": len(rows),
        "max_completion_tokens": p.rollout.max_completion_tokens,
        "dropped_long_prompts": dropped,
        "steps": int(trainer.state.global_step),
        "train_loss": float(result.training_loss),
        "reward_first": rewards[0] if rewards else None,
        "reward_last": rewards[-1] if rewards else None,
        "dbs_tokens_generated": sum(h.get("dbs_tokens_generated", 0) for h in hist),
        "dbs_tokens_dropped": sum(h.get("dbs_tokens_dropped", 0) for h in hist),
        **cache_rate(hist),
        "policy_pushes": len(rollout.pushed),
        "filter_groups": p.rollout.filter_groups,
        "groups_drawn": int(sum(h.get("groups_drawn", 0) for h in hist)),
        **{
            f"mean_{k}": sum(h.get(k, 0.0) for h in hist) / max(len(hist), 1) for k in (*TIMING, "frac_reward_zero_std")
        },
    }


def run_grpo_local(
    model: str | Path, data: str | Path, out: Path, p: GRPOParams, run: Any = None, plot_csv: Path | None = None
) -> dict[str, Any]:
    """Train; save ``out/merged`` (and ``out/adapter`` with LoRA); return the stage's metrics."""
    t0 = time.time()
    out = Path(out)
    p = resolve_reward(p)
    rows, dropped = load_grpo_rows(data, model, p)
    if not rows:
        raise ValueError(f"{data}: no GRPO prompts left (sources={p.sources}, max_prompts={p.max_prompts})")
    p = resolve_model_len(resolve_budget(p, model, rows))
    ck = checkpoint_dir(out, fingerprint(p, data, rows, model))  # the rows it trains on
    reward = RewardFunc.from_params(p)
    stats = StepStats(reward)
    from codethinker.training.callbacks import MetricsCallback, quiet_progress

    # one PPO epoch per batch (num_iterations=1): the ratio is 1, TRL's clip_ratio/* are 0 by construction
    cb = MetricsCallback(run, plot_csv, extra=stats, columns=PLOT_COLUMNS, drop=("clip_ratio/",))
    trainer, rollout = make_grpo_trainer(model, rows, ck, p, reward_funcs=[reward], callbacks=[cb])
    stats.rollout = rollout
    resume = resume_point(ck)  # a finished run (rerun for a code change) starts over
    stats.t_last = time.perf_counter()
    try:
        result = quiet_progress(trainer).train(resume_from_checkpoint=resume)
        policy = trainer.accelerator.unwrap_model(trainer.model)
        dtype = resolve_precision(p.precision).save_dtype
        save_policy(policy, trainer.processing_class, out, lora=p.finetune == "lora", dtype=dtype)
    finally:
        if hasattr(rollout.engine, "close") and rollout.kind == "vllm":
            rollout.engine.close()
    metrics = grpo_metrics(p, rows, dropped, trainer, result, rollout, cb.history)
    return {**metrics, "resumed_from": resume, "wall_s": round(time.time() - t0, 1)}

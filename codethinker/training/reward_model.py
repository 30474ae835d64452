"""The CRPL reward model (ReCode, docs/recode.md): a Bradley-Terry reward model on the CRPL pairs.

:func:`run_reward_model` trains TRL's ``RewardTrainer`` (a sequence-classification head with one logit on
the model; loss ``-log sigmoid(s(chosen) - s(rejected))``) on the train pairs, each laid out by the
tokenizer's chat template as (user: the problem, assistant: the response). Pairs longer than
``max_length`` tokens are dropped (counted), not cut. It saves the model with its tokenizer and measures
the held-out pairwise accuracy (``s(chosen) > s(rejected)``) overall and per pair type with the scorer
the reward uses (:class:`~codethinker.rewards.recode.ProcessRewardModel`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codethinker.rewards.recode import ProcessRewardModel, load_classifier
from codethinker.training.checkpoint import save_tokenizer
from codethinker.training.common import PRECISIONS, resolve_precision

__all__ = ["RewardModelParams", "pair_accuracy", "run_reward_model"]

CURVE_COLUMNS = ["loss", "accuracy", "margin", "learning_rate", "grad_norm", "epoch"]


@dataclass(frozen=True)
class RewardModelParams:
    """The reward model's training."""

    epochs: float = field(default=2.0, metadata={"help": "passes over the train pairs (max_steps > 0 wins)"})
    max_steps: int = field(default=-1, metadata={"help": "optimizer steps (-1: run the epochs)"})
    batch_size: int = field(default=4, metadata={"help": "pairs per device batch"})
    grad_accum: int = field(default=8, metadata={"help": "gradient accumulation steps"})
    learning_rate: float = field(default=1.0e-5, metadata={"help": "peak learning rate (cosine decay)"})
    warmup_ratio: float = field(default=0.05, metadata={"help": "share of the steps spent warming up"})
    max_length: int = field(default=4096, metadata={"help": "tokens of (prompt + response); longer pairs dropped"})
    logging_steps: int = field(default=10, metadata={"help": "steps between two rows of the loss curve"})
    center_rewards: float | None = field(
        default=None, metadata={"help": "TRL's center_rewards_coefficient (None: no centering term)"}
    )
    precision: str = field(
        default="auto",
        metadata={
            "help": "auto (bf16-mixed on a bf16 GPU, else fp32) | bf16-mixed (fp32 master weights, bf16 compute) | "
            "bf16 (bf16 weights) | fp32 (codethinker.training.common.Precision)"
        },
    )

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.grad_accum < 1 or self.max_length < 16:
            raise ValueError("batch_size and grad_accum must be >= 1, max_length >= 16")
        if self.precision not in PRECISIONS:
            raise ValueError(f"reward_model.precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")


def _chat(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": [{"role": "user", "content": row["prompt"]}],
        "chosen": [{"role": "assistant", "content": row["chosen"]}],
        "rejected": [{"role": "assistant", "content": row["rejected"]}],
    }


def fitting(scorer: ProcessRewardModel, rows: Sequence[dict[str, Any]], max_length: int) -> list[dict[str, Any]]:
    """The pairs whose chosen and rejected both fit ``max_length`` tokens."""
    return [
        r
        for r in rows
        if max(len(scorer.ids(r["prompt"], r["chosen"])), len(scorer.ids(r["prompt"], r["rejected"]))) <= max_length
    ]


def pair_accuracy(scorer: ProcessRewardModel, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pairwise accuracy (chosen scored above rejected) and mean margin, overall and per ``pair_type``."""
    chosen = scorer.score([r["prompt"] for r in rows], [r["chosen"] for r in rows])
    rejected = scorer.score([r["prompt"] for r in rows], [r["rejected"] for r in rows])
    groups: dict[str, list[float]] = defaultdict(list)
    for r, c, j in zip(rows, chosen, rejected, strict=True):
        groups["all"].append(c - j)
        groups[r["pair_type"]].append(c - j)
    return {
        k: {
            "pairs": len(m),
            "accuracy": round(sum(d > 0 for d in m) / len(m), 4),
            "mean_margin": round(sum(m) / len(m), 4),
        }
        for k, m in sorted(groups.items())
    }


def _trainer(model: str, tok: Any, rows: list[dict[str, Any]], out: Path, p: RewardModelParams, seed: int, cb: Any):
    from datasets import Dataset
    from transformers import set_seed
    from trl import RewardConfig, RewardTrainer

    set_seed(seed)  # the new ``score`` head is drawn from the global RNG: before the load, or it is the caller's
    net = load_classifier(model, dtype=resolve_precision(p.precision).torch_dtype())
    net.config.pad_token_id = tok.pad_token_id
    args = RewardConfig(
        output_dir=str(out / "checkpoints"),
        num_train_epochs=p.epochs,
        max_steps=p.max_steps,
        per_device_train_batch_size=p.batch_size,
        gradient_accumulation_steps=p.grad_accum,
        learning_rate=p.learning_rate,
        warmup_steps=p.warmup_ratio,
        lr_scheduler_type="cosine",
        logging_steps=p.logging_steps,
        save_strategy="no",
        report_to="none",
        seed=seed,
        data_seed=seed,
        max_length=p.max_length,
        center_rewards_coefficient=p.center_rewards,
        dataloader_num_workers=0,
        dataset_num_proc=None,
        **resolve_precision(p.precision).trainer_flags(),
    )
    data = Dataset.from_list([_chat(r) for r in rows])
    return RewardTrainer(model=net, args=args, train_dataset=data, processing_class=tok, callbacks=[cb])


def run_reward_model(
    model: str,
    train: Sequence[dict[str, Any]],
    heldout: Sequence[dict[str, Any]],
    out: Path,
    p: RewardModelParams,
    seed: int,
    curve: Path | None = None,
    run: Any = None,
) -> dict[str, Any]:
    """Train on ``train``, save to ``out``, return the metrics (held-out accuracy per pair type);
    ``curve``: the loss curve CSV (one row per logged step)."""
    import torch

    t0 = time.time()
    out = Path(out)
    probe = ProcessRewardModel(model, device="cpu")  # the tokenizer and the layout the scorer will use
    kept, eval_kept = fitting(probe, train, p.max_length), fitting(probe, heldout, p.max_length)
    if not kept:
        raise ValueError(f"reward_model: none of the {len(train)} train pairs fits max_length={p.max_length}")
    if curve is not None and curve.exists():
        curve.unlink()
    from codethinker.training.callbacks import MetricsCallback, quiet_progress

    cb = MetricsCallback(run, curve, columns=CURVE_COLUMNS)
    trainer = _trainer(model, probe.tok, kept, out, p, seed, cb)
    result = quiet_progress(trainer).train()
    trainer.model.config.pad_token_id = probe.tok.pad_token_id
    trainer.model.to(resolve_precision(p.precision).torch_dtype("save"))  # the checkpoint in the dtype asked for
    trainer.save_model(str(out))
    save_tokenizer(probe.tok, out)  # over the trainer's copy, which keeps the loader's local_files_only
    scorer = ProcessRewardModel(out)
    losses = [h["loss"] for h in cb.history if "loss" in h]
    return {
        "model": model,
        "pairs_train": len(train),
        "pairs_eval": len(heldout),
        "trained_pairs": len(kept),
        "dropped_too_long": {"train": len(train) - len(kept), "eval": len(heldout) - len(eval_kept)},
        "steps": int(trainer.state.global_step),
        "train_loss": round(float(result.training_loss), 4),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "eval": pair_accuracy(scorer, eval_kept) if eval_kept else {},
        "wall_s": round(time.time() - t0, 1),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
    }

"""SFT on ConTra traces with TRL's SFTTrainer: LoRA (paper §4.1: LoRA, 3 epochs) for a pretrained
policy, full fine-tuning for one trained from scratch (LoRA on random weights learns little).

Input: chat JSONL rows ``{"id", "messages": [{"role": "user", ...}, {"role": "assistant", ...}]}``.
Each row becomes a conversational prompt/completion pair, so the chat template renders both and
the loss covers the assistant's tokens only (TRL's ``completion_only_loss``). Rows longer than
``max_length`` tokens are dropped, not cut (a cut trace teaches an unfinished format).
Outputs: ``<out>/merged`` (the adapter merged into the base, or the fully fine-tuned model, with
the tokenizer: what vLLM and the next stage load), ``<out>/adapter`` (PEFT; LoRA only) and
checkpoints in ``<out>/checkpoints``. Batches group rows of similar length (less padding).

>>> run_sft("models/base", "data/contra_sft/sft.jsonl", Path("models/sft"), SFTParams())  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codethinker.training.common import (
    LoRAParams,
    MetricsCallback,
    checkpoint_dir,
    hash_files,
    last_checkpoint,
    model_dtype,
    precision,
)

__all__ = ["SFTParams", "load_sft_rows", "make_sft_trainer", "run_sft", "to_prompt_completion"]


FINETUNE = ("lora", "full")


@dataclass
class SFTParams:
    finetune: str = field(default="lora", metadata={"help": "lora (pretrained policy) | full (trained from scratch)"})
    epochs: float = field(default=3.0, metadata={"help": "passes over the data (paper: 3)"})
    max_steps: int = field(default=-1, metadata={"help": "stop after this many optimizer steps (-1: epochs)"})
    max_samples: int | None = field(default=None, metadata={"help": "use the first N rows that fit (None: all)"})
    max_length: int = field(default=1024, metadata={"help": "drop rows longer than this many tokens"})
    batch_size: int = field(default=2, metadata={"help": "rows per device per micro-batch"})
    grad_accum: int = field(default=1, metadata={"help": "micro-batches per optimizer step"})
    learning_rate: float = field(default=2e-4, metadata={"help": "peak learning rate (LoRA)"})
    warmup_ratio: float = field(default=0.03, metadata={"help": "linear warm-up share of the steps"})
    gradient_checkpointing: bool = field(
        default=True, metadata={"help": "recompute activations in the backward pass (memory for time; TRL's default)"}
    )
    save_steps: int = field(default=20, metadata={"help": "checkpoint every N optimizer steps"})
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept"})
    logging_steps: int = field(default=1, metadata={"help": "log every N steps"})
    seed: int = field(default=0, metadata={"help": "data order and LoRA init"})
    lora: LoRAParams = field(default_factory=LoRAParams, metadata={"help": "adapter settings"})

    def __post_init__(self) -> None:
        if self.finetune not in FINETUNE:
            raise ValueError(f"sft.finetune must be one of {', '.join(FINETUNE)}, got {self.finetune!r}")


def load_sft_rows(path: str | Path, max_samples: int | None = None) -> list[dict[str, Any]]:
    rows = []
    with open(path) as fh:
        for i, line in enumerate(fh):
            if not line.strip():
                continue
            row = json.loads(line)
            msgs = row.get("messages")
            if not msgs or msgs[-1].get("role") != "assistant":
                raise ValueError(f"{path}:{i + 1}: 'messages' must end with the assistant's answer")
            rows.append(row)
            if max_samples and len(rows) >= max_samples:
                break
    return rows


def to_prompt_completion(row: dict[str, Any]) -> dict[str, Any]:
    msgs = row["messages"]
    return {"prompt": msgs[:-1], "completion": [msgs[-1]]}


def make_sft_trainer(
    model: str | Path, tok: Any, ds: Any, args: Any, p: SFTParams, callbacks: list | None = None
) -> Any:
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    policy = AutoModelForCausalLM.from_pretrained(str(model), dtype=model_dtype())
    return SFTTrainer(
        model=policy,
        args=args,
        train_dataset=ds,
        processing_class=tok,
        peft_config=p.lora.peft() if p.finetune == "lora" else None,
        callbacks=callbacks or [],
    )


def run_sft(model: str | Path, data: str | Path, out: Path, p: SFTParams, run: Any = None) -> dict[str, Any]:
    """Train, save adapter + merged model, return the stage's metrics."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig

    t0 = time.time()
    out = Path(out)
    tok = AutoTokenizer.from_pretrained(str(model))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    rows = load_sft_rows(data)
    kept, too_long = [], 0
    for r in rows:  # drop over-long rows first, then take the first max_samples of the rest
        if p.max_samples and len(kept) >= p.max_samples:
            break
        text = tok.apply_chat_template(r["messages"], tokenize=False)
        if len(text) > p.max_length and len(tok(text, add_special_tokens=False).input_ids) > p.max_length:
            too_long += 1
            continue
        kept.append(to_prompt_completion(r))
    if not kept:
        raise ValueError(f"no SFT rows left of {len(rows)} (max_length={p.max_length})")
    ds = Dataset.from_list(kept)
    rows_hash = hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]  # the rows it trains on
    fingerprint = {
        "params": asdict(p),
        "data": hash_files(data),
        "rows": rows_hash,
        "model": str(model),
        "model_files": hash_files(model),
    }
    ck = checkpoint_dir(out, fingerprint)
    args = SFTConfig(
        output_dir=str(ck),
        num_train_epochs=p.epochs,
        max_steps=p.max_steps,
        per_device_train_batch_size=p.batch_size,
        gradient_accumulation_steps=p.grad_accum,
        learning_rate=p.learning_rate,
        warmup_steps=p.warmup_ratio,
        lr_scheduler_type="cosine",
        logging_steps=p.logging_steps,
        save_strategy="steps",
        save_steps=p.save_steps,
        save_total_limit=p.save_total_limit,
        report_to="none",
        seed=p.seed,
        data_seed=p.seed,
        max_length=p.max_length,
        completion_only_loss=True,
        gradient_checkpointing=p.gradient_checkpointing,
        train_sampling_strategy="group_by_length",
        dataloader_num_workers=0,
        **precision(),
    )
    cb = MetricsCallback(
        run,
        out / "train_log.csv",
        columns=["loss", "grad_norm", "learning_rate", "mean_token_accuracy", "num_tokens", "epoch"],
    )
    trainer = make_sft_trainer(model, tok, ds, args, p, callbacks=[cb])
    resume = last_checkpoint(ck)
    result = trainer.train(resume_from_checkpoint=resume)
    merged = trainer.model
    if p.finetune == "lora":
        trainer.model.save_pretrained(str(out / "adapter"))
        tok.save_pretrained(str(out / "adapter"))
        merged = trainer.model.merge_and_unload()
    merged.save_pretrained(str(out / "merged"), safe_serialization=True)
    tok.save_pretrained(str(out / "merged"))
    losses = [h["loss"] for h in cb.history if "loss" in h]
    tokens = max((h.get("num_tokens", 0.0) for h in cb.history), default=0.0)  # TRL: tokens trained on, padding out
    runtime = float(result.metrics.get("train_runtime") or 0.0)
    metrics = {
        "rows_in_file": len(rows),
        "rows_read": len(kept) + too_long,  # until max_samples rows fitted
        "trained_rows": len(kept),
        "dropped_too_long": too_long,
        "steps": int(trainer.state.global_step),
        "epochs": p.epochs,
        "train_loss": float(result.training_loss),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "resumed_from": resume,
        "tokens": int(tokens),
        "tokens_per_s": round(tokens / runtime, 1) if runtime and not resume else None,
        "wall_s": round(time.time() - t0, 1),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
    }
    return metrics

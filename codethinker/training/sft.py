"""SFT on ConTra traces with TRL's SFTTrainer: LoRA (paper §4.1: LoRA, 3 epochs) for a pretrained
policy, full fine-tuning for one trained from scratch (LoRA on random weights learns little).

Input: chat JSONL rows ``{"id", "messages": [{"role": "user", ...}, {"role": "assistant", ...}]}``.
Each row becomes a conversational prompt/completion pair, so the chat template renders both and
the loss covers the assistant's tokens only (TRL's ``completion_only_loss``). Rows longer than
``max_length`` tokens are dropped, not cut (a cut trace teaches an unfinished format).
Outputs: ``<out>/merged`` (the adapter merged into the base, or the fully fine-tuned model, with
the tokenizer: what vLLM and the next stage load), ``<out>/adapter`` (PEFT; LoRA only) and
checkpoints in ``<out>/checkpoints``. Batches group rows of similar length (less padding).

``copy_warmup`` (a share of the steps, for a policy trained from scratch) is a curriculum: the run
first trains on *copy rows*, whose answer is the prompt itself (the numbered code listing and the
call), then on the traces. Three quarters of a trace's tokens are copied from the prompt (code lines,
the input); a tiny model that must first discover copying while it learns the format wastes most of
its budget (docs/training.md has the sizing runs). ``short_first`` then trains the shorter half of the
trace rows before every row. The curriculum is an order of rows (``codethinker.training.sft_order``), fed to
the trainer unshuffled.

>>> run_sft("models/base", "data/contra_sft/sft.jsonl", Path("models/sft"), SFTParams())  # doctest: +SKIP
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codethinker.training.checkpoint import fingerprint, prepare_checkpoints, save_policy
from codethinker.training.common import FINETUNE, PRECISIONS, LoRAParams, resolve_precision
from codethinker.training.sft_order import copy_row, curriculum, training_order

__all__ = [
    "SFTParams",
    "copy_row",
    "curriculum",
    "fitting_rows",
    "load_sft_rows",
    "load_tokenizer",
    "make_sft_trainer",
    "run_sft",
    "sft_config",
    "to_prompt_completion",
    "train_sft",
    "training_order",
]


LOSSES = ("fused", "logits")
FIT_CHUNK = 4096  # rows whose lengths are checked in one tokenizer batch


@dataclass
class SFTParams:
    finetune: str = field(default="lora", metadata={"help": "lora (pretrained policy) | full (trained from scratch)"})
    epochs: float = field(default=3.0, metadata={"help": "passes over the data (paper: 3)"})
    max_steps: int = field(default=-1, metadata={"help": "stop after this many optimizer steps (-1: epochs)"})
    max_samples: int | None = field(default=None, metadata={"help": "use the first N rows that fit (None: all)"})
    max_length: int = field(default=8192, metadata={"help": "drop rows longer than this many tokens"})
    batch_size: int = field(default=4, metadata={"help": "rows per device per micro-batch"})
    grad_accum: int = field(default=8, metadata={"help": "micro-batches per optimizer step"})
    learning_rate: float = field(default=1e-4, metadata={"help": "peak learning rate (LoRA)"})
    warmup_ratio: float = field(default=0.03, metadata={"help": "linear warm-up share of the steps"})
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
    save_steps: int = field(default=200, metadata={"help": "checkpoint every N optimizer steps"})
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept"})
    logging_steps: int = field(default=1, metadata={"help": "log every N steps"})
    copy_warmup: float = field(
        default=0.0, metadata={"help": "share of the steps first spent on copy rows (answer = prompt); 0: none"}
    )
    short_first: float = field(
        default=0.0,
        metadata={
            "help": "share of the trace steps first spent on the shorter half of the rows (rendered length at most "
            "the median), before every row: short programs before long ones and LeetCode's; 0: none"
        },
    )
    loss: str = field(
        default="fused",
        metadata={
            "help": "fused: TRL's chunked LM head (no full logits tensor: a hub model's 152k vocabulary) | logits: "
            "the model's logits and one cross-entropy (faster for a small vocabulary: codethinker.training.sft_logits)"
        },
    )
    processes: int = field(
        default=1,
        metadata={
            "help": "training processes (DDP under `accelerate launch`: one per GPU, gloo on CPU); a step takes "
            "batch_size x grad_accum x processes rows (codethinker.training.sft_launch)"
        },
    )
    padding_free: bool = field(
        default=False,
        metadata={
            "help": "each micro-batch as one packed row with position_ids, no padding (TRL's padding_free); saves "
            "the padded tokens' compute with a varlen kernel (flash-attention); sdpa masks the packed row instead"
        },
    )
    compile: bool = field(
        default=False, metadata={"help": "torch.compile the model (TrainingArguments' torch_compile)"}
    )
    seed: int = field(default=0, metadata={"help": "data order and LoRA init"})
    lora: LoRAParams = field(default_factory=LoRAParams, metadata={"help": "adapter settings"})

    def __post_init__(self) -> None:
        if self.finetune not in FINETUNE:
            raise ValueError(f"sft.finetune must be one of {', '.join(FINETUNE)}, got {self.finetune!r}")
        if not 0.0 <= self.copy_warmup < 1.0:
            raise ValueError(f"sft.copy_warmup must be in [0, 1), got {self.copy_warmup!r}")
        if not 0.0 <= self.short_first < 1.0:
            raise ValueError(f"sft.short_first must be in [0, 1), got {self.short_first!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"sft.loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"sft.precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.processes < 1:
            raise ValueError(f"sft.processes must be at least 1, got {self.processes!r}")

    @property
    def step_rows(self) -> int:
        """Rows of one micro-batch over every process (``batch_size x processes``)."""
        return self.batch_size * self.processes


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

    if p.loss == "logits":
        from codethinker.training.sft_logits import LogitsLossSFTTrainer as Trainer
    else:
        from trl import SFTTrainer as Trainer
    if p.processes > 1:
        from codethinker.training.sft_launch import global_batch_order

        Trainer = global_batch_order(Trainer)

    policy = AutoModelForCausalLM.from_pretrained(str(model), dtype=resolve_precision(p.precision).torch_dtype())
    return Trainer(
        model=policy,
        args=args,
        train_dataset=ds,
        processing_class=tok,
        peft_config=p.lora.peft() if p.finetune == "lora" else None,
        callbacks=callbacks or [],
    )


def _row_chars(tok: Any, max_length: int) -> Any:
    """``n_chars(conversations)``: per conversation, the rendered text's length, or None when it is longer than
    ``max_length`` tokens. A text of at most ``max_length`` characters fits untokenized; the others are
    tokenized in one batch (the Rust tokenizer's batch call: ~2x faster than one call per row)."""

    def n_chars(conversations: list[list[dict[str, Any]]]) -> list[int | None]:
        texts = [tok.apply_chat_template(m, tokenize=False) for m in conversations]
        check = [i for i, t in enumerate(texts) if len(t) > max_length]
        ids = tok([texts[i] for i in check], add_special_tokens=False).input_ids if check else []
        too_long = {i for i, x in zip(check, ids, strict=True) if len(x) > max_length}
        return [None if i in too_long else len(t) for i, t in enumerate(texts)]

    return n_chars


def fitting_rows(rows: list[dict[str, Any]], n_chars: Any, p: SFTParams) -> tuple[list[dict], list[int], int]:
    """``(prompt/completion rows, their lengths, rows dropped as too long)``: over-long rows are dropped
    first, then the first ``max_samples`` of the rest are taken (``n_chars``: :func:`_row_chars`'s, on
    chunks of rows)."""
    kept, lengths, too_long = [], [], 0
    for start in range(0, len(rows), FIT_CHUNK):
        chunk = rows[start : start + FIT_CHUNK]
        for r, n in zip(chunk, n_chars([r["messages"] for r in chunk]), strict=True):
            if p.max_samples and len(kept) >= p.max_samples:
                break
            if n is None:
                too_long += 1
                continue
            kept.append(to_prompt_completion(r))
            lengths.append(n)
        if p.max_samples and len(kept) >= p.max_samples:
            break
    if not kept:
        raise ValueError(f"no SFT rows left of {len(rows)} (max_length={p.max_length})")
    return kept, lengths, too_long


def sft_config(ck: Path, p: SFTParams, n_rows: int, ordered: bool) -> Any:
    """TRL's ``SFTConfig`` of the run (``ordered``: a curriculum, every row of the run listed in order)."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(ck),
        num_train_epochs=1 if ordered else p.epochs,
        max_steps=n_rows // (p.step_rows * p.grad_accum) if ordered else p.max_steps,
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
        max_length=None if p.padding_free else p.max_length,  # padding-free: the rows already fit (fitting_rows)
        padding_free=p.padding_free,
        torch_compile=p.compile,
        completion_only_loss=True,
        gradient_checkpointing=p.gradient_checkpointing,
        train_sampling_strategy="sequential" if ordered else "group_by_length",
        dataloader_num_workers=0,
        **resolve_precision(p.precision).trainer_flags(),
    )


def load_tokenizer(model: str | Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


SFT_COLUMNS = ["loss", "grad_norm", "learning_rate", "mean_token_accuracy", "num_tokens", "epoch"]


def train_sft(
    model: str | Path, tok: Any, train_rows: list[dict[str, Any]], ck: Path, resume: str | None, out: Path,
    p: SFTParams, *, ordered: bool, run: Any = None, main: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Train in this process (one of ``p.processes``; ``main``: the one that writes ``train_log.csv`` and the
    policy) and return ``steps``, ``train_loss``, ``runtime`` (s) and the logged ``history``."""
    from datasets import Dataset

    from codethinker.training.callbacks import MetricsCallback, quiet_progress

    cb = MetricsCallback(run, out / "train_log.csv" if main else None, columns=SFT_COLUMNS)
    args = sft_config(ck, p, len(train_rows), ordered=ordered)
    trainer = make_sft_trainer(model, tok, Dataset.from_list(train_rows), args, p, callbacks=[cb])
    result = quiet_progress(trainer).train(resume_from_checkpoint=resume)
    if main:
        lora, dtype = p.finetune == "lora", resolve_precision(p.precision).save_dtype
        save_policy(trainer.model, tok, out, lora=lora, dtype=dtype)
    return {
        "steps": int(trainer.state.global_step),
        "train_loss": float(result.training_loss),
        "runtime": float(result.metrics.get("train_runtime") or 0.0),
        "history": cb.history,
    }


def run_sft(model: str | Path, data: str | Path, out: Path, p: SFTParams, run: Any = None) -> dict[str, Any]:
    """Train (``p.processes`` > 1: under ``accelerate launch``), save adapter + merged model, return the
    stage's metrics."""
    import torch

    t0 = time.time()
    out = Path(out)
    tok = load_tokenizer(model)
    rows = load_sft_rows(data)
    n_chars = _row_chars(tok, p.max_length)
    kept, lengths, too_long = fitting_rows(rows, n_chars, p)
    train_rows, copies, copy_steps = training_order(kept, lengths, n_chars, p)
    ck, resume = prepare_checkpoints(out, fingerprint(p, data, train_rows, model))  # the rows it trains on
    ordered = train_rows is not kept  # a curriculum: every row of the run in order
    if p.processes > 1:
        from codethinker.training.sft_launch import launch_sft

        trained = launch_sft(model, train_rows, ck, resume, out, p, ordered=ordered, run=run)
    else:
        trained = train_sft(model, tok, train_rows, ck, resume, out, p, ordered=ordered, run=run)
    losses = [h["loss"] for h in trained["history"] if "loss" in h]
    # TRL: tokens trained on, padding out
    tokens = max((h.get("num_tokens", 0.0) for h in trained["history"]), default=0.0)
    runtime = trained["runtime"]
    return {
        "rows_in_file": len(rows),
        "rows_read": len(kept) + too_long,  # until max_samples rows fitted
        "trained_rows": len(kept),
        "dropped_too_long": too_long,
        "copy_rows": len(copies),  # copy lessons that fit max_length (copy_warmup > 0)
        "copy_steps": copy_steps,
        "steps": trained["steps"],
        "epochs": p.epochs,
        "train_loss": trained["train_loss"],
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "resumed_from": resume,
        "tokens": int(tokens),
        "tokens_per_s": round(tokens / runtime, 1) if runtime and not resume else None,
        "wall_s": round(time.time() - t0, 1),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
    }

"""Pieces shared by the SFT and GRPO trainers: LoRA settings and devices (metric logging:
:mod:`codethinker.training.callbacks`; checkpoints and the saved model: :mod:`codethinker.training.checkpoint`).
Imports neither torch nor transformers at import time: the params classes that read it load in milliseconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FINETUNE",
    "PRECISIONS",
    "LoRAParams",
    "Precision",
    "resolve_precision",
]


FINETUNE = ("lora", "full")  # sft.finetune, grpo.finetune: a LoRA adapter | every weight


@dataclass
class LoRAParams:
    r: int = field(default=64, metadata={"help": "LoRA rank"})
    alpha: int = field(default=128, metadata={"help": "LoRA alpha (scale = alpha / r)"})
    dropout: float = field(default=0.05, metadata={"help": "dropout on the LoRA path"})
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        metadata={"help": "module names that get adapters (all linear layers of a Qwen2 block)"},
    )

    def peft(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=list(self.target_modules),
            task_type="CAUSAL_LM",
        )


PRECISIONS = ("auto", "bf16-mixed", "bf16", "fp32")


@dataclass(frozen=True)
class Precision:
    """How a trainer holds and computes its weights (``sft``/``grpo``/``reward_model.precision``).

    - ``bf16-mixed``: fp32 master weights and optimizer state, bf16 autocast for the compute (verl's FSDP
      mixed precision, TRL's ``bf16=True`` over an fp32 model): an update smaller than bf16's resolution
      of a weight (about 0.4% of it) still lands. The checkpoint is written in bf16, what vLLM serves.
    - ``bf16``: the weights themselves in bf16 (half the memory of the master copy; small updates round
      away). Checkpoint in bf16.
    - ``fp32``: everything in fp32 (the CPU's choice).
    - ``auto``: ``bf16-mixed`` on a CUDA GPU with bf16, else ``fp32``.

    >>> resolve_precision("auto", cuda=False).name, resolve_precision("auto", cuda=True, bf16_ok=True).name
    ('fp32', 'bf16-mixed')
    >>> p = resolve_precision("bf16-mixed", cuda=True, bf16_ok=True)
    >>> p.load_dtype, p.save_dtype, p.trainer_flags()["bf16"]
    ('float32', 'bfloat16', True)
    """

    name: str
    cuda: bool

    @property
    def load_dtype(self) -> str:
        """The dtype the model is loaded (and its master weights kept) in."""
        return "bfloat16" if self.name == "bf16" else "float32"

    @property
    def save_dtype(self) -> str:
        """The dtype of the written checkpoint (the one asked for: bf16 for both bf16 modes)."""
        return "float32" if self.name == "fp32" else "bfloat16"

    def trainer_flags(self) -> dict[str, Any]:
        """transformers' TrainingArguments flags: ``bf16`` turns on autocast (on CPU too, through accelerate)."""
        return {"bf16": self.name != "fp32", "fp16": False, "use_cpu": not self.cuda}

    def torch_dtype(self, which: str = "load") -> Any:
        import torch

        return getattr(torch, self.load_dtype if which == "load" else self.save_dtype)


def resolve_precision(name: str = "auto", *, cuda: bool | None = None, bf16_ok: bool | None = None) -> Precision:
    """:class:`Precision` ``name`` on this machine (``cuda``/``bf16_ok``: probed with torch when None); a
    ValueError for an unknown name or bf16 asked of a GPU without it."""
    if name not in PRECISIONS:
        raise ValueError(f"precision {name!r}: not one of {', '.join(PRECISIONS)}")
    if cuda is None or bf16_ok is None:
        import torch

        cuda = torch.cuda.is_available() if cuda is None else cuda
        bf16_ok = (cuda and torch.cuda.is_bf16_supported()) if bf16_ok is None else bf16_ok
    if name == "auto":
        name = "bf16-mixed" if cuda and bf16_ok else "fp32"
    if name != "fp32" and cuda and not bf16_ok:
        raise ValueError(f"precision {name!r}: this GPU has no bf16 (use fp32)")
    return Precision(name, bool(cuda))

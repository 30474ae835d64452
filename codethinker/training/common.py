"""Pieces shared by the SFT and GRPO trainers: LoRA settings and devices (metric logging:
:mod:`codethinker.training.callbacks`; checkpoints and the saved model: :mod:`codethinker.training.checkpoint`).
Imports neither torch nor transformers at import time: the params classes that read it load in milliseconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FINETUNE",
    "LoRAParams",
    "precision",
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


def precision() -> dict[str, Any]:
    """Trainer precision flags: bf16 on a GPU that has it, fp32 on CPU."""
    import torch

    if torch.cuda.is_available():
        return {"bf16": torch.cuda.is_bf16_supported(), "fp16": False, "use_cpu": False}
    return {"bf16": False, "fp16": False, "use_cpu": True}


def model_dtype() -> Any:
    import torch

    return torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32

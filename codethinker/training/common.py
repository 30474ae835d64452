"""Pieces shared by the SFT and GRPO trainers: LoRA settings, devices, metric logging (checkpoints and
the saved model: :mod:`codethinker.training.checkpoint`)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

__all__ = [
    "FINETUNE",
    "LoRAParams",
    "MetricsCallback",
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


class MetricsCallback(TrainerCallback):
    """Send each training log to MLflow (through a StageRun) and, one row per step, to a CSV file.

    ``extra()`` returns more metrics to merge into each log (GRPO's per-step reward statistics).
    When a run resumes, CSV rows past the resumed step are dropped, so a killed-and-restarted run
    leaves no duplicate rows.
    """

    def __init__(
        self,
        run: Any = None,
        csv_path: Path | None = None,
        extra: Callable[[], dict[str, float]] | None = None,
        columns: list[str] | None = None,
    ):
        self.run, self.csv_path, self.extra, self.columns = run, csv_path, extra, columns
        self.history: list[dict[str, float]] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.csv_path and self.csv_path.is_file():
            with open(self.csv_path) as fh:
                rows = [r for r in csv.DictReader(fh) if int(float(r["step"])) <= state.global_step]
            self._write(rows, mode="w")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
        logs = dict(logs or {})
        if self.extra and "train_loss" not in logs:
            logs.update(self.extra())
        clean = {
            k.replace("/", "."): float(v)
            for k, v in logs.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        if self.run is not None:
            self.run.log_metrics(clean, step=state.global_step)
        if "train_loss" in logs:  # the end-of-training summary is not a step
            return
        row = {"step": state.global_step, **clean}
        self.history.append(row)
        if self.csv_path:
            self._write([row], mode="a")

    def _write(self, rows: list[dict], mode: str) -> None:
        assert self.csv_path is not None
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        cols = self.columns or sorted({k for r in rows for k in r} - {"step"})
        new = mode == "w" or not self.csv_path.is_file() or self.csv_path.stat().st_size == 0
        with open(self.csv_path, mode, newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["step", *cols], extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerows(rows)

"""One GRPO run on the backend ``p.backend`` names, for any task (``p.task``; the grpo stage: output prediction,
grpo_codegen: code generation): ``local`` (TRL on this machine, :mod:`codethinker.training.grpo_local`)
or ``verl`` (writes verl's config and launches it, :mod:`codethinker.training.grpo_verl`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codethinker.training.grpo import GRPOParams

__all__ = ["run_grpo"]


def run_grpo(
    model: str, data: Path, out: Path, p: GRPOParams, *, run: Any, plot: Path, root: Path, stage: str = "grpo"
) -> dict[str, Any]:
    """Train ``model`` on ``data`` into ``out`` and return the run's metrics; a LoRA run's adapter is logged and
    registered on ``run`` as ``codethinker-<stage>`` (it is no DVC out: full fine-tuning writes none)."""
    if p.backend == "verl":
        from codethinker.training.grpo_verl import run_grpo_verl

        metrics = run_grpo_verl(model, data, out, p, root=root)
    elif p.backend == "local":
        from codethinker.training.grpo_local import run_grpo_local

        if not (out / "checkpoints").exists():
            plot.unlink(missing_ok=True)  # a fresh run starts a fresh curve; a resumed one continues it
        metrics = run_grpo_local(model, data, out, p, run=run, plot_csv=plot)
    else:  # GRPOParams refuses any other
        raise AssertionError(p.backend)
    if p.finetune == "lora":
        run.register_adapter(out / "adapter", f"codethinker-{stage}")
    return metrics

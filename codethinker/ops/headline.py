"""What a pipeline run's MLflow parent run carries, so that runs compare side by side: its name (the DVC
experiment, or the commit), the params in effect, and each stage's headline numbers under a prefix that
groups them (``data/``, ``train/``, ``rollout/``, ``reward/``, ``eval/``).

A stage's child run keeps every number of its metrics file; the parent gets the few in :data:`HEADLINE`
when the stage ends (:func:`codethinker.ops.runs.stage_run`). The trainers' per-step metrics are grouped
the same way (:func:`metric_group`).

>>> headline_metrics("grpo", {"reward_first": 0.2, "reward_last": 1.0, "mean_step_s": 9.5, "steps": 24})
{'reward/first_step': 0.2, 'reward/last_step': 1.0, 'rollout/step_s': 9.5}
>>> metric_group("completions/mean_length"), metric_group("rewards/crm/mean"), metric_group("loss")
('rollout/completions/mean_length', 'reward/rewards/crm/mean', 'train/loss')
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from codethinker.tracking import metric_group

__all__ = ["HEADLINE", "git_commit", "headline_metrics", "metric_group", "run_name"]


SETS = ("shape_disjoint", "in_distribution", "leetcode")
# stage -> (flattened key of its metrics file, name in the parent run)
HEADLINE: dict[str, tuple[tuple[str, str], ...]] = {
    "contra_sft": (
        ("sft", "data/sft_rows"),
        ("grpo_train", "data/grpo_prompts"),
        ("heldout.shape_disjoint.n", "data/heldout_shape_disjoint"),
        ("overlap.shape_disjoint.shape", "data/heldout_shape_disjoint_shape_overlap"),
    ),
    "sft": (
        ("last_loss", "train/sft_last_loss"),
        ("tokens", "train/sft_tokens"),
        ("tokens_per_s", "train/sft_tokens_per_s"),
    ),
    "grpo": (
        ("reward_first", "reward/first_step"),
        ("reward_last", "reward/last_step"),
        ("mean_step_s", "rollout/step_s"),
    ),
    "train_eval": tuple(
        pair
        for s in SETS
        for pair in (
            (f"after_sft.{s}.fmt_rate", f"eval/{s}/sft_fmt_rate"),
            (f"after_sft.{s}.reward", f"eval/{s}/sft_reward"),
            (f"after_grpo.{s}.reward", f"eval/{s}/grpo_reward"),
            (f"grpo_vs_sft.{s}.reward_diff", f"eval/{s}/grpo_minus_sft"),
            (f"grpo_vs_sft.{s}.reward_diff_ci_low", f"eval/{s}/grpo_minus_sft_ci_low"),
            (f"grpo_vs_sft.{s}.sampled_reward_diff", f"eval/{s}/grpo_minus_sft_sampled"),
            (f"grpo_vs_sft.{s}.sampled_reward_diff_ci_low", f"eval/{s}/grpo_minus_sft_sampled_ci_low"),
        )
    ),
    "codegen_eval": (("after_sft.pass1", "eval/codegen/sft_pass1"), ("after_grpo.pass1", "eval/codegen/grpo_pass1")),
    "reward_model": (("eval.all.accuracy", "eval/reward_model_accuracy"),),
}


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def headline_metrics(stage: str, metrics: dict[str, Any]) -> dict[str, float]:
    """The headline numbers of ``stage``'s metrics dict, named for the parent run (absent keys left out)."""
    flat = _flat(metrics)
    return {
        name: float(flat[key])
        for key, name in HEADLINE.get(stage.split("@", 1)[0], ())
        if isinstance(flat.get(key), int | float) and not isinstance(flat.get(key), bool)
    }


def run_name(commit: str | None) -> str:
    """The parent run's name: the DVC experiment (``dvc exp run -n NAME`` sets ``DVC_EXP_NAME`` for every
    stage), else ``dvc repro @ <commit>`` (:func:`git_commit`), else ``dvc repro``."""
    if os.environ.get("DVC_EXP_NAME"):
        return os.environ["DVC_EXP_NAME"]
    return f"dvc repro @ {commit[:7]}" if commit else "dvc repro"


def git_commit(root: str | os.PathLike[str] = ".") -> str | None:
    """The commit checked out at ``root``, or None (no git, no repository)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None

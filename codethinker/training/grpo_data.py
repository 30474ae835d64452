"""The GRPO data of a run, as both backends read it: the rows of the run's task (:meth:`Task.rows
<codethinker.tasks.base.Task.rows>`: ConTra output prediction from the GRPO parquet, codegen_data's problems, or
a user's task), each prompt in the reward's format, and the completion budget they imply (:meth:`Task.budget
<codethinker.tasks.base.Task.budget>`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from codethinker.training.grpo import GRPOParams
from codethinker.training.grpo_rows import drop_long_prompts, with_reward_prompts

__all__ = ["grpo_prompt_rows", "load_grpo_rows", "resolve_budget"]


def load_grpo_rows(
    path: str | Path,
    model: str | Path | None = None,
    p: GRPOParams | None = None,
    reward: Any = None,
    split: str = "train",
) -> tuple[list[dict[str, Any]], int]:
    """The task's rows of ``split`` in ``path`` (``{"id", "source", "prompt", "truth", ...}``; only ``p.sources``,
    the first ``p.max_prompts``), each prompt in the reward's format (``reward``: a reward spec, else ``p``'s);
    prompts over ``p.max_prompt_tokens`` of ``model`` dropped (their count returned too)."""
    p = p or GRPOParams()
    task = p.task_obj
    spec = reward if reward is not None else p.reward_spec()
    rows = grpo_prompt_rows(task.rows(path, split), p.sources, p.max_prompts)
    return drop_long_prompts(with_reward_prompts(rows, spec, task), model, p.max_prompt_tokens)


def grpo_prompt_rows(rows: list[dict[str, Any]], sources: list[str] | None, max_prompts: int | None) -> list[dict]:
    """The rows GRPO draws its prompts from: those of ``sources`` (None: all), the first ``max_prompts`` of them
    (None or 0: all), in file order.

    >>> [r["id"] for r in grpo_prompt_rows([{"id": i, "source": s} for i, s in enumerate("ablb")], ["b"], 1)]
    [1]
    """
    if sources:
        rows = [r for r in rows if r["source"] in sources]
    return rows[:max_prompts] if max_prompts else rows


def resolve_budget(p: GRPOParams, model: str | Path, rows: list[dict[str, Any]]) -> GRPOParams:
    """``rollout.max_completion_tokens: auto`` -> the task's budget for ``rows`` in ``model``'s tokens (both
    backends; output prediction: 1.25 x the longest ground-truth trace); a number is kept."""
    if p.rollout.max_completion_tokens != "auto":
        return p
    budget = p.task_obj.budget(model, rows, p.reward_spec(), p.trace_thoughts)
    return dataclasses.replace(p, rollout=dataclasses.replace(p.rollout, max_completion_tokens=budget))

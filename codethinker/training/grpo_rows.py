"""GRPO rows as the trainers take them: each prompt in the reward's format (the task renders it), prompts that
fit the budget. Nothing here knows a trainer or a task's data files (those: :mod:`codethinker.training.grpo_data`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["drop_long_prompts", "with_reward_prompts"]


def with_reward_prompts(rows: list[dict[str, Any]], spec: Any, task: Any) -> list[dict[str, Any]]:
    """``rows`` with each prompt in the format of the reward ``spec`` of ``task`` (:meth:`Task.prompt
    <codethinker.tasks.base.Task.prompt>`)."""
    return [{**r, "prompt": task.prompt(r, spec)} for r in rows]


def drop_long_prompts(
    rows: list[dict[str, Any]], model: str | Path | None, max_tokens: int
) -> tuple[list[dict[str, Any]], int]:
    """The rows whose chat prompt fits ``max_tokens`` of ``model``'s tokens, and how many were dropped
    (``model`` None: all kept)."""
    if model is None:
        return rows, 0
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    kept = [
        r
        for r in rows
        if len(
            tok.apply_chat_template(r["prompt"], tokenize=True, add_generation_prompt=True, return_dict=True)[
                "input_ids"
            ]
        )
        <= max_tokens
    ]
    return kept, len(rows) - len(kept)

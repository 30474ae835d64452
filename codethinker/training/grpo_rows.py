"""GRPO rows as plain data: parquet values made plain, each prompt in the reward's format, prompts that
fit the budget. Nothing here knows a trainer or a task's data files (those: :mod:`codethinker.training.grpo_data`).

>>> plain({"a": (1, 2), "b": [{"c": 3}]})
{'a': [1, 2], 'b': [{'c': 3}]}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["drop_long_prompts", "plain", "with_reward_prompts"]


def plain(x: Any) -> Any:
    """numpy arrays / pyarrow structs from parquet -> plain lists and dicts."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x


def with_reward_prompts(rows: list[dict[str, Any]], spec: Any) -> list[dict[str, Any]]:
    """``rows`` with the prompt of the reward ``spec`` (a :class:`~codethinker.rewards.switch.RewardSpec`):
    ``crm`` keeps each row's ConTra prompt; ``orm`` and ``whitebox`` render theirs from the row's truth."""
    if spec.kind == "crm" or getattr(spec, "task", "reasoning") == "codegen":  # codegen rows carry theirs
        return rows
    from codethinker.contra.tracer import Flow

    return [{**r, "prompt": spec.prompt(Flow.from_json(r["truth"]))} for r in rows]


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

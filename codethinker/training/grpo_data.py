"""The GRPO data of a run, as both backends and ``train_eval`` read it: the rows of the task (ConTra
output prediction from the GRPO parquet, or codegen_data's problems) and the completion budget they imply.

This module sits above the task modules it reads (:mod:`codethinker.training.grpo_codegen`,
:mod:`codethinker.training.train_eval`); they import only :mod:`codethinker.training.grpo` (the parameters)
and :mod:`codethinker.training.grpo_rows` (plain row functions), so the package has no import circle.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from codethinker.training.grpo import GRPOParams
from codethinker.training.grpo_rows import drop_long_prompts, plain, with_reward_prompts

__all__ = ["load_grpo_rows", "resolve_budget"]


def load_grpo_rows(
    path: str | Path, model: str | Path | None = None, p: GRPOParams | None = None, reward: Any = None
) -> tuple[list[dict[str, Any]], int]:
    """Rows ``{"id", "source", "heldout", "task_id", "prompt", "truth"}`` from the GRPO parquet (only
    ``p.sources``), each prompt in the reward's format (``reward``: a ``RewardSpec``, else ``p``'s, else
    the row's ConTra prompt); prompts over ``p.max_prompt_tokens`` dropped (their count returned too)."""
    if p is not None and p.task == "codegen":  # codegen_data's training problems
        from codethinker.training.grpo_codegen import load_codegen_rows

        return load_codegen_rows(path, model, p)
    import pandas as pd

    df = pd.read_parquet(path)
    rows = []
    for rec in df.to_dict("records"):
        rec = plain(rec)
        extra = rec.get("extra_info") or {}
        rows.append(
            {
                "id": extra.get("id", str(len(rows))),
                "source": extra.get("source", "leetcode"),
                **{k: extra.get(k) or "" for k in ("heldout", "task_id")},
                "prompt": rec["prompt"],
                "truth": rec["reward_model"]["ground_truth"],
            }
        )
    spec = reward if reward is not None else p.reward_spec() if p is not None else None
    p = p or GRPOParams()
    if p.sources:
        rows = [r for r in rows if r["source"] in p.sources]
    if p.max_prompts:
        rows = rows[: p.max_prompts]
    if spec is not None:
        rows = with_reward_prompts(rows, spec)
    return drop_long_prompts(rows, model, p.max_prompt_tokens)


def resolve_budget(p: GRPOParams, model: str | Path, rows: list[dict[str, Any]]) -> GRPOParams:
    """``rollout.max_completion_tokens: auto`` -> 1.25 x the longest ground-truth trace of ``rows`` in
    ``model``'s tokens (both backends); a number is kept."""
    if p.rollout.max_completion_tokens != "auto":
        return p
    if p.task == "codegen":
        from codethinker.training.grpo_codegen import codegen_budget

        return dataclasses.replace(
            p, rollout=dataclasses.replace(p.rollout, max_completion_tokens=codegen_budget(p, model, rows))
        )
    from transformers import AutoTokenizer

    from codethinker.training.train_eval import truth_token_budget

    budget = truth_token_budget(AutoTokenizer.from_pretrained(str(model)), rows, p.trace_thoughts)
    return dataclasses.replace(p, rollout=dataclasses.replace(p.rollout, max_completion_tokens=budget))

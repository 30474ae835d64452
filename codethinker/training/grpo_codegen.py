"""GRPO on the code-generation task (the grpo_codegen stage; docs/codegen.md "GRPO recipes"): the rows, the
response budget, the batched reward of the local backend and verl's data.

- :func:`load_codegen_rows`: codegen_data's training problems (``split`` train, ``data/codegen/problems.jsonl``)
  as GRPO rows ``{"id", "source": "codegen", "prompt", "truth"}``: the prompt in the reward's format
  (:meth:`~codethinker.rewards.codegen_switch.CodegenRewardSpec.prompt`), the truth the problem's JSON.
- :func:`codegen_budget`: ``rollout.max_completion_tokens: auto`` = 1.25 x the longest reference solution of
  the rows as an answer, twice for ReflexiCoder's at least two answers.
- :class:`CodegenRewardFunc`: TRL's reward function; ONE judge call per batch (a step's completions);
  per step the reward of the regular and the DBS samples, the pass rate and, for ReflexiCoder, the cycles
  and how first drafts and last answers fare (:data:`~codethinker.rewards.reflexicoder.DRAFT_METRICS`).
- :func:`write_codegen_data`: the rows in verl's parquet schema (``data_source`` ``leetcode_codegen``,
  ``reward_model.ground_truth`` the problem's JSON, ``extra_info.reward``).

>>> p = grpo_params({"task": "codegen", "reward": "reflexicoder"})  # doctest: +SKIP
>>> rows, dropped = load_codegen_rows("data/codegen/problems.jsonl", None, p)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from codethinker.rewards.codegen_switch import CodegenScore, problem_of
from codethinker.training.codegen_eval import read_problems, reference_budget
from codethinker.training.grpo import GRPOParams
from codethinker.training.grpo_rows import drop_long_prompts
from codethinker.training.reward_func import RewardFunc

__all__ = [
    "DATA_SOURCE",
    "CodegenRewardFunc",
    "codegen_budget",
    "load_codegen_rows",
    "reward_func",
    "write_codegen_data",
]

DATA_SOURCE = "leetcode_codegen"  # verl's data_source of the code-generation rows


def load_codegen_rows(
    path: str | Path, model: str | Path | None, p: GRPOParams, split: str = "train"
) -> tuple[list[dict[str, Any]], int]:
    """GRPO rows of the problems of ``split`` (the first ``p.max_prompts``), prompts in the reward's format;
    prompts longer than ``p.max_prompt_tokens`` of ``model`` are dropped (their count is returned too)."""
    spec = p.reward_spec()
    problems = read_problems(path, split)
    if p.max_prompts:
        problems = problems[: p.max_prompts]
    rows = [
        {"id": q.id, "source": "codegen", "prompt": spec.prompt(q), "truth": json.dumps(q.to_json())} for q in problems
    ]
    if not rows:
        raise ValueError(f"{path}: no {split} problems (run the codegen_data stage)")
    return drop_long_prompts(rows, model, p.max_prompt_tokens)


def codegen_budget(p: GRPOParams, model: str | Path, rows: list[dict[str, Any]]) -> int:
    """``rollout.max_completion_tokens: auto`` for the rows' problems (:func:`reference_budget`)."""
    return reference_budget(model, [problem_of(r["truth"]) for r in rows], p.reward_spec().format)


class CodegenRewardFunc(RewardFunc):
    """TRL reward function of a code-generation kind: the completions of a call (one optimizer step's batch)
    judged in one sandbox; :meth:`take` adds ``pass_rate``, ``answer_acc`` and (ReflexiCoder) ``cycles``."""

    def __init__(self, p: GRPOParams):
        self.spec = p.reward_spec()
        self.config = None
        self.__name__ = self.spec.kind
        self._scores: list[tuple[str, Any, int]] = []
        self._extra: list[CodegenScore] = []
        self._seconds = 0.0

    @classmethod
    def from_params(cls, p: GRPOParams) -> CodegenRewardFunc:
        return cls(p)

    def score_texts(self, texts: list[str], truth: list[str]) -> list[Any]:
        """The batch's scores, every program judged in one sandbox call; the extras are kept for :meth:`take`."""
        scored = self.spec.score_batch(texts, truth)
        self._extra.extend(scored)
        return [s.score for s in scored]

    def take(self) -> dict[str, float]:
        extra, self._extra = self._extra, []
        out = super().take()
        if extra:
            n = len(extra)
            out["pass_rate"] = sum(float(e.score.pass_rate or 0.0) for e in extra) / n
            out["answer_acc"] = sum(e.score.answer_ok for e in extra) / n
            if self.spec.format == "reflexion":
                from codethinker.rewards.reflexicoder import DRAFT_METRICS, draft_outcomes

                out["cycles"] = sum(e.cycles or 0 for e in extra) / n  # a broken response counts 0 cycles
                drafts = [draft_outcomes(e.pass_rates) for e in extra]  # does the policy sandbag its first draft?
                out.update({k: sum(d[k] for d in drafts) / n for k in DRAFT_METRICS})
        return out


def reward_func(p: GRPOParams) -> RewardFunc:
    """The run's TRL reward function: :class:`CodegenRewardFunc` for the codegen task (the batched
    judge), else :class:`~codethinker.training.reward_func.RewardFunc`."""
    return CodegenRewardFunc(p) if p.task == "codegen" else RewardFunc.from_params(p)


def write_codegen_data(data: str | Path, out_dir: Path, p: GRPOParams) -> Path:
    """The training problems as verl's parquet (``<out_dir>/codegen_train.<reward>.parquet``)."""
    import pandas as pd

    from codethinker.data.io import atomic_write

    spec = p.reward_spec()
    rows, _ = load_codegen_rows(data, None, p)
    records = [
        {
            "data_source": DATA_SOURCE,
            "prompt": r["prompt"],
            "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": r["truth"]},
            "extra_info": {"id": r["id"], "source": "codegen", "reward": spec.kind, "prompt_format": spec.format},
        }
        for r in rows
    ]
    path = Path(out_dir) / f"codegen_train.{spec.kind}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as fh:
        pd.DataFrame(records).to_parquet(fh, index=False)
    return path

"""LeetCode code generation (the grpo_codegen stage's task): write a program that passes the problem's tests.

Rows are codegen_data's problems (``data/codegen/problems.jsonl``, one
:class:`~codethinker.codegen.task.CodegenProblem` a line, ``split`` train or heldout), their truth the problem's
JSON. Rewards (:mod:`codethinker.rewards.codegen_switch`): ``codegen_outcome`` (R_fmt + R_out), ``reflexicoder``,
``cg_grpo``, ``cg_grpo_ungated`` (R_proc of the CRPL reward model) and ``recode_outcome``; every answer of a batch
is judged in one sandbox call. An answer may take 1.25 x the longest reference solution as a fenced answer (x 2
for ReflexiCoder's first answer and its revision) + 64. DBS branches at blocks of code, scored by the reward's
structural prefix score. Per answer the task reports ``pass_rate`` and ``answer_acc``, and for ReflexiCoder
``cycles`` and how first drafts and last answers fare (:data:`~codethinker.rewards.reflexicoder.DRAFT_METRICS`).

>>> task = Codegen()
>>> spec = task.reward_spec("reflexicoder", {"judge": {"memory_mb": 512}})
>>> (spec.format, spec.block_stop, task.rewards[0])
('reflexion', ['</answer>'], 'codegen_outcome')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from codethinker.rewards.codegen_switch import CODEGEN_REWARDS, CodegenRewardSpec, codegen_spec, problem_of
from codethinker.tasks.base import Judged, Row

__all__ = ["DATA_SOURCE", "Codegen", "read_problems", "reference_budget"]

DATA_SOURCE = "leetcode_codegen"  # verl's data_source of the code-generation rows


def read_problems(path: str | Path, split: str = "train") -> list[Any]:
    """The problems of ``split`` in codegen_data's JSONL (a bad line names the file and line)."""
    from codethinker.codegen.task import CodegenProblem

    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            p = CodegenProblem.from_json(json.loads(line))
        except (json.JSONDecodeError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a codegen problem ({exc})") from None
        if p.split == split:
            out.append(p)
    return out


def reference_budget(model: str | Path, problems: list[Any], answer_format: str, margin: float = 1.25) -> int:
    """``margin`` x the tokens of the longest reference solution of ``problems`` written as a fenced answer
    (x 2 for ReflexiCoder's ``reflexion`` format: a first answer and its revision), + 64 for the tags and a
    short reasoning."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    answers = 2 if answer_format == "reflexion" else 1
    longest = max((len(tok(f"```python\n{q.reference}\n```").input_ids) for q in problems), default=0)
    return int(longest * answers * margin) + 64


class Codegen:
    name = "codegen"
    rewards = CODEGEN_REWARDS
    settings = ("reflexicoder", "judge", "reward_model")
    section = "grpo_codegen"

    def reward_spec(self, reward: str, settings: Mapping[str, Any]) -> CodegenRewardSpec:
        return codegen_spec(reward, settings.get("reflexicoder"), settings.get("judge"), settings.get("reward_model"))

    def rows(self, path: str | Path, split: str = "train") -> list[Row]:
        rows = [
            {"id": q.id, "source": "codegen", "prompt": None, "truth": json.dumps(q.to_json())}
            for q in read_problems(path, split)
        ]
        if not rows:
            raise ValueError(f"{path}: no {split} problems (run the codegen_data stage)")
        return rows

    def prompt(self, row: Row, spec: CodegenRewardSpec) -> list[dict[str, str]]:
        return spec.prompt(problem_of(row["truth"]))

    def budget(self, model: str | Path, rows: Sequence[Row], spec: CodegenRewardSpec, thoughts: bool) -> int:
        return reference_budget(model, [problem_of(r["truth"]) for r in rows], spec.format)

    def score(self, spec: CodegenRewardSpec, texts: Sequence[str], truths: Sequence[str]) -> list[Judged]:
        from codethinker.rewards.reflexicoder import draft_outcomes

        out = []
        for s in spec.score_batch(list(texts), list(truths)):
            extra = {"pass_rate": float(s.score.pass_rate or 0.0), "answer_acc": float(s.score.answer_ok)}
            if spec.format == "reflexion":  # does the policy sandbag its first draft?
                extra |= {"cycles": float(s.cycles or 0), **draft_outcomes(s.pass_rates)}
            out.append(Judged(s.score, extra))
        return out

    def prefix_scorer(self, spec: CodegenRewardSpec) -> Callable[[str], Callable[[str], float]]:
        return spec.prefix_scorer

    def verl_data(self, path: str | Path, out_dir: Path, spec: CodegenRewardSpec) -> Path:
        """The training problems as verl's parquet (``<out_dir>/codegen_train.<reward>.parquet``)."""
        import pandas as pd

        from codethinker.data.io import atomic_write

        records = [
            {
                "data_source": DATA_SOURCE,
                "prompt": self.prompt(r, spec),
                "ability": "code",
                "reward_model": {"style": "rule", "ground_truth": r["truth"]},
                "extra_info": {"id": r["id"], "source": "codegen", "reward": spec.kind, "prompt_format": spec.format},
            }
            for r in self.rows(path, "train")
        ]
        out = Path(out_dir) / f"codegen_train.{spec.kind}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(out, "wb") as fh:
            pd.DataFrame(records).to_parquet(fh, index=False)
        return out

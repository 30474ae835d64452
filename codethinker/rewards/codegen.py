"""The code-generation rewards (docs/codegen.md): the outcome reward, the format reward, pass@k.

Unlike the reasoning rewards, the outcome of a generated program is known only by running it: the
judge (:func:`codethinker.codegen.judge.judge_programs`, the sandbox) turns each program into a
:class:`~codethinker.codegen.judge.Judgement`, and the scores here are pure functions of the
completion, its problem and that judgement. The batched forms run the judge once per batch.

* :func:`outcome_score`: ``reward`` 1.0 iff every test passes (``answer_ok``), else 0.0;
  ``pass_rate``: the share of tests passed; ``fmt``: the format check, reported only (the outcome
  does not depend on the format); ``reason``: the judgement's status when not a pass.
* :func:`format_score`: ``reward`` 1.0 iff the completion is well formed
  (:func:`codethinker.codegen.answer.check_format`: one fenced Python block that parses and defines
  the entry point's class and method), ``reason``: why not.
* :func:`pass_at`: the unbiased pass@k (:func:`codethinker.evaluation.generalize.pass_at_k`) averaged
  over problems.

>>> from codethinker.codegen.judge import Judgement
>>> from codethinker.codegen.task import CodegenProblem
>>> p = CodegenProblem("add", 1, "Easy", "v0.2.0", "...", "", "", "Solution().add", ("assert candidate(1) == 2",))
>>> good = "```python\\nclass Solution:\\n    def add(self, x):\\n        return x + 1\\n```"
>>> s = outcome_score(good, p, Judgement("pass", ("pass",), 1))
>>> s.reward, s.pass_rate, s.fmt, s.answer_ok
(1.0, 1.0, 1, 1)
>>> outcome_score(good, p, Judgement("fail", ("fail", "pass"), 2, "test 1: fail")).pass_rate
0.5
>>> format_score("class Solution: pass", p).reason
'no_block'
>>> round(pass_at([[True, False, False], [False, False, False]], 2), 3)
0.333
"""

from __future__ import annotations

from collections.abc import Sequence

from codethinker.codegen.answer import check_format, extract_program
from codethinker.codegen.judge import JudgeLimits, Judgement, judge_programs
from codethinker.codegen.task import CodegenProblem
from codethinker.evaluation.stats import pass_at_k
from codethinker.rewards.score import Score

__all__ = ["format_rewards", "format_score", "outcome_rewards", "outcome_score", "outcome_scores", "pass_at"]


def format_score(completion: str, problem: CodegenProblem) -> Score:
    """1.0 when ``completion`` is well formed (see the module docstring), else 0.0 with the reason."""
    ok, why = check_format(completion, problem.entry_point)
    return Score(fmt=int(ok), r_proc=0.0, r_res=0.0, reward=float(ok), rcs=0.0, answer_ok=0, reason=why)


def outcome_score(completion: str, problem: CodegenProblem, verdict: Judgement) -> Score:
    """1.0 when the judged program of ``completion`` passes every test, else 0.0; the pass rate as a part."""
    ok, _ = check_format(completion, problem.entry_point)
    passed = verdict.ok and verdict.passed == verdict.total
    return Score(
        fmt=int(ok),
        r_proc=0.0,
        r_res=float(passed),
        reward=float(passed),
        rcs=0.0,
        answer_ok=int(passed),
        reason=None if passed else verdict.status,
        pass_rate=round(verdict.pass_rate, 6),
    )


def outcome_scores(
    completions: Sequence[str], problems: Sequence[CodegenProblem], limits: JudgeLimits | None = None
) -> list[Score]:
    """:func:`outcome_score` of each completion against its problem; the programs judged in one batch
    (``ValueError`` when the lengths differ)."""
    pairs = list(zip(completions, problems, strict=True))
    verdicts = judge_programs([p for _, p in pairs], [extract_program(c) for c, _ in pairs], limits)
    return [outcome_score(c, p, v) for (c, p), v in zip(pairs, verdicts, strict=True)]


def outcome_rewards(
    completions: Sequence[str], problems: Sequence[CodegenProblem], limits: JudgeLimits | None = None
) -> list[float]:
    """The outcome reward of each completion (TRL's ``reward_fn`` shape)."""
    return [s.reward for s in outcome_scores(completions, problems, limits)]


def format_rewards(completions: Sequence[str], problems: Sequence[CodegenProblem]) -> list[float]:
    """The format reward of each completion (``ValueError`` when the lengths differ)."""
    return [format_score(c, p).reward for c, p in zip(completions, problems, strict=True)]


def pass_at(passes: Sequence[Sequence[bool]], k: int) -> float:
    """The mean over problems of the unbiased pass@k; ``passes[i]``: problem i's samples, True when all
    tests passed (every problem needs at least ``k`` samples)."""
    if not passes:
        raise ValueError("pass@k of no problems")
    for i, row in enumerate(passes):
        if len(row) < k:
            raise ValueError(f"problem {i} has {len(row)} samples, fewer than k={k}")
    return sum(pass_at_k(len(row), sum(map(bool, row)), k) for row in passes) / len(passes)

"""CRPL data (ReCode, docs/recode.md): contrastive reasoning-process preference pairs.

For each kept problem of ``codegen_data`` the base reasoning ``t`` is the teacher's response of the
LeetCodeDataset record (a model-written explanation and solution), read into ReCode's response format
(:class:`~codethinker.codegen.crpl_edits.Reasoning`). A base whose code fails the judge is dropped, so
every ``t`` is a correct solution. From it:

* backend ``offline``: ``t+`` = every applicable clean-up of :data:`~codethinker.codegen.crpl_edits.CLEANUPS`
  (code unchanged), ``t-`` = one degradation per dimension of
  :data:`~codethinker.codegen.crpl_edits.DEGRADATIONS` (chosen by a rng seeded with ``base.seed`` and the
  problem id) plus a one-token code bug that the judge fails;
* backend ``llm``: the teacher (an OpenAI-compatible endpoint, :class:`~codethinker.data.llm.ChatClient`)
  writes ``t+`` and ``t-`` from the prompts of :mod:`codethinker.codegen.crpl_llm`; a ``t+`` whose code
  fails the judge is dropped.

Each problem gives three pairs (:data:`PAIR_TYPES`): ``plus_minus`` (t+ > t-), ``plus_base`` (t+ > t),
``base_minus`` (t > t-). Pairs inherit the problem's split (``train`` / ``heldout`` -> eval), so no problem
is in both. Every drop is counted under its reason.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from codethinker.codegen.crpl_bugs import bug_candidates
from codethinker.codegen.crpl_edits import CLEANUPS, DEGRADATIONS, Context, Reasoning, examples
from codethinker.codegen.crpl_edits import parse_response as parse_response
from codethinker.codegen.judge import JudgeLimits, Judgement, judge_programs
from codethinker.codegen.task import ASK, CodegenProblem

__all__ = ["PAIR_TYPES", "RECODE_ASK", "Variants", "build_pairs", "offline_variants", "recode_prompt", "split_pairs"]

PAIR_TYPES = ("plus_minus", "plus_base", "base_minus")
RECODE_ASK = (
    "First reason about the problem inside <think>...</think>. Then give the complete solution (the class "
    "Solution with its method) in one ```python code block inside <answer>...</answer>."
)
Judge = Callable[[Sequence[CodegenProblem], Sequence[str]], list[Judgement]]


def recode_prompt(problem: CodegenProblem) -> str:
    """The policy's (and the reward model's) user message: the problem with ReCode's answer format."""
    return problem.prompt.removesuffix(ASK).rstrip() + "\n\n" + RECODE_ASK


@dataclass(frozen=True)
class Variants:
    """One problem's three reasoning processes and the edits that made ``t+`` and ``t-``."""

    problem: CodegenProblem
    base: Reasoning
    plus: Reasoning
    minus: Reasoning
    plus_edits: tuple[str, ...] = ()
    minus_edits: tuple[str, ...] = ()

    def pairs(self) -> list[dict[str, Any]]:
        """The three preference pairs (chosen better than rejected)."""
        texts = {"plus": self.plus.render(), "base": self.base.render(), "minus": self.minus.render()}
        edits = {"plus": list(self.plus_edits), "base": [], "minus": list(self.minus_edits)}
        prompt = recode_prompt(self.problem)
        out = []
        for kind in PAIR_TYPES:
            hi, lo = kind.split("_")
            out.append(
                {
                    "id": f"{self.problem.id}:{kind}",
                    "problem_id": self.problem.id,
                    "pair_type": kind,
                    "prompt": prompt,
                    "chosen": texts[hi],
                    "rejected": texts[lo],
                    "chosen_edits": edits[hi],
                    "rejected_edits": edits[lo],
                }
            )
        return out


@dataclass
class _Funnel:
    dropped: Counter[str] = field(default_factory=Counter)
    edits: Counter[str] = field(default_factory=Counter)

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] += n


def _rng(seed: int, problem_id: str, what: str) -> random.Random:
    return random.Random(f"{seed}:{problem_id}:{what}")


def cleanup(base: Reasoning, ctx: Context, rng: random.Random) -> tuple[Reasoning, tuple[str, ...]]:
    """``t+``: every applicable clean-up, in the order of :data:`CLEANUPS`."""
    out, names = base, []
    for axis, edits in CLEANUPS.items():
        for edit in edits:
            new = edit(out, ctx, rng)
            if new is not None and new != out:
                out, names = new, [*names, f"{axis}:{edit.__name__}"]
    return out, tuple(names)


def degrade(base: Reasoning, ctx: Context, rng: random.Random) -> tuple[Reasoning, tuple[str, ...]]:
    """``t-`` before its code bug: one applicable degradation per dimension, chosen by ``rng``."""
    out, names = base, []
    for axis, edits in DEGRADATIONS.items():
        for edit in rng.sample(list(edits), len(edits)):
            new = edit(out, ctx, rng)
            if new is not None and new != out:
                out, names = new, [*names, f"{axis}:{edit.__name__}"]
                break
    return out, tuple(names)


def offline_variants(
    items: Sequence[tuple[CodegenProblem, Reasoning]], judge: Judge, seed: int, bug_tries: int, funnel: _Funnel
) -> list[Variants]:
    """``t+`` and ``t-`` of each (problem, correct base) by the rules; the code bugs judged in one batch
    (the first of ``bug_tries`` seeded candidates that fails a test is kept)."""
    drafts, jobs = [], []
    for problem, base in items:
        ctx = Context(examples(problem.tests))
        plus, plus_edits = cleanup(base, ctx, _rng(seed, problem.id, "plus"))
        if plus == base:
            funnel.drop("no_cleanup_applies")
            continue
        rng = _rng(seed, problem.id, "minus")
        minus, minus_edits = degrade(base, ctx, rng)
        bugs = bug_candidates(base.code)
        bugs = rng.sample(bugs, min(bug_tries, len(bugs)))
        drafts.append((problem, base, plus, plus_edits, minus, minus_edits, bugs))
        jobs += [(problem, code) for _, code in bugs]
    verdicts = iter(judge([p for p, _ in jobs], [c for _, c in jobs]) if jobs else [])
    out = []
    for problem, base, plus, plus_edits, minus, minus_edits, bugs in drafts:
        judged = [next(verdicts) for _ in bugs]
        failing = [bug for bug, v in zip(bugs, judged, strict=True) if not v.ok]
        if not failing:
            funnel.drop("no_failing_bug")
            continue
        name, code = failing[0]
        edits = (*minus_edits, f"code:bug({name})")
        out.append(Variants(problem, base, plus, replace(minus, code=code), plus_edits, edits))
    return out


def build_pairs(
    problems: Sequence[CodegenProblem],
    responses: dict[str, str],
    *,
    seed: int,
    backend: str = "offline",
    bug_tries: int = 3,
    limits: JudgeLimits | None = None,
    teacher: Callable[[Sequence[tuple[CodegenProblem, Reasoning]]], list[tuple[Reasoning | None, Reasoning | None]]]
    | None = None,
    judge: Judge | None = None,
    progress: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The CRPL pairs of ``problems`` (each pair with its problem's ``split``) and the counts.

    ``responses``: task_id -> the teacher's response (LeetCodeDataset's ``response``); ``teacher``: the
    ``llm`` backend (:func:`codethinker.codegen.crpl_llm.llm_teacher`); ``judge``: defaults to the sandbox
    judge (:func:`~codethinker.codegen.judge.judge_programs` under ``limits``, with a bar labelled ``progress``
    for each batch it judges)."""
    if backend not in ("offline", "llm"):
        raise ValueError(f"crpl backend must be offline or llm, got {backend!r}")
    run: Judge = judge or (lambda ps, cs: judge_programs(ps, cs, limits, progress))
    funnel, items = _Funnel(), []
    for p in problems:
        text = responses.get(p.id)
        base = parse_response(text, p.entry_point) if text else None
        if base is None:
            funnel.drop("no_response" if not text else "no_code_in_response")
        else:
            items.append((p, base))
    verdicts = run([p for p, _ in items], [b.code for _, b in items]) if items else []
    correct = [it for it, v in zip(items, verdicts, strict=True) if v.ok]
    funnel.drop("base_fails", len(items) - len(correct))
    if backend == "offline":
        variants = offline_variants(correct, run, seed, bug_tries, funnel)
    else:
        if teacher is None:
            raise ValueError("the llm backend needs a teacher")
        variants = _llm_variants(correct, teacher, run, funnel)
    for v in variants:
        funnel.edits.update(e.split("(")[0] for e in (*v.plus_edits, *v.minus_edits))
    pairs = [pair | {"split": v.problem.split} for v in variants for pair in v.pairs()]
    return pairs, _metrics(problems, variants, pairs, funnel)


def _llm_variants(
    items: Sequence[tuple[CodegenProblem, Reasoning]], teacher: Any, judge: Judge, funnel: _Funnel
) -> list[Variants]:
    """``t+``/``t-`` from the teacher; a ``t+`` whose code fails the judge, or an answer that cannot be read
    or equals the base, is dropped."""
    answers = teacher(items)
    drafts = []
    for (problem, base), (plus, minus) in zip(items, answers, strict=True):
        if plus is None or minus is None:
            funnel.drop("llm_unreadable")
        elif base in (plus, minus) or plus == minus:
            funnel.drop("llm_unchanged")
        else:
            drafts.append(Variants(problem, base, plus, minus, ("llm:optimize",), ("llm:degrade",)))
    verdicts = judge([v.problem for v in drafts], [v.plus.code for v in drafts]) if drafts else []
    kept = [v for v, verdict in zip(drafts, verdicts, strict=True) if verdict.ok]
    funnel.drop("optimized_fails", len(drafts) - len(kept))
    return kept


def _metrics(
    problems: Sequence[CodegenProblem], variants: Sequence[Variants], pairs: list[dict[str, Any]], funnel: _Funnel
) -> dict[str, Any]:
    by_split: dict[str, Counter[str]] = {"train": Counter(), "eval": Counter()}
    for pair in pairs:
        by_split[split_of(pair)][pair["pair_type"]] += 1
    chars = {k: [len(getattr(v, k).render()) for v in variants] for k in ("plus", "base", "minus")}
    return {
        "problems_in": len(problems),
        "dropped": dict(sorted(funnel.dropped.items())),
        "problems_kept": len(variants),
        "pairs": {s: {t: c[t] for t in PAIR_TYPES} for s, c in by_split.items()},
        "pairs_train": sum(by_split["train"].values()),
        "pairs_eval": sum(by_split["eval"].values()),
        "edits": dict(sorted(funnel.edits.items())),
        "mean_chars": {k: round(sum(v) / len(v), 1) if v else 0.0 for k, v in chars.items()},
    }


def split_of(pair: dict[str, Any]) -> str:
    """``eval`` for a pair of a held-out problem, else ``train``."""
    return "eval" if pair["split"] == "heldout" else "train"


def split_pairs(pairs: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, eval) pairs, by their problem's split."""
    return [p for p in pairs if split_of(p) == "train"], [p for p in pairs if split_of(p) == "eval"]

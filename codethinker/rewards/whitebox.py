"""ExecVerify's white-box reward (SPEC §8), a baseline: ``2 * ((1 - a) * io + a * wb_acc)``, paid
only when the final assertion passes (a = 0.5).

The project's reading (docs/decisions.md): questions are data-flow questions built
deterministically from the ground-truth flow, "value of ``v`` after LINENO L" and "type of
``v`` after LINENO L" for the variables each block changes (at most ``k`` questions). Each is
scored on its own, with no prefix consistency; that is the property the paper contrasts with CRM.
ExecVerify's control-flow questions (next executed line) need line-level traces, which the
truth JSON does not carry.

Rollout format: vanilla tracing plus a ``[WHITEBOX]`` group of ``Qi: <answer>`` lines::

    [THOUGHT]
    ...
    [/THOUGHT]
    [WHITEBOX]
    Q1: 3
    Q2: int
    [/WHITEBOX]
    [ANSWER]
    assert f(1) == 3
    [/ANSWER]

``a`` must be a finite number in [0, 1] and ``k`` an int in [1, MAX_QUESTIONS] (answers are
numbered ``Q1`` to ``Q999``); anything else is a ``ValueError``. :class:`WhiteboxConfig` holds both
(``grpo.whitebox``); :func:`whitebox_prompt` is the prompt a policy trained with this reward sees (the
code numbered by LINENO, which the questions refer to, the questions, and the answer format).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from codethinker.contra.render import code_listing
from codethinker.contra.tracer import Flow
from codethinker.contra.values import parse_literal, strict_equal
from codethinker.rewards.orm import MAX_CHARS, parse_vanilla
from codethinker.rewards.score import Score, batched

__all__ = [
    "MAX_QUESTIONS",
    "Question",
    "WhiteboxConfig",
    "check_params",
    "whitebox_prompt",
    "whitebox_questions",
    "whitebox_reward",
    "whitebox_score",
]

_ANSWER = re.compile(r"Q(\d{1,3}):[ \t]*(.*)\Z")  # matched on one stripped line: linear
MAX_QUESTIONS = 999


def check_params(a: float, k: int) -> None:
    """``ValueError`` unless ``a`` is a finite number in [0, 1] and ``k`` an int in [1, MAX_QUESTIONS]."""
    if type(a) not in (int, float) or not (math.isfinite(a) and 0 <= a <= 1):
        raise ValueError(f"whitebox a must be a finite number in [0, 1], got {a!r}")
    if type(k) is not int or not 1 <= k <= MAX_QUESTIONS:
        raise ValueError(f"whitebox k must be an int in [1, {MAX_QUESTIONS}], got {k!r}")


@dataclass(frozen=True)
class WhiteboxConfig:
    a: float = field(default=0.5, metadata={"help": "weight of the white-box accuracy in the reward (ExecVerify: 0.5)"})
    k: int = field(default=6, metadata={"help": f"white-box questions per prompt (1 to {MAX_QUESTIONS})"})

    def __post_init__(self) -> None:
        check_params(self.a, self.k)


@dataclass(frozen=True)
class Question:
    qid: int
    text: str
    kind: str  # "value" | "type"
    answer: Any


def whitebox_questions(flow: Flow, k: int = 6) -> list[Question]:
    """Up to ``k`` questions: value and type of each variable a block changes, in block order."""
    out: list[Question] = []
    prev: dict[str, Any] = {}
    for b in flow.blocks:
        for name, value in b.locals.items():
            if name in prev and strict_equal(prev[name], value):
                continue
            for kind in ("value", "type"):
                if len(out) >= k:
                    return out
                ans = value if kind == "value" else type(value).__name__
                out.append(Question(len(out) + 1, f"What is the {kind} of `{name}` after LINENO {b.end}?", kind, ans))
        prev = b.locals
    return out


PROMPT = """You are given a Python function, an input, and questions about the execution of the \
function on that input. Think step by step inside [THOUGHT] and [/THOUGHT]. Then answer every \
question inside [WHITEBOX] and [/WHITEBOX], one line each, written `Q<number>: <answer>`: a value as \
a Python literal, a type as its name (for example int). Finally give the full assertion, completed \
with a literal holding the output, inside [ANSWER] and [/ANSWER]. Each tag stands alone on its line.

[CODE]
{listing}
[/CODE]

Questions:
{questions}

assert {entry}({input}) == ??
"""


def whitebox_prompt(flow: Flow, k: int = 6) -> list[dict[str, str]]:
    """The chat prompt of the white-box format: the numbered code, the questions of
    :func:`whitebox_questions` (``k`` at most) and the assertion to complete."""
    qs = whitebox_questions(flow, k)
    questions = "\n".join(f"Q{q.qid}: {q.text}" for q in qs) or "(none)"
    text = PROMPT.format(listing=code_listing(flow.lines), questions=questions, entry=flow.entry, input=flow.input)
    return [{"role": "user", "content": text}]


def _answers(text: str) -> tuple[str, dict[int, str]]:
    """Split off the ``[WHITEBOX]`` group; return the remaining vanilla text and the answers."""
    if len(text) > MAX_CHARS:
        return text, {}
    lines = text.split("\n")
    try:
        i = lines.index("[WHITEBOX]")
        j = lines.index("[/WHITEBOX]", i + 1)
    except ValueError:
        return text, {}
    answers: dict[int, str] = {}
    for line in lines[i + 1 : j]:
        a = _ANSWER.match(line.strip())
        if a:
            answers.setdefault(int(a.group(1)), a.group(2).strip())
    return "\n".join(lines[:i] + lines[j + 1 :]), answers


def whitebox_score(solution_str: str, flow: Flow, a: float = 0.5, k: int = 6) -> Score:
    """Score one rollout; ``a`` and ``k`` are checked by :func:`check_params`."""
    check_params(a, k)
    rest, answers = _answers(solution_str)
    fmt, answer, reason = parse_vanilla(rest, flow.entry, flow.input)
    io = int(fmt and strict_equal(answer, flow.output))
    qs = whitebox_questions(flow, k)
    correct = 0
    for q in qs:
        given = answers.get(q.qid)
        if given is None:
            continue
        if q.kind == "type":
            correct += int(given == q.answer)
        else:
            try:
                correct += int(strict_equal(parse_literal(given, 100_000), q.answer))
            except ValueError:
                pass
    wb_acc = correct / len(qs) if qs else 0.0
    reward = 2.0 * ((1 - a) * io + a * wb_acc) if io else 0.0
    return Score(
        fmt=int(fmt),
        deltas=[0] * len(flow.blocks),
        r_proc=2.0 * wb_acc,
        r_res=2.0 * io,
        reward=reward,
        rcs=0.0,
        reason=reason,
        answer_ok=io,
        wb_acc=wb_acc,
    )


def whitebox_reward(
    completions: Sequence[str], truths: Sequence[Flow | str], a: float = 0.5, k: int = 6, **_: Any
) -> list[float]:
    """Batched pure reward: one float per completion."""
    return batched(lambda c, f: whitebox_score(c, f, a, k), completions, truths)

"""CRPL's ``llm`` backend: the teacher writes the optimized ``t+`` and the degraded ``t-`` of a base reasoning.

The paper (seeds 001/002) has Qwen2.5-Coder-32B-Instruct rewrite a base reasoning process along three
dimensions, factual accuracy, logical rigor and logical coherence: better for ``t+`` (e.g. redundancy
removed), worse for ``t-`` (e.g. factual errors introduced). Its prompts are not public; the two below
are written from that description. Both ask for ReCode's response format, read back by
:func:`~codethinker.codegen.crpl_edits.parse_recode`. The client is the project's
:class:`~codethinker.data.llm.ChatClient` (bounded concurrency, retries, the on-disk answer cache).

>>> msgs = messages("optimize", "Return 1.", "<think>\\nx\\n</think>")
>>> msgs[0]["role"], "factual accuracy" in msgs[0]["content"]
('system', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codethinker.codegen.crpl_edits import Reasoning, parse_recode
from codethinker.codegen.task import CodegenProblem

__all__ = ["PROMPTS", "llm_teacher", "messages"]

_SYSTEM = (
    "You edit the reasoning process that a programmer wrote before a solution to a coding problem. "
    "Reasoning quality has three dimensions: factual accuracy (every statement about values, data "
    "structures, library behaviour and complexity is true), logical rigor (each step is justified, edge "
    "cases are handled and the approach is checked) and logical coherence (the steps follow in order, do "
    "not contradict each other or the code, and carry no filler or repetition)."
)
_FORMAT = (
    "Answer with the whole edited response and nothing else, in this format:\n<think>\nthe reasoning\n"
    "</think>\n<answer>\n```python\nthe complete solution\n```\n</answer>"
)
PROMPTS = {
    "optimize": (
        "Rewrite the response so that its reasoning is better on all three dimensions: correct any wrong "
        "statement, add the missing justifications and edge cases, verify the approach on an example, put "
        "the steps in order, align the reasoning with the code, and remove redundancy and filler. Keep the "
        "same algorithm; the code must stay correct (you may only fix comments or names)."
    ),
    "degrade": (
        "Rewrite the response so that its reasoning is worse on all three dimensions, while it keeps the "
        "same style and about the same length: introduce a wrong fact (a value, a complexity or the "
        "behaviour of a function), skip the justification of a key step or make an unjustified leap, and "
        "put steps out of order or make one contradict another. Change the code so that it follows the "
        "flawed reasoning (a subtle bug). Do not mention that anything was changed."
    ),
}


def messages(kind: str, problem: str, response: str) -> list[dict[str, str]]:
    """The chat of one request: ``kind`` is ``optimize`` (t+) or ``degrade`` (t-)."""
    user = f"{PROMPTS[kind]}\n\n## Problem\n{problem}\n\n## Response\n{response}\n\n{_FORMAT}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def llm_teacher(client: Any) -> Any:
    """The ``teacher`` of :func:`codethinker.codegen.crpl.build_pairs`: (t+, t-) per (problem, base) from
    ``client`` (a ChatClient); None where an answer failed or is not in the format."""

    def teach(items: Sequence[tuple[CodegenProblem, Reasoning]]) -> list[tuple[Reasoning | None, Reasoning | None]]:
        batch = [messages(kind, p.prompt, base.render()) for p, base in items for kind in ("optimize", "degrade")]
        answers = client.complete_many(batch)
        read = [parse_recode(a) if a else None for a in answers]
        return [(read[2 * i], read[2 * i + 1]) for i in range(len(items))]

    return teach

"""CodeReasoner's outcome-only reward (SPEC §8), a baseline: 2 when the format holds and the
final assertion is right, else 0. No process signal.

Format (vanilla tracing): ``[THOUGHT]`` ... ``[/THOUGHT]`` then ``[ANSWER]`` holding one
``assert f(...) == <literal>`` and ``[/ANSWER]``, each tag alone on its line. A valid ConTra
trace is also accepted (its ``[RETURN]`` is the answer), so ORM can score any rollout.

>>> from codethinker.contra.render import ANSWER_CLOSE, ANSWER_OPEN, THOUGHT_CLOSE, THOUGHT_OPEN, TRACE_OPEN
from codethinker.contra.tracer import Flow
>>> flow = Flow.from_json('{"entry": "f", "input": "1", "code": "def f(x):\\\\n    return x\\\\n",'
...     ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{\\'x\\': 1}"}], "output": "1"}')
>>> orm_reward(["[THOUGHT]\\nx is 1\\n[/THOUGHT]\\n[ANSWER]\\nassert f(1) == 1\\n[/ANSWER]",
...             "[THOUGHT]\\n[/THOUGHT]\\n[ANSWER]\\nassert f(1) == 2\\n[/ANSWER]"], [flow, flow])
[2.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codethinker.contra.render import ANSWER_CLOSE, ANSWER_OPEN, THOUGHT_CLOSE, THOUGHT_OPEN, TRACE_OPEN
from codethinker.contra.tracer import Flow
from codethinker.contra.validate import _Fail, _parse_assert, validate
from codethinker.contra.values import PY_SPACE, strict_equal
from codethinker.rewards.score import Score, batched

__all__ = ["orm_reward", "orm_score", "parse_vanilla"]

MAX_CHARS = 2_000_000
_TAGS = frozenset({THOUGHT_OPEN, THOUGHT_CLOSE, ANSWER_OPEN, ANSWER_CLOSE})


def parse_vanilla(text: str, entry: str, input_text: str | None = None) -> tuple[bool, Any, str | None]:
    """``(fmt, answer, reason)`` for a vanilla-tracing rollout (``input_text``: see ``_parse_assert``)."""
    if len(text) > MAX_CHARS:
        return False, None, "too_long"
    lines = text.strip("\n").split("\n")
    if lines[0] != THOUGHT_OPEN or THOUGHT_CLOSE not in lines or lines[-1] != ANSWER_CLOSE:
        return False, None, "structure"
    k = lines.index(THOUGHT_CLOSE)
    inner = lines[1:k] + lines[k + 2 : -1]
    if k + 1 >= len(lines) - 1 or lines[k + 1] != ANSWER_OPEN or any(ln.strip() in _TAGS for ln in inner):
        return False, None, "structure"
    answer = [ln for ln in lines[k + 2 : -1] if ln.strip(PY_SPACE)]
    if len(answer) != 1:
        return False, None, "return"
    try:
        value, _ = _parse_assert(answer[0], entry, input_text)
    except _Fail as f:
        return False, None, f.reason
    return True, value, None


def orm_score(solution_str: str, flow: Flow) -> Score:
    """``fmt, r_res, reward, reason`` (``deltas``/``r_proc``/``rcs`` = 0 for a common schema)."""
    if solution_str.lstrip().startswith(TRACE_OPEN):
        v = validate(solution_str, flow)
        fmt, answer, reason = v.ok, v.answer, v.reason
    else:
        fmt, answer, reason = parse_vanilla(solution_str, flow.entry, flow.input)
    answer_ok = int(fmt and strict_equal(answer, flow.output))
    r_res = 2.0 * answer_ok
    return Score(
        fmt=int(fmt),
        deltas=[0] * len(flow.blocks),
        r_proc=0.0,
        r_res=r_res,
        reward=r_res,
        rcs=0.0,
        reason=reason,
        answer_ok=answer_ok,
    )


def orm_reward(completions: Sequence[str], truths: Sequence[Flow | str], **_: Any) -> list[float]:
    """Batched pure reward: one float per completion."""
    return batched(orm_score, completions, truths)

"""The consistency reward mechanism (CRM, SPEC §4) and the Reasoning Consistency Score.

With ``fmt`` the strict validity, ``d_t`` = 1 when block t's LOCALS equal the truth, ``w_t``
the CCW weights::

    R_proc = 2 * fmt * sum_t(w_t * prod_{j<=t} d_j) / sum_t w_t
    R_res  = 2 * fmt * [answer == output]
    R      = alpha * R_proc + [R_proc == 2] * R_res          (in [0, 4] for alpha = 1)

Ablations (paper Table 2): ``prm=False`` -> R = R_res; ``prefix=False`` -> prod replaced by
d_t; ``gate=False`` -> R = alpha*R_proc + R_res; ``orm=False`` -> R = alpha*R_proc;
``ccw=False`` -> w_t = 1. The paper's "w/o RCC" is read as ``gate=False`` (docs/decisions.md).
RCS = share of blocks before the first wrong one (0 when the format is broken).

``CRMConfig`` checks itself: switches are ``bool`` and ``alpha`` a finite number in
``[0, MAX_ALPHA]``, so a reward is always a finite float. The weighted sum is computed in exact
integer arithmetic, so truth weights of any size (``10**400``) give a correct ``R_proc``.

>>> from codethinker.contra.tracer import Flow
>>> from codethinker.contra.render import render_trace
>>> flow = Flow.from_json('{"entry": "f", "input": "1", "code": "def f(x):\\\\n    return x\\\\n",'
...     ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{\\'x\\': 1}"}], "output": "1"}')
>>> crm_reward([render_trace(flow), "junk"], [flow, flow])
[4.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from codethinker.contra.tracer import Flow
from codethinker.contra.validate import validate
from codethinker.contra.values import strict_equal
from codethinker.rewards.score import Score, batched

__all__ = ["MAX_ALPHA", "CRMConfig", "crm_reward", "crm_score", "rcs"]

MAX_ALPHA = 100.0  # alpha beyond this would drown R_res (the paper uses 1)


@dataclass(frozen=True)
class CRMConfig:
    prm: bool = field(default=True, metadata={"help": "Pay the process reward R_proc (w/o PRM: R = R_res)."})
    prefix: bool = field(
        default=True,
        metadata={
            "help": "Prefix consistency: nothing counts after the first wrong block (off: each block on its own)."
        },
    )
    gate: bool = field(default=True, metadata={"help": "Pay R_res only when R_proc == 2 (off: always)."})
    orm: bool = field(default=True, metadata={"help": "Pay the result reward R_res (w/o ORM: R = alpha*R_proc)."})
    ccw: bool = field(default=True, metadata={"help": "Weight blocks by cyclomatic complexity (off: w_t = 1)."})
    alpha: float = field(default=1.0, metadata={"help": f"Weight of R_proc in R (finite, 0 to {MAX_ALPHA:g})."})

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "alpha":
                if type(value) not in (int, float):
                    raise ValueError(f"CRM alpha must be a number, got {type(value).__name__}")
                if not (math.isfinite(value) and 0 <= value <= MAX_ALPHA):
                    raise ValueError(f"CRM alpha must be a finite number in [0, {MAX_ALPHA:g}], got {value!r}")
            elif type(value) is not bool:
                raise ValueError(f"CRM switch {f.name} must be true or false, got {value!r}")


def rcs(deltas: Sequence[int]) -> float:
    """Share of blocks before the first wrong one: ``rcs([1, 1, 0, 1]) == 0.5``."""
    if not deltas:
        return 0.0
    k = 0
    for d in deltas:
        if not d:
            break
        k += 1
    return k / len(deltas)


def crm_score(solution_str: str, flow: Flow, config: CRMConfig = CRMConfig()) -> Score:
    """Score one rollout (``deltas`` per truth block; ``reason`` why the format is invalid)."""
    v = validate(solution_str, flow)
    n = len(flow.blocks)
    if not v.ok:
        return Score(fmt=0, deltas=[0] * n, r_proc=0.0, r_res=0.0, reward=0.0, rcs=0.0, reason=v.reason, answer_ok=0)
    deltas = [int(strict_equal(pb.locals, tb.locals)) for pb, tb in zip(v.blocks, flow.blocks, strict=True)]
    weights = flow.weights if config.ccw else [1] * n
    total, prod = 0, 1  # ints: exact for weights of any size
    for d, w in zip(deltas, weights, strict=True):
        prod = prod * d if config.prefix else d
        total += w * prod
    total_weight = sum(weights)
    r_proc = 2 * total / total_weight  # int / int is correctly rounded, never an OverflowError
    answer_ok = int(strict_equal(v.answer, flow.output))
    r_res = 2.0 * answer_ok
    full = total == total_weight  # exact: R_proc may round to 2.0 with one light block wrong
    if not config.prm:
        reward = r_res if config.orm else 0.0
    else:
        reward = config.alpha * r_proc
        if config.orm and (full or not config.gate):
            reward += r_res
    return Score(
        fmt=1,
        deltas=deltas,
        r_proc=r_proc,
        r_res=r_res,
        reward=reward,
        rcs=rcs(deltas),
        reason=None,
        answer_ok=answer_ok,
    )


def crm_reward(
    completions: Sequence[str], truths: Sequence[Flow | str], config: CRMConfig = CRMConfig(), **_: Any
) -> list[float]:
    """Batched pure reward (TRL style): one float per completion; truths as Flow or truth JSON."""
    return batched(lambda c, f: crm_score(c, f, config), completions, truths)

"""The reasoning task's TRL reward function: each completion scored against its row's truth with the run's
reward (``grpo.reward``: crm | orm | whitebox), batched per optimizer step, with the step's statistics
(:meth:`RewardFunc.take`). The codegen task subclasses it (:mod:`codethinker.training.grpo_codegen`).

>>> f = RewardFunc()  # the full CRM  # doctest: +SKIP
>>> f(prompts, completions, truth=[row["truth"] for row in rows])  # doctest: +SKIP
[4.0, 0.0, ...]
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from codethinker.rewards.score import Score

if TYPE_CHECKING:
    from codethinker.training.grpo import GRPOParams

__all__ = ["CRMRewardFunc", "RewardFunc"]


def _mean_std_max(xs: list[float]) -> tuple[float, float, float]:
    if not xs:
        return 0.0, 0.0, 0.0
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    return m, sd, max(xs)


class RewardFunc:
    """TRL reward function: the run's reward (``reward``: crm | orm | whitebox, with its ``crm`` switches
    or ``whitebox`` settings) of each completion against the row's ``truth`` JSON; TRL logs it under
    the kind's name."""

    def __init__(
        self, crm: dict[str, Any] | None = None, *, reward: str = "crm", whitebox: dict[str, Any] | None = None
    ):
        from codethinker.rewards.switch import reward_spec

        self.spec = reward_spec(reward, crm, whitebox)
        self.config = self.spec.crm
        self.__name__ = self.spec.kind
        self._scores: list[tuple[str, Score, int]] = []
        self._seconds = 0.0

    @classmethod
    def from_params(cls, p: GRPOParams) -> RewardFunc:
        return cls(p.crm, reward=p.reward, whitebox=p.whitebox)

    def score_texts(self, texts: list[str], truth: list[str]) -> list[Score]:
        """Each response's :class:`Score` against its row's truth (the task's reward; one call per batch)."""
        from codethinker.contra.tracer import Flow

        return [self.spec.score(text, Flow.from_json(t)) for text, t in zip(texts, truth, strict=True)]

    def __call__(
        self,
        prompts: list,
        completions: list,
        truth: list[str],
        completion_ids: list | None = None,
        rollout_kind: list[str] | None = None,
        **_: Any,
    ) -> list[float]:
        t0 = time.perf_counter()
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        scores = self.score_texts(texts, truth)
        for i, s in enumerate(scores):
            kind = rollout_kind[i] if rollout_kind else "regular"
            n = len(completion_ids[i]) if completion_ids is not None else 0
            self._scores.append((kind, s, n))
        self._seconds += time.perf_counter() - t0
        return [float(s.reward) for s in scores]

    def take(self) -> dict[str, float]:
        """Statistics of everything scored since the last call (one optimizer step)."""
        sc, self._scores = self._scores, []
        out: dict[str, float] = {"reward_s": self._seconds}
        self._seconds = 0.0
        for name, sel in (
            ("", sc),
            ("_regular", [x for x in sc if x[0] == "regular"]),
            ("_dbs", [x for x in sc if x[0] == "dbs"]),
        ):
            m, sd, mx = _mean_std_max([x[1].reward for x in sel])
            out.update({f"reward{name}_mean": m, f"reward{name}_std": sd, f"reward{name}_max": mx})
        if sc:
            n = len(sc)
            out.update(
                {
                    "r_proc": sum(x[1].r_proc for x in sc) / n,
                    "r_res": sum(x[1].r_res for x in sc) / n,
                    "fmt_rate": sum(x[1].fmt for x in sc) / n,
                    "rcs": sum(x[1].rcs for x in sc) / n,
                    "response_len": sum(x[2] for x in sc) / n,
                }
            )
        return out


CRMRewardFunc = RewardFunc  # the name before the reward became a switch (crm is the default kind)

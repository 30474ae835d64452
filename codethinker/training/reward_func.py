"""TRL's reward function for any task: each completion scored against its row's truth with the run's reward
(``grpo.reward`` of ``grpo.task``), batched per optimizer step, with the step's statistics (:meth:`RewardFunc.take`:
the reward of the regular and DBS samples, its parts, and the means of the task's own per-answer numbers).

>>> f = RewardFunc()  # output prediction's full CRM  # doctest: +SKIP
>>> f(prompts, completions, truth=[row["truth"] for row in rows])  # doctest: +SKIP
[4.0, 0.0, ...]
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from codethinker.rewards.score import Score
from codethinker.tasks.base import Judged, mean_extras

if TYPE_CHECKING:
    from codethinker.tasks.base import RewardSpec, Task
    from codethinker.training.grpo import GRPOParams

__all__ = ["RewardFunc"]


def _mean_std_max(xs: list[float]) -> tuple[float, float, float]:
    if not xs:
        return 0.0, 0.0, 0.0
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    return m, sd, max(xs)


class RewardFunc:
    """TRL reward function of a task's reward (:mod:`codethinker.tasks`): each completion of a call (one
    optimizer step's batch) scored against its row's ``truth`` in one :meth:`~codethinker.tasks.Task.score`
    call; TRL logs it under the reward's name. ``task``: a task or its name; ``spec``: the task's reward with
    its settings (None: the task's first reward with default settings)."""

    def __init__(self, task: Task | str = "output_prediction", spec: RewardSpec | None = None):
        from codethinker.tasks import get_task

        self.task = get_task(task) if isinstance(task, str) else task
        self.spec = spec if spec is not None else self.task.reward_spec(self.task.rewards[0], {})
        self.__name__ = self.spec.kind
        self._scores: list[tuple[str, Score, int]] = []
        self._extra: list[Judged] = []
        self._seconds = 0.0

    @classmethod
    def from_params(cls, p: GRPOParams) -> RewardFunc:
        return cls(p.task, p.reward_spec())

    def score_texts(self, texts: list[str], truth: list[str]) -> list[Score]:
        """Each response's :class:`Score` against its row's truth (one task call per batch); the task's own
        per-answer numbers are kept for :meth:`take`."""
        judged = self.task.score(self.spec, texts, truth)
        self._extra.extend(judged)
        return [j.score for j in judged]

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
        extra, self._extra = self._extra, []
        out: dict[str, float] = {"reward_s": self._seconds}
        self._seconds = 0.0
        greedy = [x for x in sc if x[0] == "greedy"]  # grpo.rollout.n_greedy: logged only when drawn
        for name, sel in (
            ("", sc),
            ("_regular", [x for x in sc if x[0] == "regular"]),
            ("_dbs", [x for x in sc if x[0] == "dbs"]),
            *((("_greedy", greedy),) if greedy else ()),
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
        if extra:
            out.update(mean_extras(extra))  # the task's own: a pass rate, ReflexiCoder's cycles, ...
        return out

"""Tasks, the unit of the design (:mod:`codethinker.tasks.base`: the contract): a trainer, an evaluator and a
reward take a task and never ask which one it is.

- ``output_prediction``: ConTra output prediction (:mod:`~codethinker.tasks.output_prediction`), the grpo
  stage's task;
- ``codegen``: LeetCode code generation (:mod:`~codethinker.tasks.codegen`), the grpo_codegen stage's;
- a user's own: ``package.module:attribute`` naming a task object (or a class, which is instantiated), with no
  change to this package (docs/architecture.md, "A third task").

>>> get_task("codegen").rewards[0], get_task("output_prediction").section
('codegen_outcome', 'grpo')
>>> task_of_reward("reflexicoder").name
'codegen'
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from typing import Any

from codethinker.tasks.base import Judged, RewardSpec, Row, Task, mean_extras

__all__ = [
    "TASKS",
    "Judged",
    "RewardSpec",
    "Row",
    "Task",
    "get_task",
    "mean_extras",
    "score_one",
    "task_of_reward",
]

TASKS = {  # name -> "module:class" (imported when asked for)
    "output_prediction": "codethinker.tasks.output_prediction:OutputPrediction",
    "codegen": "codethinker.tasks.codegen:Codegen",
}


@functools.cache
def get_task(name: str) -> Task:
    """The task ``name``: a registered one (:data:`TASKS`) or ``package.module:attribute``; anything else is a
    ``ValueError`` naming the choices."""
    target = TASKS.get(name, name)
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"unknown task {name!r}: one of {', '.join(TASKS)}, or package.module:attribute")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"task {name!r}: cannot import {target} ({exc})") from None
    missing = [m for m in ("name", "rewards", "settings", "section") if not hasattr(obj, m)] + [
        m for m in ("reward_spec", "rows", "prompt", "budget", "score", "prefix_scorer", "verl_data")
        if not callable(getattr(obj, m, None))
    ]  # fmt: skip
    if missing:
        raise ValueError(f"task {name!r} ({target}) lacks {', '.join(missing)} of the task contract")
    task = obj() if isinstance(obj, type) else obj
    return task


def task_of_reward(reward: str) -> Task:
    """The registered task that offers ``reward`` (verl's reward entry point, given only the reward's name)."""
    for name in TASKS:
        if reward in get_task(name).rewards:
            return get_task(name)
    offered = ", ".join(r for n in TASKS for r in get_task(n).rewards)
    raise ValueError(f"no task offers the reward {reward!r}: one of {offered}")


def score_one(
    task: Task, solution: str, truth: str, reward: str | None, settings: Mapping[str, Any], info: Mapping[str, Any]
) -> dict[str, Any]:
    """verl's reward of one response for any task: ``score`` (the reward), its parts and the task's own numbers.
    The reward and each setting come from the keywords (``reward``, ``settings``), else from the sample's
    ``extra_info`` (``info``), else the task's first reward with default settings."""
    kind = reward or info.get("reward") or task.rewards[0]
    given = {k: settings.get(k) if settings.get(k) is not None else info.get(k) for k in task.settings}
    spec = task.reward_spec(kind, {k: v for k, v in given.items() if v is not None})
    [judged] = task.score(spec, [solution], [truth])
    parts = {k: v for k, v in judged.score.items() if k not in ("reason", "deltas")}
    return {**parts, **judged.extra, "score": judged.score.reward}

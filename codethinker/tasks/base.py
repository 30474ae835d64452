"""The task contract: what a trainer, an evaluator and a reward ask of a task, so they never ask which task it is.

A task is a kind of question a policy learns to answer (trace a program to its output, write a program, ...).
It says:

- its **rows**: ``{"id", "source", "prompt", "truth", ...}`` read from the stage's data file (``split``: the
  rows of one split where the file holds several);
- its **rewards**, by name (the first is the default), each with the settings it reads from the training
  section (:attr:`Task.settings`, e.g. ``crm`` or ``judge``), as a :class:`RewardSpec`;
- how a row's **prompt** is rendered in a reward's format (:meth:`Task.prompt`);
- the **token budget** of an answer to some rows (:meth:`Task.budget`);
- how answers are **scored**, batched (:meth:`Task.score`): one :class:`Judged` per answer, whose
  :class:`~codethinker.rewards.score.Score` carries the reward and its parts under the same names for every
  task (``fmt``, ``r_proc``, ``r_res``, ``reward``, ``rcs``, ``answer_ok``) and whose ``extra`` carries the
  task's own per-answer numbers (a pass rate, a cycle count), which the trainer averages per step;
- DBS's **prefix scorer** of a row, where the task has one of its own (:meth:`Task.prefix_scorer`);
- its rows in **verl**'s parquet schema (:meth:`Task.verl_data`).

Tasks are found by name (:func:`codethinker.tasks.get_task`): a registered name (``output_prediction``,
``codegen``) or an import path ``package.module:attribute`` (a user's own task, no change to the package).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from codethinker.rewards.score import Score

__all__ = ["Judged", "RewardSpec", "Row", "Task", "mean_extras"]

Row = dict[str, Any]  # {"id", "source", "prompt" (chat messages), "truth" (a string the task reads), ...}


@runtime_checkable
class RewardSpec(Protocol):
    """A task's reward with its settings: what the rollout and verl need to know of it."""

    kind: str  # the reward's name (grpo.reward)

    @property
    def format(self) -> str: ...  # the prompt format (named in metrics)

    @property
    def stop(self) -> list[str]: ...  # stop strings that end a response

    @property
    def blocks(self) -> bool: ...  # whether DBS can branch inside a response

    @property
    def block_stop(self) -> list[str]: ...  # stop strings that end a DBS block

    def kwargs(self) -> dict[str, Any]: ...  # verl's reward_kwargs: {"reward": kind, ...its settings}


@dataclass(frozen=True)
class Judged:
    """One scored answer: its :class:`Score` and the task's own per-answer numbers."""

    score: Score
    extra: Mapping[str, float] = field(default_factory=dict)


@runtime_checkable
class Task(Protocol):
    name: str  # the name params.yaml picks it by
    rewards: tuple[str, ...]  # the rewards it offers; the first is the default
    settings: tuple[str, ...]  # the training section's keys its rewards read (GRPOParams fields)
    section: str  # the params.yaml section whose stage trains it (named in messages)

    def reward_spec(self, reward: str, settings: Mapping[str, Any]) -> RewardSpec:
        """The checked reward ``reward`` with ``settings`` (a ``ValueError`` names a wrong one)."""
        ...

    def rows(self, path: str | Path, split: str) -> list[Row]:
        """The rows of ``split`` in ``path`` (a ``ValueError`` names the file and row of a bad one)."""
        ...

    def prompt(self, row: Row, spec: RewardSpec) -> list[dict[str, str]]:
        """``row``'s chat prompt in ``spec``'s format."""
        ...

    def budget(self, model: str | Path, rows: Sequence[Row], spec: RewardSpec, thoughts: bool) -> int:
        """Tokens of ``model``'s tokenizer an answer to ``rows`` may take (``thoughts``: the policy writes
        thoughts before its answer)."""
        ...

    def score(self, spec: RewardSpec, texts: Sequence[str], truths: Sequence[str]) -> list[Judged]:
        """Each answer against its row's truth, batched (one sandbox call where the task runs programs)."""
        ...

    def prefix_scorer(self, spec: RewardSpec) -> Callable[[str], Callable[[str], float]] | None:
        """DBS's scorer of a response prefix, per truth; None: the rollout's ConTra PRM."""
        ...

    def verl_data(self, path: str | Path, out_dir: Path, spec: RewardSpec) -> Path:
        """The training rows as verl's parquet (``data_source``, ``prompt``, ``reward_model.ground_truth``,
        ``extra_info``), written under ``out_dir`` unless ``path`` already is one in ``spec``'s format."""
        ...


def mean_extras(judged: Sequence[Judged]) -> dict[str, float]:
    """The mean of each ``extra`` number over ``judged`` (an answer without the key counts 0).

    >>> zero = Score(0, 0.0, 0.0, 0.0, 0.0, 0)
    >>> mean_extras([Judged(zero, {"pass_rate": 1.0}), Judged(zero)])
    {'pass_rate': 0.5}
    """
    keys = dict.fromkeys(k for j in judged for k in j.extra)
    n = max(len(judged), 1)
    return {k: sum(float(j.extra.get(k, 0.0)) for j in judged) / n for k in keys}

"""What a generalization benchmark is: its items, its verdicts, the :class:`Task` protocol and the registry.

The judges (:mod:`codethinker.evaluation.codegen`, ``mathbench``, ``reval_tasks``, ``multilingual``,
``input_prediction``) import this module only; :mod:`codethinker.evaluation.generalize` runs them (it names
every judge's module, imported on first use). So a stage that uses one judge, the code-generation reward's,
depends on that judge and not on the others (``scripts/stage_deps.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["CRUXEVAL_X_LANGUAGES", "TASKS", "Item", "Task", "Verdict", "register"]


@dataclass(frozen=True)
class Item:
    """One problem: its id, the chat prompt, and what the judge needs (plain JSON data)."""

    id: str
    messages: list[dict[str, str]]
    reference: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """The judgement of one generation. ``status``: ``pass``, ``fail``, ``no_answer`` (nothing could
    be extracted), ``timeout``, ``error`` (the program raised), ``memory``, ``killed``, ``runtime
    missing`` (the language's runtime is not on this machine), ``not_data`` (CRUXEval-I: an argument with no
    literal form)."""

    passed: bool
    status: str
    detail: str = ""


class Task(Protocol):
    """A generalization benchmark."""

    name: str  # canonical name (the --bench value, the metrics file name)
    display: str  # as in the paper's tables
    group: str  # the Table 4 column group: output, input, runtime, multilingual, codegen, math
    stop: tuple[str, ...]  # generation stops

    def load(self, mirror: Path | None, cache_dir: Path) -> list[Item]:
        """Every item of the benchmark, in the benchmark's order."""
        ...

    def judge(self, items: Sequence[Item], texts: Sequence[str]) -> list[Verdict]:
        """One verdict per (item, text), batched (a sandbox is opened once per call)."""
        ...

    def reference_text(self, item: Item) -> str:
        """The reference answer written as a model's response (the oracle check judges it)."""
        ...

    def unavailable(self) -> str | None:
        """Why the task cannot be judged on this machine (e.g. ``runtime missing: ruby``), or None.
        Such a benchmark is written as skipped with that reason, never scored 0."""
        ...


TASKS: dict[str, Callable[[], Task]] = {}
# CRUXEval-X's 19 languages (file stems of its data), one task each: cruxeval-x-<lang>
CRUXEVAL_X_LANGUAGES = (
    *("cpp", "cs", "d", "go", "java", "jl", "js", "lua", "php", "pl", "py", "r", "rb", "rkt", "rs", "scala", "sh"),
    *("swift", "ts"),
)


def register(name: str) -> Callable[[Callable[[], Task]], Callable[[], Task]]:
    """Decorator: ``@register("gsm8k")`` on a zero-argument factory of the task."""

    def deco(factory: Callable[[], Task]) -> Callable[[], Task]:
        TASKS[name] = factory
        return factory

    return deco

"""What every reward returns: one typed :class:`Score`, and the one batched (TRL-style) adapter.

Each reward (:func:`~codethinker.rewards.crm.crm_score`, :func:`~codethinker.rewards.orm.orm_score`,
:func:`~codethinker.rewards.whitebox.whitebox_score`) scores one response against its truth and returns
a :class:`Score`: the reward and its parts under the same names for every kind. A ``Score`` is also a
read-only mapping of those parts (``score["reward"]``, ``dict(score)``, in the order of :data:`KEYS`;
``deltas``, ``wb_acc`` and ``pass_rate`` only where the reward has them), the schema the CLI prints and verl logs.

:func:`batched` is the one batch entry point (TRL's ``reward_fn(completions, **kwargs) -> list[float]``
shape): one float per completion, truths as :class:`~codethinker.contra.tracer.Flow` or truth JSON.

>>> s = Score(fmt=1, r_proc=2.0, r_res=2.0, reward=4.0, rcs=1.0, answer_ok=1, deltas=[1])
>>> s.reward, s["reward"], list(s)
(4.0, 4.0, ['fmt', 'deltas', 'r_proc', 'r_res', 'reward', 'rcs', 'reason', 'answer_ok'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codethinker.contra.tracer import Flow

__all__ = ["KEYS", "Score", "as_flows", "batched"]

KEYS = ("fmt", "deltas", "r_proc", "r_res", "reward", "rcs", "reason", "answer_ok", "wb_acc", "pass_rate")
_OPTIONAL = ("deltas", "wb_acc", "pass_rate")  # keys only where the reward has them (None: absent)


@dataclass(frozen=True, eq=False)
class Score(Mapping[str, Any]):
    """One response's reward and its parts.

    ``fmt``: 1 when the response's format is valid; ``r_proc``: the process part (CRM's R_proc, the
    white-box ``2 * wb_acc``; 0 for ORM); ``r_res``: 2 when the answer is right (with a valid format);
    ``reward``: what the policy is paid; ``rcs``: the ConTra consistency of the response; ``answer_ok``:
    the answer is right; ``reason``: why the format is invalid (None when valid); ``deltas``: per truth
    block, 1 when its LOCALS are right; ``wb_acc``: the share of white-box questions answered right;
    ``pass_rate``: the share of a generated program's tests that pass (code generation).
    """

    fmt: int
    r_proc: float
    r_res: float
    reward: float
    rcs: float
    answer_ok: int
    reason: str | None = None
    deltas: list[int] | None = None
    wb_acc: float | None = None
    pass_rate: float | None = None

    def _keys(self) -> tuple[str, ...]:
        return tuple(k for k in KEYS if k not in _OPTIONAL or getattr(self, k) is not None)

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __eq__(self, other: object) -> bool:  # equal to a Score or a dict with the same parts
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Score({', '.join(f'{k}={v!r}' for k, v in self.items())})"


def as_flows(truths: Sequence[Flow | str]) -> list[Flow]:
    """Truths as Flows (truth JSON parsed)."""
    return [t if isinstance(t, Flow) else Flow.from_json(t) for t in truths]


def batched(
    score: Callable[[str, Flow], Score], completions: Sequence[str], truths: Sequence[Flow | str]
) -> list[float]:
    """The reward of each completion against its truth (``ValueError`` when the lengths differ)."""
    return [float(score(c, f).reward) for c, f in zip(completions, as_flows(truths), strict=True)]

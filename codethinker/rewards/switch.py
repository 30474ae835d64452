"""The reward as a switch (``grpo.reward``): CodeThinker's CRM or one of the two baselines (SPEC §8),
each with the prompt format its policy answers in.

- ``crm``: CodeThinker. CRM with the ``grpo.crm`` switches; the row's ConTra prompt (in the
  ``contra_sft.prompt`` style); a response ends at ``[/TRACE]``; DBS.
- ``orm``: CodeReasoner. 2 when the format holds and the assertion is right, else 0; the vanilla
  prompt (``[THOUGHT]`` then ``[ANSWER]``); ends at ``[/ANSWER]``; no DBS.
- ``whitebox``: ExecVerify. ``2 * ((1 - a) * io + a * wb_acc)`` when the assertion passes; the
  white-box prompt (numbered code, questions, ``[WHITEBOX]`` answers); ends at ``[/ANSWER]``; no DBS.

Prompts are rendered from the row's truth (the Flow JSON every GRPO row carries), so the GRPO data of
``contra_sft`` serves every reward and switching the reward reruns only the stages that train and
score with it. DBS splits a response at ConTra block ends (``[/LOCALS]``); the vanilla and white-box
formats have none (:attr:`RewardSpec.blocks`).

:meth:`RewardSpec.score` gives every reward the same :class:`~codethinker.rewards.score.Score`
(``fmt, r_proc, r_res, reward, rcs, answer_ok, reason``; ``wb_acc`` too for ``whitebox``); ``rcs``
always measures the ConTra consistency of the response (0 for an answer that is no ConTra trace), as
``codethinker score`` does. :data:`SCORERS` is the one dispatch from a kind to its reward (verl's
``default_compute_score`` is the model); :func:`reward` is the batched (TRL-style) adapter and
:func:`compute_score` the verl adapter of every kind.

In verl, ``default_compute_score`` picks a reward by the sample's ``data_source``. Here the run picks it
(``grpo.reward``): the GRPO data's ``data_source`` is the dataset's name (``contra_sft.data_source``,
``leetcode_reasoning``) whatever the reward, so :func:`compute_score` dispatches on the kind that verl's
``reward_kwargs`` (or the sample's ``extra_info``) carry, and refuses a kind it does not know.

>>> from codethinker.contra.tracer import Flow
>>> flow = Flow.from_json('{"entry": "f", "input": "1", "code": "def f(x):\\\\n    return x\\\\n",'
...     ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{\\'x\\': 1}"}], "output": "1"}')
>>> right = "[THOUGHT]\\nx is 1\\n[/THOUGHT]\\n[ANSWER]\\nassert f(1) == 1\\n[/ANSWER]"
>>> wrong = "[THOUGHT]\\n[/THOUGHT]\\n[ANSWER]\\nassert f(1) == 2\\n[/ANSWER]"
>>> reward([right, wrong, "junk"], [flow] * 3, kind="orm")
[2.0, 0.0, 0.0]
>>> reward([right], [flow], kind="crm")  # not a ConTra trace
[0.0]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from codethinker.config.loader import from_mapping
from codethinker.contra.render import ANSWER_CLOSE, LOCALS_CLOSE, TRACE_CLOSE, render_prompt, vanilla_prompt
from codethinker.contra.tracer import Flow
from codethinker.rewards.crm import CRMConfig, crm_score
from codethinker.rewards.orm import orm_score
from codethinker.rewards.score import Score, batched
from codethinker.rewards.whitebox import WhiteboxConfig, whitebox_prompt, whitebox_score

__all__ = ["FORMATS", "REWARDS", "SCORERS", "STOPS", "RewardSpec", "compute_score", "reward", "reward_spec"]

REWARDS = ("crm", "orm", "whitebox")
FORMATS = {"crm": "contra", "orm": "vanilla", "whitebox": "whitebox"}  # the prompt format of each reward
STOPS = {"crm": (TRACE_CLOSE,), "orm": (ANSWER_CLOSE,), "whitebox": (ANSWER_CLOSE,)}  # the end of a response
_VERL_KEYS = ("fmt", "r_proc", "r_res", "reward", "rcs", "answer_ok")  # the parts verl logs for every kind


@dataclass(frozen=True)
class RewardSpec:
    kind: str = field(
        default="crm", metadata={"help": "crm (CodeThinker) | orm (CodeReasoner) | whitebox (ExecVerify)"}
    )
    crm: CRMConfig = field(default_factory=CRMConfig, metadata={"help": "CRM switches (kind crm only)"})
    whitebox: WhiteboxConfig = field(
        default_factory=WhiteboxConfig, metadata={"help": "white-box a and k (kind whitebox only)"}
    )

    def __post_init__(self) -> None:
        if self.kind not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {self.kind!r}")

    @property
    def format(self) -> str:
        """The prompt format: ``contra``, ``vanilla`` or ``whitebox``."""
        return FORMATS[self.kind]

    @property
    def stop(self) -> list[str]:
        """The stop strings that end a response in this format."""
        return list(STOPS[self.kind])

    @property
    def blocks(self) -> bool:
        """Whether responses have ConTra blocks (what DBS branches on)."""
        return self.kind == "crm"

    @property
    def block_stop(self) -> list[str]:
        """The end of a ConTra block (``[/LOCALS]``), where DBS branches."""
        return [LOCALS_CLOSE]

    def prompt(self, flow: Flow, contra: list[dict[str, str]] | None = None) -> list[dict[str, str]]:
        """The chat prompt for ``flow``; ``contra``: the row's ConTra prompt (kept for ``crm``, in the style
        contra_sft wrote it; rendered ``instruct`` when missing)."""
        if self.kind == "orm":
            return vanilla_prompt("\n".join(flow.lines), flow.entry, flow.input)
        if self.kind == "whitebox":
            return whitebox_prompt(flow, self.whitebox.k)
        return [dict(m) for m in contra] if contra is not None else render_prompt(flow)

    def score(self, text: str, flow: Flow) -> Score:
        """One response's reward and its parts (no ``deltas``; ``rcs``: the ConTra consistency)."""
        out = SCORERS[self.kind](text, flow, self)
        rcs = out.rcs if self.kind == "crm" else crm_score(text, flow).rcs
        return dataclasses.replace(out, rcs=rcs, deltas=None)

    def kwargs(self) -> dict[str, Any]:
        """What the reward needs besides the response and the truth, as verl's ``reward_kwargs``:
        ``{"reward": kind}`` plus the kind's own settings (``crm`` switches or ``whitebox`` a, k)."""
        if self.kind == "crm":
            return {"reward": "crm", "crm": asdict(self.crm)}
        if self.kind == "whitebox":
            return {"reward": "whitebox", "whitebox": asdict(self.whitebox)}
        return {"reward": "orm"}


SCORERS: dict[str, Callable[[str, Flow, RewardSpec], Score]] = {
    "crm": lambda text, flow, spec: crm_score(text, flow, spec.crm),
    "orm": lambda text, flow, spec: orm_score(text, flow),
    "whitebox": lambda text, flow, spec: whitebox_score(text, flow, spec.whitebox.a, spec.whitebox.k),
}  # kind -> its reward, with the kind's settings


def reward_spec(
    kind: str | None = "crm", crm: Mapping[str, Any] | None = None, whitebox: Mapping[str, Any] | None = None
) -> RewardSpec:
    """A checked :class:`RewardSpec` from params (``grpo.reward``, ``grpo.crm``, ``grpo.whitebox``); a
    misspelled kind or setting is a ``ValueError``."""
    return RewardSpec(
        kind or "crm", from_mapping(CRMConfig, crm, "crm"), from_mapping(WhiteboxConfig, whitebox, "whitebox")
    )


def reward(
    completions: Sequence[str],
    truths: Sequence[Flow | str],
    kind: str = "crm",
    crm: Mapping[str, Any] | None = None,
    whitebox: Mapping[str, Any] | None = None,
    **_: Any,
) -> list[float]:
    """Batched pure reward (TRL style): one float per completion, by the reward ``kind``; truths as Flow
    or truth JSON."""
    return batched(reward_spec(kind, crm, whitebox).score, completions, truths)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    reward: str | None = None,
    crm: Mapping[str, Any] | None = None,
    whitebox: Mapping[str, Any] | None = None,
    reflexicoder: Mapping[str, Any] | None = None,
    judge: Mapping[str, Any] | None = None,
    reward_model: str | None = None,
) -> dict[str, Any]:
    """verl's reward entry point for any kind: ``score`` plus its parts (the same keys for every kind,
    ``wb_acc`` added for ``whitebox``). The kind and settings come from the keywords (verl's
    ``reward_kwargs``), else from ``extra_info`` (``reward``, ``crm``, ``whitebox``), else CRM. A
    code-generation kind (``codegen_outcome``, ``reflexicoder``, ``cg_grpo``, ``cg_grpo_ungated``,
    ``recode_outcome``) goes to :func:`codethinker.rewards.codegen_switch.compute_score` with ``reflexicoder``,
    ``judge`` and ``reward_model`` (the truth is the problem's JSON)."""
    info = dict(extra_info or {})
    kind = reward or info.get("reward")
    if kind is not None and kind not in REWARDS:
        from codethinker.rewards import codegen_switch

        if kind in codegen_switch.CODEGEN_REWARDS:
            return codegen_switch.compute_score(
                data_source, solution_str, ground_truth, extra_info, kind, reflexicoder, judge, reward_model
            )
    spec = reward_spec(
        reward or info.get("reward"),
        crm if crm is not None else info.get("crm"),
        whitebox if whitebox is not None else info.get("whitebox"),
    )
    flow = Flow.from_json(ground_truth)
    out = spec.score(solution_str, flow)
    result = {k: out[k] for k in _VERL_KEYS}
    result["score"] = out.reward
    result["n_blocks"] = len(flow.blocks)
    if out.wb_acc is not None:
        result["wb_acc"] = out.wb_acc
    return result

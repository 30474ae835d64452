"""Scripted engines for the harness's sanity checks: they answer through the same Engine contract
(chat template, ``continue_prefixes``) that vLLM and transformers implement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from codethinker.contra.render import assertion, render_trace
from codethinker.engines.base import Completion
from codethinker.evaluation.benchmarks import Sample
from codethinker.evaluation.harness import prompt_messages


def _template(messages: list[dict[str, str]]) -> str:
    return "".join(f"<|{m['role']}|>{m['content']}" for m in messages) + "<|assistant|>"


def oracle_text(sample: Sample, fmt: str) -> str:
    """The ground truth written in the format's answer syntax."""
    if fmt == "contra":
        return render_trace(sample.flow, ["Run the block."] * len(sample.flow.blocks))
    return f"[THOUGHT]\nRun it.\n[/THOUGHT]\n[ANSWER]\n{assertion(sample.flow)}\n[/ANSWER]"


def constant_text(sample: Sample, fmt: str, literal: str = "None") -> str:
    """A model that always answers ``literal`` (the call is right, the output is fixed)."""
    if fmt == "contra":
        return f"[TRACE]\n[RETURN]\n{assertion(sample.flow, literal)}\n[/RETURN]\n[/TRACE]"
    return f"[THOUGHT]\n[/THOUGHT]\n[ANSWER]\n{assertion(sample.flow, literal)}\n[/ANSWER]"


@dataclass
class LookupEngine:
    """Answers each prompt with ``answer(sample)``; the prompt identifies the sample."""

    samples: Sequence[Sample]
    fmt: str
    answer: Callable[[Sample, str], str]
    calls: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_prompt = {self.apply_chat_template(prompt_messages(s, self.fmt)): s for s in self.samples}

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return _template(messages)

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        self.calls.append(
            {
                "n_prefixes": len(prefixes),
                "n": n,
                "stop": list(stop),
                "seed": seed,
                "temperature": temperature,
                "max_tokens": max_tokens,
            }
        )
        out = []
        for p in prefixes:
            text = self.answer(self._by_prompt[p], self.fmt)
            out.append([Completion(text=text, n_tokens=len(text.split()), finish_reason="stop")] * n)
        return out

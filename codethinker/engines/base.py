"""The generation-engine contract shared by DBS, GRPO rollouts and evaluation.

An engine continues raw text prefixes (the chat template already applied) ``n`` times each,
stopping at any of ``stop`` (the stop string is kept in the text) or at ``max_tokens``.
Implementations: ``vllm.py`` (vLLM, CPU or CUDA build), ``hf.py`` (transformers' generate),
``openai.py`` (any OpenAI-compatible server), and scripted engines in tests.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["Completion", "Engine", "PrefixRequest", "Program", "continue_requests", "one_call", "run_programs"]


@dataclass(frozen=True)
class Completion:
    text: str  # the continuation only: whole sampled tokens, so a matched stop string and the rest of its token
    n_tokens: int  # tokens generated for this continuation
    finish_reason: Literal["stop", "length"]  # stop string (or EOS) vs. max_tokens


@dataclass(frozen=True)
class PrefixRequest:
    """The arguments of one :meth:`Engine.continue_prefixes` call, for an engine that runs several calls as
    one batch (``continue_requests``, optional: vLLM's and transformers' engines have it; DBS uses it for a
    round's calls through :func:`continue_requests`)."""

    prefixes: list[str]
    n: int
    stop: list[str]
    max_tokens: int
    temperature: float = 1.0
    seed: int | None = None


@runtime_checkable
class Engine(Protocol):
    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        """Render chat messages to the prompt text the model continues (generation prompt added)."""
        ...

    def continue_prefixes(
        self,
        prefixes: list[str],
        n: int,
        *,
        stop: list[str],
        max_tokens: int,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        """Return ``n`` continuations for every prefix, in order."""
        ...


# A sampling program: yields the engine calls it needs next (objects with PrefixRequest's attributes), receives
# their continuations (per request, per prefix, n each) and returns its result. DBS is one (DBSRun.program).
Program = Generator[list[Any], list[list[list[Completion]]], Any]


def run_programs(engine: Any, programs: list[Program]) -> list[Any]:
    """Run sampling programs to their ends; their results, in order. An engine with ``interleave`` (vLLM's)
    runs them concurrently: each program's next calls join the engine's running batch as soon as its
    previous ones finish, so regular samples and DBS rounds share the engine's steps. Otherwise each program
    runs in turn, a step's calls as one ``continue_requests`` batch where the engine has it, else one
    ``continue_prefixes`` call each.

    >>> run_programs(engine, [one_call(PrefixRequest(["p"], 2, ["."], 8)), dbs_run.program()])  # doctest: +SKIP
    """
    interleave = getattr(engine, "interleave", None)
    if interleave is not None:
        return interleave(programs)
    out = []
    for prog in programs:
        value: Any = None
        try:
            while True:
                value = continue_requests(engine, prog.send(value))
        except StopIteration as done:
            out.append(done.value)
    return out


def continue_requests(engine: Any, requests: list[Any]) -> list[list[list[Completion]]]:
    """Several ``continue_prefixes`` calls (objects with :class:`PrefixRequest`'s attributes): one batch on an
    engine with ``continue_requests`` (vLLM's, transformers'), else one ``continue_prefixes`` call each (the
    OpenAI engine, scripted test engines). Results per request, in order."""
    batch = getattr(engine, "continue_requests", None)
    if batch is not None:
        return batch(list(requests))
    return [
        engine.continue_prefixes(
            r.prefixes, r.n, stop=r.stop, max_tokens=r.max_tokens, temperature=r.temperature, seed=r.seed
        )
        for r in requests
    ]


def one_call(request: Any) -> Program:
    """The program of one ``continue_prefixes`` call: its continuations, per prefix."""
    results = yield [request]
    return results[0]

"""The generation-engine contract shared by DBS, GRPO rollouts and evaluation.

An engine continues raw text prefixes (the chat template already applied) ``n`` times each,
stopping at any of ``stop`` (the stop string is kept in the text) or at ``max_tokens``.
Implementations: ``vllm.py`` (vLLM, CPU or CUDA build), ``hf.py`` (transformers' generate),
``openai.py`` (any OpenAI-compatible server), and scripted engines in tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ["Completion", "Engine", "PrefixRequest"]


@dataclass(frozen=True)
class Completion:
    text: str  # the continuation only: whole sampled tokens, so a matched stop string and the rest of its token
    n_tokens: int  # tokens generated for this continuation
    finish_reason: Literal["stop", "length"]  # stop string (or EOS) vs. max_tokens


@dataclass(frozen=True)
class PrefixRequest:
    """The arguments of one :meth:`Engine.continue_prefixes` call, for an engine that runs several calls as
    one batch (``continue_requests``, optional: vLLM's engine has it; DBS uses it for a round's calls)."""

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

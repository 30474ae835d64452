"""Any OpenAI-compatible completions server behind the :class:`~codethinker.engines.base.Engine` contract.

Uses the ``openai`` SDK's async client (``completions.create``, ``POST {base_url}/completions``)
with raw text prompts (the chat template is applied locally, with the model's tokenizer), ``n``
continuations per request, at most ``max_concurrency`` requests in flight (a request keeps its
slot through its retries). Retries are the SDK's own (``max_retries``): connection errors,
timeouts (``timeout_s`` per attempt), 408/409/429 and 5xx, with its exponential backoff (0.5 s
doubling up to 8 s, less up to 25 % jitter, or the server's ``Retry-After`` up to 2 min); any
other HTTP error fails at once with :class:`ServerError`. vLLM's own fields go in ``extra_body``.
Stop strings are kept in the text: vLLM servers are asked with
``include_stop_str_in_output``; for other servers the matched ``stop_reason`` (or the one stop
string of the request) is appended when the server reports a stop. Token counts come from the
per-token ``logprobs`` the engine requests (``logprobs=0``), else the local tokenizer.

>>> eng = OpenAIEngine("http://127.0.0.1:8000/v1", model="base", tokenizer="models/base")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from codethinker.engines.base import Completion
from codethinker.engines.hf import cut_at_stop
from codethinker.errors import CodethinkerError
from codethinker.openai_sdk import failure

__all__ = ["OpenAIEngine", "ServerError"]


class ServerError(CodethinkerError, RuntimeError):
    """The server kept failing after all retries, or answered a request with a client error."""


class OpenAIEngine:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        tokenizer: Any = None,
        api_key: str | None = None,
        max_concurrency: int = 8,
        max_retries: int = 5,
        timeout_s: float = 600.0,
        vllm_extras: bool = True,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "EMPTY")
        self.max_concurrency, self.max_retries = max_concurrency, max_retries
        self.timeout_s, self.vllm_extras = timeout_s, vllm_extras
        if isinstance(tokenizer, str | os.PathLike):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        self.tokenizer = tokenizer
        self.requests_sent = 0  # including retries (for tests and logs)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        if self.tokenizer is None:
            raise RuntimeError("OpenAIEngine needs tokenizer= to render chat messages to a prompt")
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    # -- one request ------------------------------------------------------------------------------
    async def _on_request(self, request: Any) -> None:
        self.requests_sent += 1  # each attempt the SDK sends, its retries included

    async def _post(self, client: Any, sem: asyncio.Semaphore, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The choices of one request, as the server sent them (``stop_reason`` kept or absent)."""
        import openai

        url = f"{self.base_url}/completions"
        async with sem:  # held through the SDK's retries and their backoff
            try:
                answer = await client.completions.create(**body)
            except (openai.APIError, ValueError) as exc:
                raise ServerError(failure(exc, url)) from None
        try:
            return [ch.to_dict() for ch in answer.choices or []]
        except (AttributeError, TypeError) as exc:  # a 200 that is not a completion
            raise ServerError(f"{url}: unreadable answer ({type(exc).__name__})") from None

    def _choice(self, ch: dict[str, Any], stop: list[str]) -> Completion:
        text = ch.get("text") or ""
        finish = "length" if ch.get("finish_reason") == "length" else "stop"
        if finish == "stop" and stop:
            cut, matched = cut_at_stop(text, stop)
            if matched is not None:
                text = cut
            elif isinstance(ch.get("stop_reason"), str):
                text += ch["stop_reason"]
            elif len(stop) == 1 and "stop_reason" not in ch:  # a server that strips its one stop string
                text += stop[0]
        lp = ch.get("logprobs") or {}
        if lp.get("tokens") is not None:
            n_tok = len(lp["tokens"])
        elif self.tokenizer is not None:
            n_tok = len(self.tokenizer.encode(text, add_special_tokens=False))
        else:
            n_tok = max(1, len(text) // 4)
        return Completion(text=text, n_tokens=n_tok, finish_reason=finish)

    async def _run(
        self, prefixes: list[str], n: int, stop: list[str], max_tokens: int, temperature: float, seed: int | None
    ) -> list[list[Completion]]:
        import openai

        sem = asyncio.Semaphore(self.max_concurrency)
        http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [self._on_request]})
        extra = {"include_stop_str_in_output": True, "skip_special_tokens": True} if self.vllm_extras else None
        async with openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key,
            max_retries=self.max_retries,
            timeout=self.timeout_s,
            http_client=http,
        ) as client:
            bodies = []
            for i, p in enumerate(prefixes):
                body: dict[str, Any] = {
                    "model": self.model,
                    "prompt": p,
                    "n": n,
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                    "logprobs": 0,
                    "extra_body": extra,
                }
                if stop:
                    body["stop"] = list(stop)
                if seed is not None:
                    body["seed"] = seed + i
                bodies.append(body)
            answers = await asyncio.gather(*(self._post(client, sem, b) for b in bodies))
        out = []
        for a in answers:
            choices = sorted(a, key=lambda c: c.get("index", 0))
            if len(choices) != n:
                raise ServerError(f"server returned {len(choices)} choices, asked for {n}")
            out.append([self._choice(c, stop) for c in choices])
        return out

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
        greedy = temperature <= 0
        coro = self._run(
            list(prefixes), 1 if greedy else n, list(stop), max_tokens, 0.0 if greedy else temperature, seed
        )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            rows = asyncio.run(coro)
        else:  # called from inside an event loop (e.g. a notebook): run in a helper thread
            box: dict[str, Any] = {}
            t = threading.Thread(target=lambda: box.setdefault("r", asyncio.run(coro)))
            t.start()
            t.join()
            rows = box["r"]
        return [r * n for r in rows] if greedy else rows

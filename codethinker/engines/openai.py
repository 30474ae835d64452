"""Any OpenAI-compatible completions server behind the :class:`~codethinker.engines.base.Engine` contract.

Uses ``POST {base_url}/completions`` with raw text prompts (the chat template is applied locally,
with the model's tokenizer), ``n`` continuations per request, at most ``max_concurrency``
requests in flight, and retries with exponential backoff (plus jitter) on connection errors,
timeouts, 408/409/429 and 5xx. Stop strings are kept in the text: vLLM servers are asked with
``include_stop_str_in_output``; for other servers the matched ``stop_reason`` (or the one stop
string of the request) is appended when the server reports a stop. Token counts come from the
per-token ``logprobs`` the engine requests (``logprobs=0``), else the local tokenizer.

>>> eng = OpenAIEngine("http://127.0.0.1:8000/v1", model="base", tokenizer="models/base")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from typing import Any

from codethinker.engines.base import Completion
from codethinker.engines.hf import cut_at_stop
from codethinker.errors import CodethinkerError

__all__ = ["OpenAIEngine", "ServerError"]

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


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
        backoff_s: float = 0.5,
        timeout_s: float = 600.0,
        vllm_extras: bool = True,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "EMPTY")
        self.max_concurrency, self.max_retries = max_concurrency, max_retries
        self.backoff_s, self.timeout_s, self.vllm_extras = backoff_s, timeout_s, vllm_extras
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
    async def _post(self, client: Any, sem: asyncio.Semaphore, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        last: str = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random()))
            async with sem:
                self.requests_sent += 1
                try:
                    r = await client.post(f"{self.base_url}/completions", json=body)
                except (httpx.TransportError, httpx.TimeoutException) as exc:
                    last = f"{type(exc).__name__}: {exc}"
                    continue
            if r.status_code in RETRY_STATUS:
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                continue
            if r.status_code >= 400:
                raise ServerError(f"{self.base_url}/completions: HTTP {r.status_code}: {r.text[:500]}")
            return r.json()
        raise ServerError(f"{self.base_url}/completions failed after {self.max_retries + 1} tries: {last}")

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
        import httpx

        sem = asyncio.Semaphore(self.max_concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"}
        limits = httpx.Limits(max_connections=self.max_concurrency)
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=headers, limits=limits) as client:
            bodies = []
            for i, p in enumerate(prefixes):
                body: dict[str, Any] = {
                    "model": self.model,
                    "prompt": p,
                    "n": n,
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                    "logprobs": 0,
                }
                if stop:
                    body["stop"] = list(stop)
                if seed is not None:
                    body["seed"] = seed + i
                if self.vllm_extras:
                    body.update(include_stop_str_in_output=True, skip_special_tokens=True)
                bodies.append(body)
            answers = await asyncio.gather(*(self._post(client, sem, b) for b in bodies))
        out = []
        for a in answers:
            choices = sorted(a.get("choices", []), key=lambda c: c.get("index", 0))
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

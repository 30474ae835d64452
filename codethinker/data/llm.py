"""A chat client for any OpenAI-compatible endpoint (``vllm serve Qwen/Qwen3-32B`` in the paper).

Used by the ``llm`` backends of gen_inputs, contra_sft and crpl_data. Requests go through the
``openai`` SDK's client (``chat.completions.create``); :meth:`ChatClient.complete_many` runs them on
``max_concurrency`` threads. Retries are the SDK's own (``max_retries``): connection errors,
timeouts (``timeout_s`` per attempt), 408, 409, 429 and 5xx, with its exponential backoff (0.5 s
doubling up to 8 s, less up to 25 % jitter, or the server's ``Retry-After`` when it sends one up to
2 min); any other HTTP error fails at once. Every answer is cached on disk under a key of (model,
messages, sampling parameters), so a rerun of a stage pays only for prompts it has not asked before.

>>> client = ChatClient(ChatConfig(base_url="http://127.0.0.1:8000/v1", model="m"), cache_dir=None)
>>> client.cache_key([{"role": "user", "content": "hi"}])[:8]  # doctest: +SKIP
'3f2a...'
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codethinker.data.io import atomic_write
from codethinker.errors import CodethinkerError
from codethinker.openai_sdk import attempts, failure

__all__ = ["ChatClient", "ChatConfig", "LLMError"]

Messages = list[dict[str, str]]


class LLMError(CodethinkerError, RuntimeError):
    """A request failed for good (after retries, or with an answer that cannot be read)."""


@dataclass(frozen=True)
class ChatConfig:
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "Qwen/Qwen3-32B"
    api_key_env: str = "OPENAI_API_KEY"  # name of the variable holding the key (none needed for vLLM)
    max_concurrency: int = 8
    max_retries: int = 4  # the SDK's retries after the first attempt
    timeout_s: float = 300.0  # per attempt
    temperature: float = 0.7
    max_tokens: int = 2048
    seed: int | None = 0
    extra_body: dict[str, Any] = field(default_factory=dict)  # e.g. chat_template_kwargs


class ChatClient:
    """Thread-safe; ``stats`` counts requests (each attempt), cache hits, retries and failures."""

    def __init__(self, config: ChatConfig, cache_dir: str | os.PathLike[str] | None):
        self.config = config
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._sdk: Any = None

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def cache_key(self, messages: Messages) -> str:
        c = self.config
        material = {
            "model": c.model,
            "messages": messages,
            "temperature": c.temperature,
            "max_tokens": c.max_tokens,
            "seed": c.seed,
            "extra_body": c.extra_body,
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _cache_path(self, key: str) -> Path | None:
        return self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir is not None else None

    def _on_request(self, request: Any) -> None:
        """Counts every attempt the SDK sends; its retries carry ``x-stainless-retry-count`` > 0."""
        self._count("requests")
        if attempts(request) > 1:
            self._count("retries")

    def _client(self) -> Any:
        import openai

        with self._lock:  # one SDK client (and connection pool) for every thread
            if self._sdk is not None:
                return self._sdk
            c = self.config
            self._sdk = openai.OpenAI(
                base_url=c.base_url,
                api_key=os.environ.get(c.api_key_env) or "EMPTY",  # the SDK needs one; vLLM ignores it
                max_retries=c.max_retries,
                timeout=c.timeout_s,
                http_client=openai.DefaultHttpxClient(event_hooks={"request": [self._on_request]}),
            )
        return self._sdk

    def _request(self, messages: Messages) -> str:
        import openai

        c = self.config
        url = c.base_url.rstrip("/") + "/chat/completions"
        try:
            resp = self._client().chat.completions.create(
                model=c.model,
                messages=messages,
                temperature=c.temperature,
                max_tokens=c.max_tokens,
                seed=c.seed if c.seed is not None else openai.omit,
                extra_body=c.extra_body or None,
            )
        except (openai.APIError, ValueError) as exc:
            raise LLMError(failure(exc, url)) from None
        try:
            content = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:  # a 200 that is not a chat completion
            raise LLMError(f"{url}: unreadable answer ({type(exc).__name__})") from None
        return content if isinstance(content, str) else ""

    def complete(self, messages: Messages) -> str:
        """The model's answer to ``messages`` (from the cache when asked before)."""
        key = self.cache_key(messages)
        path = self._cache_path(key)
        if path is not None and path.is_file():
            try:
                text = json.loads(path.read_text(encoding="utf-8"))["text"]
                self._count("cache_hits")
                return text
            except (ValueError, KeyError, OSError):
                pass  # a damaged cache entry is asked again
        text = self._request(messages)
        if path is not None:
            with atomic_write(path) as fh:
                json.dump({"model": self.config.model, "messages": messages, "text": text}, fh, ensure_ascii=False)
        return text

    def complete_many(self, batch: list[Messages]) -> list[str | None]:
        """Answers in order; ``None`` (and ``stats['failures']``) where a request failed for good."""

        def one(messages: Messages) -> str | None:
            try:
                return self.complete(messages)
            except LLMError as exc:
                self._count("failures")
                with self._lock:
                    self.last_error = str(exc)
                return None

        with ThreadPoolExecutor(max_workers=max(1, self.config.max_concurrency)) as pool:
            return list(pool.map(one, batch))

    last_error: str = ""

    def close(self) -> None:
        if self._sdk is not None:
            self._sdk.close()
            self._sdk = None

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self.config).items() if k != "api_key_env"}

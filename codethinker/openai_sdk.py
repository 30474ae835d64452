"""What the project reads from the ``openai`` SDK's errors, for both of its OpenAI-compatible clients
(:mod:`codethinker.data.llm`, :mod:`codethinker.engines.openai`): how many attempts a request took and one
line that says why it failed.

>>> class R:  # a request as the SDK sends it
...     headers = {"x-stainless-retry-count": "2"}
>>> attempts(R())
3
"""

from __future__ import annotations

from typing import Any

__all__ = ["RETRIED_STATUS", "attempts", "failure"]

RETRIED_STATUS = (408, 409, 429)  # and every 5xx: the statuses the SDK retries


def attempts(request: Any) -> int:
    """How many times the SDK has sent ``request``: 1 + the ``x-stainless-retry-count`` header it adds."""
    try:
        return int(request.headers.get("x-stainless-retry-count", 0)) + 1
    except (AttributeError, ValueError):
        return 1


def failure(exc: Exception, url: str) -> str:
    """One line for an exception of an SDK call to ``url``: a status the SDK does not retry, with the answer's
    start; the attempts a retried failure took; an answer the SDK could not read."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        n, status = attempts(exc.request), exc.status_code
        if n == 1 and status not in RETRIED_STATUS and status < 500:
            return f"{url}: HTTP {status}: {exc.response.text[:300]}"
        return f"{url}: failed after {n} attempts (HTTP {status}: {exc.response.text[:300]})"
    if isinstance(exc, openai.APIConnectionError):  # also APITimeoutError
        why = f"{type(exc).__name__}: {exc}" + (f" ({exc.__cause__!r})" if exc.__cause__ else "")
        return f"{url}: failed after {attempts(exc.request)} attempts ({why})"
    return f"{url}: unreadable answer ({type(exc).__name__})"  # a body the SDK cannot decode

"""A scripted engine for DBS tests: continuations come from a function, every call is recorded."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from codethinker.engines.base import Completion

# (prefix, k-th continuation of this prefix in this call, segment id) -> (text, n_tokens, finish_reason)
Script = Callable[[str, int, int], tuple[str, int, str]]


@dataclass
class ScriptedEngine:
    script: Script
    calls: list[dict] = field(default_factory=list)
    segment_tokens: dict[int, int] = field(default_factory=dict)  # segment id -> tokens returned
    _ids: itertools.count = field(default_factory=itertools.count)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        self.calls.append(
            {
                "prefixes": list(prefixes),
                "n": n,
                "stop": list(stop),
                "max_tokens": max_tokens,
                "temperature": temperature,
            }
        )
        out = []
        for p in prefixes:
            row = []
            for k in range(n):
                sid = next(self._ids)
                text, n_tok, finish = self.script(p, k, sid)
                if n_tok > max_tokens:  # cut at the length limit (the text keeps its id marker)
                    text, n_tok, finish = text.split(">")[0] + ">", max_tokens, "length"
                self.segment_tokens[sid] = n_tok
                row.append(Completion(text=text, n_tokens=n_tok, finish_reason=finish))
            out.append(row)
        return out

    @property
    def drawn(self) -> int:
        return sum(len(c["prefixes"]) * c["n"] for c in self.calls)

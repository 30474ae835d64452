"""transformers' ``generate`` behind the :class:`~codethinker.engines.base.Engine` contract.

The fallback where vLLM does not run, and the engine that samples straight from a live training
model (``HFEngine(model_obj, tokenizer)``: each call uses the weights as they are now). Stop
strings are matched on the decoded text: generation stops once every sequence of the batch has
one (``StoppingCriteria``), then each completion ends with the token that completes its first stop
string: the stop string is kept, as the contract says, and so is the rest of that token (``]\n`` for
the stop ``]``), so that a continuation of the text is encoded as it was sampled.

>>> eng = HFEngine("models/base")  # doctest: +SKIP
>>> eng.continue_prefixes([eng.apply_chat_template([{"role": "user", "content": "hi"}])], 2,
...                       stop=["[/TRACE]"], max_tokens=32)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codethinker.engines.base import Completion

__all__ = ["HFEngine", "cut_at_stop"]


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, str | None]:
    """Cut ``text`` right after the earliest stop string; returns (text, matched stop or None)."""
    best: tuple[int, str] | None = None
    for s in stop:
        if not s:
            continue
        i = text.find(s)
        if i >= 0 and (best is None or i + len(s) < best[0] + len(best[1])):
            best = (i, s)
    if best is None:
        return text, None
    return text[: best[0] + len(best[1])], best[1]


class HFEngine:
    """Generate with a transformers causal LM (a path/id, or a loaded model + tokenizer)."""

    def __init__(
        self, model: Any, tokenizer: Any = None, *, device: str | None = None, dtype: str = "auto", batch_size: int = 16
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, str | Path):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(model))
            kwargs: dict[str, Any] = {} if dtype == "auto" else {"dtype": getattr(torch, dtype)}
            model = AutoModelForCausalLM.from_pretrained(str(model), **kwargs)
            model.eval()
            if device:
                model.to(device)
        elif isinstance(tokenizer, str | Path):
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        if tokenizer is None:
            raise ValueError("HFEngine needs a tokenizer with a loaded model")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self._eos = self._eos_ids()

    def _eos_ids(self) -> list[int]:
        ids: set[int] = set()
        gc = getattr(self.model, "generation_config", None)
        for src in (
            getattr(gc, "eos_token_id", None),
            self.tokenizer.eos_token_id,
            self.tokenizer.convert_tokens_to_ids("<|im_end|>"),
        ):
            if isinstance(src, int) and src >= 0:
                ids.add(src)
            elif isinstance(src, list):
                ids.update(i for i in src if isinstance(i, int))
        return sorted(ids)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _count_to(self, ids: list[int], target: str) -> int:
        """Fewest leading tokens whose decoded text is at least ``target`` (binary search)."""
        lo, hi = 1, len(ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(self.tokenizer.decode(ids[:mid], skip_special_tokens=True)) >= len(target):
                hi = mid
            else:
                lo = mid + 1
        return hi

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
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        tok, model = self.tokenizer, self.model
        greedy = temperature <= 0
        if seed is not None:
            torch.manual_seed(seed)
        # greedy decoding gives one answer: draw it once and repeat
        per_prompt = 1 if greedy else n
        prompt_len = 0

        class _Stops(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **_: Any) -> Any:
                gen = input_ids[:, prompt_len:]
                texts = tok.batch_decode(
                    gen[:, -max(8, 4 * max((len(s) for s in stop), default=1)) :], skip_special_tokens=True
                )
                return torch.tensor([any(s in t for s in stop) for t in texts], device=input_ids.device)

        out: list[list[Completion]] = []
        pad = tok.pad_token_id if tok.pad_token_id is not None else self._eos[0]
        old_side, tok.padding_side = tok.padding_side, "left"
        was_training = model.training
        model.eval()
        try:
            for b in range(0, len(prefixes), max(1, self.batch_size // per_prompt)):
                chunk = prefixes[b : b + max(1, self.batch_size // per_prompt)]
                enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
                enc = {k: v.to(model.device) for k, v in enc.items()}
                prompt_len = enc["input_ids"].shape[1]
                gen_kw = self._generate_kwargs(per_prompt, max_tokens, temperature, pad)
                if stop:
                    gen_kw["stopping_criteria"] = StoppingCriteriaList([_Stops()])
                with torch.no_grad():
                    seqs = model.generate(**enc, **gen_kw)
                gen = seqs[:, prompt_len:].tolist()
                for i in range(len(chunk)):
                    row = [self._completion(gen[i * per_prompt + j], stop, max_tokens) for j in range(per_prompt)]
                    out.append(row * n if greedy else row)
        finally:
            tok.padding_side = old_side
            if was_training:
                model.train()
        return out

    def _generate_kwargs(self, per_prompt: int, max_tokens: int, temperature: float, pad: int) -> dict[str, Any]:
        """``generate``'s arguments: greedy at temperature 0, else plain sampling (no top-k/top-p)."""
        sampling = (
            {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
            if temperature <= 0
            else {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        )
        return {
            "max_new_tokens": max_tokens,
            "num_return_sequences": per_prompt,
            "eos_token_id": self._eos,
            "pad_token_id": pad,
            **sampling,
        }

    def _completion(self, ids: list[int], stop: list[str], max_tokens: int) -> Completion:
        eos_at = next((k for k, t in enumerate(ids) if t in self._eos), None)
        if eos_at is not None:
            ids = ids[: eos_at + 1]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        cut, matched = cut_at_stop(text, stop)
        if matched is not None:  # whole tokens: a stop string can end inside one (``]`` of ``]\n``), and
            # a continuation of a cut token's text would be tokenized differently from what was sampled
            n = self._count_to(ids, cut)
            whole = self.tokenizer.decode(ids[:n], skip_special_tokens=True)
            return Completion(text=whole, n_tokens=n, finish_reason="stop")
        if eos_at is not None:
            return Completion(text=text, n_tokens=len(ids), finish_reason="stop")
        return Completion(text=text, n_tokens=len(ids), finish_reason="length" if len(ids) >= max_tokens else "stop")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            del self.model

"""transformers' ``generate`` behind the :class:`~codethinker.engines.base.Engine` contract.

The fallback where vLLM does not run, and the engine that samples straight from a live training
model (``HFEngine(model_obj, tokenizer)``: each call uses the weights as they are now). Stop
strings are matched on the decoded text: a sequence ends once its text has one (``StoppingCriteria``),
then each completion ends with the token that completes its first stop string: the stop string is kept,
as the contract says, and so is the rest of that token (``]\n`` for the stop ``]``), so that a continuation
of the text is encoded as it was sampled.

Batches: :meth:`HFEngine.continue_requests` runs several calls (a DBS round's groups, each with its own
``n``, token limit and stop strings) as one left-padded ``generate`` batch, in chunks of at most
``batch_size`` sequences; ``continue_prefixes`` is one such request. ``cache``: ``dynamic`` (transformers'
default), ``static`` (a cache allocated once per call for the prompt plus the largest limit) or
``compiled`` (static, and transformers compiles the decoding step with ``torch.compile``: CUDA only; limits
and prompt lengths are rounded up to multiples of 64 so that fewer shapes compile).

What a seed reproduces (:mod:`codethinker.engines.hf_batch`): every sequence samples from its own random
stream, seeded from its request's seed, its prefix's index and its sample's index (two-level Gumbel-max), so

- the same requests on the same weights, device, dtype and ``batch_size`` give the same completions, token for
  token; with seeds, torch's global generator is neither read nor moved (a request without a seed draws its
  seed from it, so ``torch.manual_seed`` reproduces that too);
- a sequence gets the same random draws alone as in any batch, in any chunk, next to any other requests: its
  completion equals that of its own call as long as its logits do. They did, greedy and sampled, on the tiny
  test model (``tests/engines/test_hf_batch.py``); in general a batch of another shape (more padding, another
  chunk) can change the logits in their last bits (other kernels), and a sampled token whose two best noisy
  scores are that close, or a greedy near tie, then differs, and the rest of that sequence with it (more
  often in bf16 than in fp32);
- not reproduced: another device, dtype, torch/transformers version or attention kernel; the samples of
  ``generate``'s own sampler (this engine's before it sampled per sequence), nor vLLM's for the same seed.

>>> eng = HFEngine("models/base")  # doctest: +SKIP
>>> eng.continue_prefixes([eng.apply_chat_template([{"role": "user", "content": "hi"}])], 2,
...                       stop=["[/TRACE]"], max_tokens=32)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codethinker.engines.base import Completion, PrefixRequest

__all__ = ["CACHES", "HFEngine", "cut_at_stop"]

CACHES = ("dynamic", "static", "compiled")  # HFEngine(cache=...): generate's KV cache


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
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str | None = None,
        dtype: str = "auto",
        batch_size: int = 16,
        cache: str = "dynamic",
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if cache not in CACHES:
            raise ValueError(f"the HF engine's cache must be one of {', '.join(CACHES)}, got {cache!r}")
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
        self.model, self.tokenizer, self.batch_size, self.cache = model, tokenizer, batch_size, cache
        if cache == "compiled" and model.device.type != "cuda":
            raise ValueError(
                f"cache compiled (a static cache and transformers' torch.compile of the decoding step) needs a CUDA "
                f"device: transformers compiles generate on accelerators only, and the model is on {model.device}; "
                "use cache static or dynamic"
            )
        self._eos = self._eos_ids()
        self._texts: list[str] | None = None

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

    def _token_texts(self) -> list[str]:
        """Each token's text alone (once per engine, about a second for Qwen2's 151,646): the stop criterion
        decodes a row only after a token that can end one of its stop strings."""
        if self._texts is None:
            self._texts = self.tokenizer.batch_decode(
                [[i] for i in range(len(self.tokenizer))], skip_special_tokens=True
            )
        return self._texts

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
        return self.continue_requests([PrefixRequest(list(prefixes), n, list(stop), max_tokens, temperature, seed)])[0]

    def continue_requests(self, requests: list[Any]) -> list[list[list[Completion]]]:
        """Several :meth:`continue_prefixes` calls (objects with its arguments as attributes) as one padded
        ``generate`` batch (chunks of at most ``batch_size`` sequences; one per temperature): every sequence
        runs to the batch's largest token limit at most and is cut to its own limit and its own stop strings,
        and samples from its own seed (:mod:`codethinker.engines.hf_batch`), so each request gets what it
        gets alone, up to float rounding of a batch of another shape. Results per request, in order."""
        from codethinker.engines.hf_batch import chunks, plan_rows

        rows = plan_rows(requests)
        got: dict[tuple[int, int, int], Completion] = {}
        for chunk in chunks(rows, self.batch_size):
            got.update(zip(((r.req, r.prefix, r.sample) for r in chunk), self._generate(chunk), strict=True))
        out = []
        for r_i, r in enumerate(requests):
            greedy = r.temperature <= 0
            out.append([[got[(r_i, p_i, 0 if greedy else k)] for k in range(r.n)] for p_i in range(len(r.prefixes))])
        return out

    def _generate(self, rows: list[Any]) -> list[Completion]:
        """One ``generate`` call for ``rows`` (one temperature): a completion per row."""
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        from codethinker.engines.hf_batch import STATIC_BUCKET, RowStops, SeededSampler, bucket

        tok, model = self.tokenizer, self.model
        temperature = rows[0].temperature
        steps = max(r.max_tokens for r in rows)
        compiled = self.cache == "compiled"  # fewer shapes: limits and prompt lengths rounded up
        pad = tok.pad_token_id if tok.pad_token_id is not None else self._eos[0]
        old_side, tok.padding_side = tok.padding_side, "left"
        was_training = model.training
        model.eval()
        try:
            enc = tok(
                [r.text for r in rows],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
                pad_to_multiple_of=STATIC_BUCKET if compiled else None,
            )
            enc = {k: v.to(model.device) for k, v in enc.items()}
            prompt_len = enc["input_ids"].shape[1]
            max_new = bucket(steps) if compiled else steps
            gen_kw = self._generate_kwargs(max_new, pad)
            texts = self._token_texts() if any(r.stop for r in rows) else None
            gen_kw["stopping_criteria"] = StoppingCriteriaList([RowStops(tok, rows, prompt_len, self._eos, texts)])
            if temperature > 0:  # each row from its own seed; generate picks the one token left (greedy)
                seeds = [r.seed for r in rows]
                sampler = SeededSampler(seeds, temperature, prompt_len)
                gen_kw["logits_processor"] = LogitsProcessorList([sampler])
            with torch.no_grad():
                seqs = model.generate(**enc, **gen_kw)
            gen = seqs[:, prompt_len:].tolist()
        finally:
            tok.padding_side = old_side
            if was_training:
                model.train()
        return [self._completion(ids, list(r.stop), r.max_tokens) for ids, r in zip(gen, rows, strict=True)]

    def _generate_kwargs(self, max_new: int, pad: int) -> dict[str, Any]:
        """``generate``'s arguments: greedy decoding (a sampled row's token is the one its
        :class:`~codethinker.engines.hf_batch.SeededSampler` left), the engine's KV cache."""
        kw: dict[str, Any] = {
            "max_new_tokens": max_new,
            "num_return_sequences": 1,
            "eos_token_id": self._eos,
            "pad_token_id": pad,
            "do_sample": False,
            "temperature": None,
            "top_p": None,
            "top_k": None,
        }
        if self.cache != "dynamic":  # static: a preallocated cache; compiled: transformers' own torch.compile
            kw["cache_implementation"] = "static"
            kw["disable_compile"] = self.cache == "static"
        return kw

    def _completion(self, ids: list[int], stop: list[str], max_tokens: int) -> Completion:
        ids = ids[:max_tokens]  # a row of a batch with a larger limit: pad tokens after its own limit
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

"""The parts of :meth:`HFEngine.continue_requests <codethinker.engines.hf.HFEngine.continue_requests>` that
run several engine calls as one padded ``generate`` batch: one :class:`Row` per sequence, each with its own
prefix, token limit, stop strings and seed; :class:`RowStops` ends each row at its own limit or stop string;
:class:`SeededSampler` draws each row's tokens from its own random stream.

Why a sampler of our own: ``generate`` samples every row of a batch from one random generator (torch's
global one), so a sequence's tokens depend on which other sequences share its batch, and a DBS round run as
one batch would sample other tokens than the same round run one call per group. Here each row draws its noise
from a ``torch.Generator`` seeded with its own seed (two-level Gumbel-max, :class:`SeededSampler`): a row's
tokens depend only on its seed and its own logits, whatever batch it is in. ``generate`` then runs greedy over
the one token left possible.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import torch
from transformers import LogitsProcessor, StoppingCriteria

__all__ = ["Row", "RowStops", "SeededSampler", "plan_rows", "row_seed"]

STATIC_BUCKET = 64  # compiled: token limits rounded up to this, so fewer shapes compile


@dataclass(frozen=True)
class Row:
    """One sequence of a batch: continuation ``sample`` of prefix ``prefix`` of request ``req``."""

    req: int
    prefix: int
    sample: int
    text: str
    stop: tuple[str, ...]
    max_tokens: int
    temperature: float
    seed: int


def row_seed(seed: int, prefix: int, sample: int) -> int:
    """The seed of continuation ``sample`` of prefix ``prefix`` of a request seeded ``seed`` (63 bits).

    >>> row_seed(7, 0, 1) == row_seed(7, 0, 1) != row_seed(7, 1, 0)
    True
    """
    digest = hashlib.blake2b(f"{seed}/{prefix}/{sample}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def plan_rows(requests: list[Any]) -> list[Row]:
    """The rows of ``requests`` (objects with :class:`~codethinker.engines.base.PrefixRequest`'s attributes),
    in order: ``n`` per prefix, or one at temperature 0 (greedy decoding gives one answer, repeated). A
    request without a seed gets one from torch's global generator (``torch.manual_seed`` reproduces it)."""
    rows = []
    for r_i, r in enumerate(requests):
        seed = r.seed if r.seed is not None else int(torch.randint(0, 2**62, ()).item())
        temperature = max(float(r.temperature), 0.0)
        per_prefix = 1 if temperature == 0 else r.n
        stop, limit = tuple(s for s in r.stop if s), max(int(r.max_tokens), 1)
        for p_i, text in enumerate(r.prefixes):
            for k in range(per_prefix):
                rows.append(Row(r_i, p_i, k, text, stop, limit, temperature, row_seed(seed, p_i, k)))
    return rows


def chunks(rows: list[Row], size: int) -> list[list[Row]]:
    """Consecutive rows of one temperature (``generate`` takes one), at most ``size`` (>= 1) per chunk."""
    out: list[list[Row]] = []
    for row in rows:
        if out and len(out[-1]) < max(size, 1) and out[-1][0].temperature == row.temperature:
            out[-1].append(row)
        else:
            out.append([row])
    return out


def bucket(n: int, size: int = STATIC_BUCKET) -> int:
    """``n`` rounded up to a multiple of ``size``."""
    return -(-n // size) * size


class RowStops(StoppingCriteria):
    """Ends each row at its own token limit or once its generated text holds one of its stop strings (looked
    for in the decoded tail, long enough to hold the longest stop). A stop string first appears with the token
    that writes its last character, so with ``token_texts`` (each token's text) a row's tail is decoded only
    after a token holding the last character of one of its ASCII stop strings; a row that ended is not decoded
    again."""

    def __init__(self, tokenizer: Any, rows: list[Row], prompt_len: int, eos: list[int], token_texts: Any = None):
        self.tok, self.prompt_len, self.eos, self.texts = tokenizer, prompt_len, set(eos), token_texts
        self.stops = [row.stop for row in rows]
        self.limits = [row.max_tokens for row in rows]
        # per row: the last characters of its stops, or None (decode every step: no texts, a non-ASCII ending)
        self.enders = [
            None if token_texts is None or any(not s[-1].isascii() for s in row.stop) else {s[-1] for s in row.stop}
            for row in rows
        ]
        self.tail = max(8, 4 * max((len(s) for row in rows for s in row.stop), default=1))
        self.done = [False] * len(rows)

    def _may_end(self, i: int, token: int) -> bool:
        enders = self.enders[i]
        if enders is None or token >= len(self.texts):
            return True
        return any(c in self.texts[token] for c in enders)

    def __call__(self, input_ids: Any, scores: Any, **_: Any) -> Any:
        made = input_ids.shape[1] - self.prompt_len
        last = input_ids[:, -1].tolist()
        look = []
        for i, done in enumerate(self.done):
            if done:
                continue
            if made >= self.limits[i] or (made > 0 and last[i] in self.eos):
                self.done[i] = True
            elif self.stops[i] and made > 0 and self._may_end(i, last[i]):
                look.append(i)
        if look:
            tails = input_ids[look, max(self.prompt_len, input_ids.shape[1] - self.tail) :]
            for i, text in zip(look, self.tok.batch_decode(tails, skip_special_tokens=True), strict=True):
                self.done[i] = any(s in text for s in self.stops[i])
        return torch.tensor(self.done, dtype=torch.bool, device=input_ids.device)


class SeededSampler(LogitsProcessor):
    """Samples each row's next token at ``temperature`` from the row's own random stream (a ``torch.Generator``
    seeded with the row's seed; step ``t`` of a row always takes the same uniforms), by the Gumbel-max trick in
    two levels, which is exact: the vocabulary in blocks of :attr:`BLOCK` tokens, a block drawn by the argmax of
    its log-sum-exp plus Gumbel noise, then a token of that block by the argmax of its logits plus Gumbel noise
    (the maximum of Gumbel-perturbed logits over a block is its log-sum-exp plus a Gumbel, and where the maximum
    falls is independent of it). An argmax moves only when a logit moves by as much as the gap between the two
    best perturbed scores, so the last bits a batch of another shape changes in the logits seldom move a sampled
    token, where a cumulative-probability draw moved one every few hundred tokens of a nearly uniform
    distribution (the tail's boundaries are 1e-6 apart and shift by the rounding of everything before them).
    Returns scores that leave the drawn token alone possible (``generate`` then runs greedy)."""

    BLOCK = 512  # tokens per block: noise per step is vocabulary / BLOCK + BLOCK numbers a row, not vocabulary
    WINDOW = 32  # steps of noise drawn at once per row

    def __init__(self, seeds: list[int], temperature: float, prompt_len: int):
        self.temperature, self.prompt_len = temperature, prompt_len
        self.gens = [torch.Generator().manual_seed(s) for s in seeds]
        self.noise: Any = None
        self.start = 0

    def _gumbel(self, t: int, n: int, device: Any) -> Any:
        """Gumbel noise of step ``t`` per row, ``n`` numbers (drawn a window of steps at a time, in order)."""
        if self.noise is None or t >= self.start + self.WINDOW:
            self.start = t - t % self.WINDOW
            u = torch.stack([torch.rand(self.WINDOW, n, generator=g) for g in self.gens]).to(device)
            self.noise = -torch.log(-torch.log(u.clamp_(min=torch.finfo(u.dtype).tiny)))
        return self.noise[:, t - self.start]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        t = input_ids.shape[1] - self.prompt_len
        rows, vocab = scores.shape
        size = self.BLOCK
        x = scores.float() / self.temperature
        probs = torch.softmax(x, dim=-1)
        whole = vocab // size * size
        mass = probs[:, :whole].view(rows, -1, size).sum(dim=-1)  # per block (a block's log mass: its
        if whole < vocab:  # log-sum-exp less the row's, which the argmax ignores); the last one ragged
            mass = torch.cat([mass, probs[:, whole:].sum(dim=-1, keepdim=True)], dim=1)
        blocks = mass.shape[1]
        g = self._gumbel(t, blocks + size, scores.device)
        block = torch.argmax(torch.log(mass) + g[:, :blocks], dim=-1, keepdim=True)
        idx = block * size + torch.arange(size, device=scores.device)
        inner = torch.gather(x, 1, idx.clamp(max=vocab - 1)).masked_fill_(idx >= vocab, -torch.inf)
        token = torch.gather(idx, 1, torch.argmax(inner + g[:, blocks:], dim=-1, keepdim=True))
        return torch.full_like(scores, -torch.inf).scatter_(1, token, 0.0)

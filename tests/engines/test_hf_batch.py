"""The HF engine's batched calls (``HFEngine.continue_requests``): a DBS round's groups as one padded ``generate``
batch get what each group's own call gets, on the tiny random Qwen2; the static KV cache decodes the same; the
per-row sampler draws from the softmax.

Two sets of weights: the ``tiny_model`` fixture as built (init std 0.02: nearly uniform next-token probabilities,
and greedy text that repeats a token or two) and the same model with its weights redrawn at std 0.08 (greedy
text that changes from token to token, so rows stop at different places; logits up to 4). Both are the hard
case for sampling the same tokens in a batch of another shape: the probabilities are spread over all 151,646
tokens, so a draw by cumulative probability (the sampler's first version) moved a token once in a few hundred
(3 of 32 sequences of a 1,446-token round); the two-level Gumbel-max draw moved none here.
"""

from __future__ import annotations

import pytest

from codethinker.engines.base import PrefixRequest, continue_requests
from codethinker.engines.hf import HFEngine
from codethinker.sampling.dbs import DBSConfig, dbs_sample

STOPS = ["e", "a"]  # frequent characters: the random model writes them soon, at different tokens per row


CASES = [("as_built", 0.0), ("as_built", 1.0), ("redrawn", 0.0), ("redrawn", 1.0)]  # (weights, temperature)


@pytest.fixture(scope="module")
def engines(tiny_model) -> dict[str, HFEngine]:
    import torch

    out = {"as_built": HFEngine(tiny_model, batch_size=64), "redrawn": HFEngine(tiny_model, batch_size=64)}
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in out["redrawn"].model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.08)
    return out


@pytest.fixture
def engine(engines) -> HFEngine:
    return engines["as_built"]


def a_round(eng: HFEngine, temperature: float, seed: int | None = 3) -> list[PrefixRequest]:
    """Requests shaped like a DBS round: groups of different budgets (n), token limits and prefix lengths."""
    prompts = [
        eng.apply_chat_template([{"role": "user", "content": c}])
        for c in ("trace f(1)", "def f(x):\n    return [x]\n", "hello there " * 6)
    ]
    groups = [  # (prefixes, n, max_tokens)
        ([prompts[0], prompts[1] + "so far"], 1, 9),
        ([prompts[2]], 2, 14),
        ([prompts[1], prompts[2] + "x = 1\n"], 3, 5),
        ([prompts[0] + "[LOCALS] x"], 4, 20),
    ]
    return [
        PrefixRequest(ps, n, list(STOPS), m, temperature, None if seed is None else seed + g)
        for g, (ps, n, m) in enumerate(groups)
    ]


def per_group(eng: HFEngine, reqs: list[PrefixRequest]) -> list:
    return [
        eng.continue_prefixes(
            r.prefixes, r.n, stop=r.stop, max_tokens=r.max_tokens, temperature=r.temperature, seed=r.seed
        )
        for r in reqs
    ]


def count_generate(eng: HFEngine, monkeypatch) -> list[int]:
    """Batch sizes of the model's ``generate`` calls, from now on."""
    sizes: list[int] = []
    real = eng.model.generate

    def spy(*a, **kw):
        sizes.append(int(kw["input_ids"].shape[0]))
        return real(*a, **kw)

    monkeypatch.setattr(eng.model, "generate", spy)
    return sizes


@pytest.mark.parametrize(("weights", "temperature"), CASES)
def test_a_round_as_one_batch_equals_one_call_per_group(engines, weights, temperature, monkeypatch):
    engine = engines[weights]
    reqs = a_round(engine, temperature)
    alone = per_group(engine, reqs)
    sizes = count_generate(engine, monkeypatch)
    batched = engine.continue_requests(reqs)
    assert batched == alone
    rows = sum(len(r.prefixes) * (1 if temperature == 0 else r.n) for r in reqs)
    assert sizes == [rows]  # one generate call for the whole round
    for r, out in zip(reqs, batched, strict=True):
        assert [len(row) for row in out] == [r.n] * len(r.prefixes)
        for row in out:
            for c in row:
                assert 1 <= c.n_tokens <= r.max_tokens
                assert c.finish_reason == "stop" or c.n_tokens == r.max_tokens
    ends = {(c.n_tokens, c.finish_reason) for out in batched for row in out for c in row}
    assert len(ends) >= 3 and "stop" in {f for _, f in ends}  # rows of one batch ended at different tokens


@pytest.mark.slow
@pytest.mark.parametrize(("weights", "temperature"), CASES)
def test_the_batch_size_cap_splits_a_round_into_chunks(engines, weights, temperature, monkeypatch):
    engine = engines[weights]
    reqs = a_round(engine, temperature)
    whole = engine.continue_requests(reqs)
    small = HFEngine(engine.model, engine.tokenizer, batch_size=4)
    sizes = count_generate(small, monkeypatch)
    assert small.continue_requests(reqs) == whole  # each row samples from its own seed, in any chunk
    assert sizes == ([4, 4, 4, 2] if temperature else [4, 2])  # 14 sequences, 6 prefixes greedy


def test_rows_are_decoded_only_after_a_token_that_can_end_a_stop(engines, monkeypatch):
    """The stop criterion decodes a row's tail only after a token holding a stop's last character: the same
    completions as decoding every row at every step, from fewer decodes."""
    engine = engines["redrawn"]
    reqs = a_round(engine, 1.0)
    decoded: list[int] = []
    real = engine.tokenizer.batch_decode

    def counting(seqs, **kw):
        decoded.append(len(seqs))
        return real(seqs, **kw)

    engine._token_texts()  # built before counting (it decodes every token once)
    monkeypatch.setattr(engine.tokenizer, "batch_decode", counting)
    filtered = engine.continue_requests(reqs)
    n_filtered = sum(decoded)
    decoded.clear()
    monkeypatch.setattr(engine, "_token_texts", lambda: None)
    assert engine.continue_requests(reqs) == filtered
    assert 0 < n_filtered < sum(decoded)


def test_the_sampler_draws_from_the_softmax_whatever_the_row():
    """Two-level Gumbel-max over a vocabulary of 3 blocks (the last ragged): each token as often as its
    probability, a token of probability 0 never; a row's draws follow its seed, not its place in the batch."""
    import torch

    from codethinker.engines.hf_batch import SeededSampler

    vocab, rows, steps = 2 * SeededSampler.BLOCK + 100, 250, 32
    logits = torch.full((vocab,), -torch.inf)
    picks = torch.tensor([3, 700, 1100, 1123])  # one token per block, and two in the ragged one
    logits[picks] = torch.tensor([0.0, 1.0, -1.0, 0.5])
    want = torch.softmax(logits[picks] / 0.5, dim=0)
    sampler = SeededSampler(list(range(rows)), 0.5, prompt_len=0)
    counts = torch.zeros(vocab)
    for t in range(steps):
        out = sampler(torch.zeros(rows, t, dtype=torch.long), logits.repeat(rows, 1))
        counts += (out == 0).sum(dim=0)
    n = rows * steps
    assert counts.sum() == n and counts[picks].sum() == n  # one token a row, never one of probability 0
    sd = (want * (1 - want) / n).sqrt()
    assert ((counts[picks] / n - want).abs() < 4 * sd).all(), (counts[picks] / n, want)
    again = SeededSampler([7, 3], 0.5, prompt_len=0)(torch.zeros(2, 0, dtype=torch.long), logits.repeat(2, 1))
    alone = SeededSampler([3], 0.5, prompt_len=0)(torch.zeros(1, 0, dtype=torch.long), logits.repeat(1, 1))
    assert torch.equal(again[1:], alone)


@pytest.mark.slow
def test_seeds_reproduce_and_a_request_without_one_follows_torchs_generator(engine):
    import torch

    reqs = a_round(engine, 1.0)
    assert engine.continue_requests(reqs) == engine.continue_requests(reqs)
    other = [PrefixRequest(r.prefixes, r.n, r.stop, r.max_tokens, r.temperature, r.seed + 100) for r in reqs]
    assert engine.continue_requests(other) != engine.continue_requests(reqs)
    torch.manual_seed(0)
    a = engine.continue_requests(a_round(engine, 1.0, seed=None))
    torch.manual_seed(0)
    assert engine.continue_requests(a_round(engine, 1.0, seed=None)) == a


@pytest.mark.slow
def test_the_engine_contracts_default_loops_for_an_engine_without_batches(engine):
    class PerCall:  # an engine with continue_prefixes only (OpenAI's, a test's scripted one)
        calls = 0

        def continue_prefixes(self, *a, **kw):
            self.calls += 1
            return engine.continue_prefixes(*a, **kw)

    reqs = a_round(engine, 0.0)
    plain = PerCall()
    assert continue_requests(plain, reqs) == continue_requests(engine, reqs) and plain.calls == len(reqs)
    assert continue_requests(engine, []) == []


@pytest.mark.slow
def test_dbs_on_the_batched_engine_gets_the_per_group_trajectories_in_fewer_calls(engine, monkeypatch):
    class PerCall:
        def continue_prefixes(self, *a, **kw):
            return engine.continue_prefixes(*a, **kw)

    prompts = a_round(engine, 1.0)[1].prefixes + a_round(engine, 1.0)[0].prefixes
    score = lambda text: float(len(text) % 3)  # noqa: E731  ties and losers: budgets split and dropped
    cfg = DBSConfig(budget=4, max_tokens=24, block_stop=["e"], final_stop=["a"], temperature=1.0, seed=5)
    sizes = count_generate(engine, monkeypatch)
    alone = dbs_sample(PerCall(), prompts, [score] * len(prompts), cfg)
    calls_alone = len(sizes)
    batched = dbs_sample(engine, prompts, [score] * len(prompts), cfg)
    assert [[c.text for c in r.completions] for r in batched] == [[c.text for c in r.completions] for r in alone]
    assert [(r.tokens_generated, r.tokens_dropped) for r in batched] == [
        (r.tokens_generated, r.tokens_dropped) for r in alone
    ]
    rounds = max(r.rounds for r in batched)
    assert len(sizes) - calls_alone == rounds < calls_alone  # one generate call a round


@pytest.mark.slow
@pytest.mark.parametrize(("weights", "temperature"), CASES)
def test_the_static_cache_decodes_what_the_dynamic_one_does(engines, weights, temperature):
    engine = engines[weights]
    static = HFEngine(engine.model, engine.tokenizer, batch_size=64, cache="static")
    reqs = a_round(engine, temperature)
    assert static.continue_requests(reqs) == engine.continue_requests(reqs)


def test_a_compiled_cache_needs_cuda(engine):
    with pytest.raises(ValueError, match="needs a CUDA device"):
        HFEngine(engine.model, engine.tokenizer, cache="compiled")
    with pytest.raises(ValueError, match="cache must be one of dynamic, static, compiled"):
        HFEngine(engine.model, engine.tokenizer, cache="paged")

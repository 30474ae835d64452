"""DBS (SPEC §5) against a scripted engine: allocation, finals, scoring, token accounting."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.sampling.dbs import DBSConfig, allocate, dbs_sample, dbs_sample_async

from .scripted import ScriptedEngine

BLOCK = "[/LOCALS]\n"
END = "[/TRACE]"


def n_blocks(text: str) -> int:
    return text.count("[/LOCALS]")


def test_allocate_ties_split_evenly_remainder_to_first():
    assert allocate([1.0, 3.0, 3.0, 0.0], 4) == [0, 2, 2, 0]
    assert allocate([3.0, 1.0, 3.0], 3) == [2, 0, 1]
    assert allocate([2.0, 2.0, 2.0], 5) == [2, 2, 1]
    assert allocate([5.0], 4) == [4]
    assert allocate([], 0) == []


def test_tie_splits_the_budget_between_the_top_prefixes():
    # round 1: continuations 0 and 2 score best (tie); round 2 everything finishes
    def script(prefix, k, sid):
        if n_blocks(prefix) == 0:
            return f"<s{sid} good={k in (0, 2)}>{BLOCK}", 5, "stop"
        return f"<s{sid}>{END}", 3, "stop"

    eng = ScriptedEngine(script)
    score = lambda t: 2.0 if "good=True" in t else 1.0  # noqa: E731
    [res] = dbs_sample(eng, ["P:"], [score], DBSConfig(budget=4, max_tokens=100))
    assert len(res.completions) == 4
    round2 = eng.calls[1:]
    assert [(len(c["prefixes"]), c["n"]) for c in round2] == [(2, 2)]  # two prefixes, two draws each
    assert all("good=True" in p for p in round2[0]["prefixes"])
    assert res.tokens_generated == 4 * 5 + 4 * 3
    assert res.tokens_dropped == 2 * 5  # the two low-scoring first blocks


def test_remainder_goes_to_the_first_tied_prefix():
    def script(prefix, k, sid):
        if n_blocks(prefix) == 0:
            return f"<s{sid} k={k}>{BLOCK}", 1, "stop"
        return f"<s{sid}>{END}", 1, "stop"

    eng = ScriptedEngine(script)
    score = lambda t: 1.0 if ("k=0" in t or "k=1" in t) else 0.0  # noqa: E731
    [res] = dbs_sample(eng, ["P:"], [score], DBSConfig(budget=5, max_tokens=100))
    per_parent = {}
    for c in eng.calls[1:]:
        for p in c["prefixes"]:
            per_parent[re.search(r"k=(\d)", p).group(1)] = c["n"]
    assert per_parent == {"0": 3, "1": 2}
    assert len(res.completions) == 5


def test_a_finished_trajectory_keeps_its_unit():
    def script(prefix, k, sid):
        if n_blocks(prefix) == 0 and k == 0:
            return f"<s{sid} early>{END}", 2, "stop"
        if n_blocks(prefix) == 0:
            return f"<s{sid}>{BLOCK}", 2, "stop"
        return f"<s{sid}>{END}", 2, "stop"

    eng = ScriptedEngine(script)
    [res] = dbs_sample(eng, ["P:"], [lambda t: 1.0], DBSConfig(budget=4, max_tokens=100))
    texts = [c.text for c in res.completions]
    assert len(texts) == 4 and sum("early" in t for t in texts) == 1
    # the three unfinished tied prefixes share the three remaining units: one each
    assert eng.drawn == 4 + 3
    assert res.tokens_dropped == 0


def test_a_broken_prefix_loses_to_a_consistent_one():
    def script(prefix, k, sid):
        if n_blocks(prefix) == 0:
            tag = "BROKEN" if k % 2 else "ok"
            return f"<s{sid} {tag}>{BLOCK}", 4, "stop"
        return f"<s{sid}>{END}", 1, "stop"

    eng = ScriptedEngine(script)
    score = lambda t: -1.0 if "BROKEN" in t else 0.0  # noqa: E731  # consistent-but-zero still wins
    [res] = dbs_sample(eng, ["P:"], [score], DBSConfig(budget=4, max_tokens=100))
    assert all("BROKEN" not in c.text for c in res.completions)
    assert res.tokens_dropped == 2 * 4


def test_eos_and_length_are_final_and_length_limit_holds():
    def script(prefix, k, sid):
        return f"<s{sid}>{BLOCK}", 30, "stop"  # never ends by itself

    eng = ScriptedEngine(script)
    [res] = dbs_sample(eng, ["P:"], [lambda t: float(n_blocks(t))], DBSConfig(budget=3, max_tokens=70))
    assert len(res.completions) == 3
    assert all(c.n_tokens <= 70 for c in res.completions)
    assert all(c["max_tokens"] <= 70 for c in eng.calls)
    # EOS: stopped without any stop string
    eng2 = ScriptedEngine(lambda p, k, sid: (f"<s{sid}> done", 2, "stop"))
    [res2] = dbs_sample(eng2, ["P:"], [lambda t: 0.0], DBSConfig(budget=4))
    assert len(res2.completions) == 4 and eng2.drawn == 4 and res2.rounds == 1


def test_max_rounds_runs_live_prefixes_to_the_end_without_block_stops():
    eng = ScriptedEngine(lambda p, k, sid: (f"<s{sid}>{BLOCK}" if n_blocks(p) < 50 else END, 1, "stop"))
    [res] = dbs_sample(eng, ["P:"], [lambda t: 0.0], DBSConfig(budget=2, max_tokens=10_000, max_rounds=3))
    assert len(res.completions) == 2 and res.rounds == 4
    assert "[/LOCALS]" not in eng.calls[-1]["stop"]


def test_prompts_run_in_lockstep_and_results_stay_per_prompt():
    def script(prefix, k, sid):
        depth = n_blocks(prefix)
        return (f"<s{sid}>{BLOCK}", 1, "stop") if depth < (2 if prefix.startswith("A") else 1) else (END, 1, "stop")

    eng = ScriptedEngine(script)
    res = dbs_sample(eng, ["A:", "B:"], [lambda t: 0.0, lambda t: 0.0], DBSConfig(budget=4))
    assert [len(r.completions) for r in res] == [4, 4]
    assert all(c.text.count("[/LOCALS]") == 2 for c in res[0].completions)
    assert all(c.text.count("[/LOCALS]") == 1 for c in res[1].completions)


def test_rejects_bad_arguments():
    eng = ScriptedEngine(lambda p, k, sid: (END, 1, "stop"))
    with pytest.raises(ValueError):
        dbs_sample(eng, ["a"], [], DBSConfig())
    with pytest.raises(ValueError):
        dbs_sample(eng, ["a"], [lambda t: 0.0], DBSConfig(budget=0))


@settings(max_examples=150, deadline=None)
@given(
    budget=st.integers(1, 8),
    p_end=st.floats(0.0, 0.9),
    n_scores=st.integers(1, 4),
    seg_tokens=st.integers(1, 40),
    max_tokens=st.integers(1, 400),
    salt=st.integers(0, 10_000),
    n_prompts=st.integers(1, 3),
)
def test_property_budget_and_token_accounting(budget, p_end, n_scores, seg_tokens, max_tokens, salt, n_prompts):
    import random

    def script(prefix, k, sid):
        rng = random.Random(f"{prefix}|{k}|{sid}|{salt}")
        n = rng.randint(1, seg_tokens)
        tail = END if rng.random() < p_end else BLOCK
        return f"<s{sid}:{rng.randrange(n_scores)}>{tail}", n, "stop"

    def score(text):
        marks = re.findall(r"<s\d+:(\d+)>", text)
        return float(sum(int(m) for m in marks))

    eng = ScriptedEngine(script)
    cfg = DBSConfig(budget=budget, max_tokens=max_tokens, max_rounds=20)
    results = dbs_sample(eng, [f"P{i}:" for i in range(n_prompts)], [score] * n_prompts, cfg)
    segments = eng.segment_tokens
    for res in results:
        assert len(res.completions) == budget
        assert all(c.n_tokens <= max(max_tokens, 1) for c in res.completions)
        # every round draws at most the budget per prompt
        assert all(len(s) <= budget for s in res.scores)
        kept = {int(m) for c in res.completions for m in re.findall(r"<s(\d+):", c.text)}
        kept_tokens = sum(segments[s] for s in kept)
        assert res.tokens_generated - res.tokens_dropped == kept_tokens
        assert 0 <= res.tokens_dropped <= res.tokens_generated
        for c in res.completions:
            sids = [int(m) for m in re.findall(r"<s(\d+):", c.text)]
            assert c.n_tokens == sum(segments[s] for s in sids)
    # per round, all prompts together never draw more than n_prompts * budget
    assert eng.drawn <= n_prompts * budget * (max(len(r.scores) for r in results))


def test_async_driver_matches_the_sync_one():
    import asyncio

    def script(prefix, k, sid):
        depth = n_blocks(prefix)
        return (f"<d{depth}k{k}>{BLOCK}", 2, "stop") if depth < 2 else (f"<d{depth}k{k}>{END}", 1, "stop")

    score = lambda t: float(t.count("k0"))  # noqa: E731
    cfg = DBSConfig(budget=4, max_tokens=100)
    sync = dbs_sample(ScriptedEngine(script), ["P:"], [score], cfg)[0]
    eng = ScriptedEngine(script)

    async def cont(prefixes, n, **kw):
        return eng.continue_prefixes(prefixes, n, **kw)

    [asy] = asyncio.run(dbs_sample_async(cont, ["P:"], [score], cfg))
    assert [c.text for c in asy.completions] == [c.text for c in sync.completions]
    assert (asy.tokens_generated, asy.tokens_dropped) == (sync.tokens_generated, sync.tokens_dropped)


class _BatchingEngine(ScriptedEngine):
    """A scripted engine that also runs several calls as one batch, as VLLMEngine.continue_requests does."""

    batches: int = 0

    def continue_requests(self, requests):
        self.batches += 1
        return [
            self.continue_prefixes(r.prefixes, r.n, stop=r.stop, max_tokens=r.max_tokens, seed=r.seed) for r in requests
        ]


def test_a_batching_engine_gets_one_call_per_round_and_the_same_trajectories():
    def script(prefix, k, sid):
        depth = n_blocks(prefix)
        n = 2 + (len(prefix) + k) % 5  # prefixes of one round end up with different token limits
        return (f"<d{depth}k{k}>{BLOCK}", n, "stop") if depth < 3 else (f"<d{depth}k{k}>{END}", 1, "stop")

    score = lambda t: float(t.count("k0") + t.count("k1"))  # noqa: E731  ties: budgets of 2 and 1
    cfg = DBSConfig(budget=5, max_tokens=12)
    plain = dbs_sample(ScriptedEngine(script), ["P:", "Q:"], [score] * 2, cfg)
    eng = _BatchingEngine(script)
    batched = dbs_sample(eng, ["P:", "Q:"], [score] * 2, cfg)
    assert [[c.text for c in r.completions] for r in batched] == [[c.text for c in r.completions] for r in plain]
    assert eng.batches == max(r.rounds for r in batched) and len(eng.calls) > eng.batches  # several calls a round

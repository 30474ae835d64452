"""transformers' generate behind the Engine contract, on the tiny random Qwen2."""

from __future__ import annotations

import pytest

from codethinker.engines.base import Engine
from codethinker.engines.hf import HFEngine, cut_at_stop


def test_cut_at_stop_keeps_the_earliest_stop_string():
    assert cut_at_stop("ab[/LOCALS]cd[/TRACE]", ["[/TRACE]", "[/LOCALS]"]) == ("ab[/LOCALS]", "[/LOCALS]")
    assert cut_at_stop("abc", ["x"]) == ("abc", None)
    assert cut_at_stop("abc", []) == ("abc", None)
    assert cut_at_stop("xaby", ["ab", "a"]) == ("xa", "a")


@pytest.fixture(scope="module")
def hf(tiny_model):
    return HFEngine(tiny_model)


def test_contract_counts_and_stops(hf):
    assert isinstance(hf, Engine)
    prompt = hf.apply_chat_template([{"role": "user", "content": "trace f(1)"}])
    assert prompt.endswith("<|im_start|>assistant\n")
    stops = ["e", "a"]  # frequent characters: a random model hits them soon
    out = hf.continue_prefixes([prompt, prompt + "x"], 3, stop=stops, max_tokens=12, seed=0)
    assert [len(r) for r in out] == [3, 3]
    for row in out:
        for c in row:
            assert 1 <= c.n_tokens <= 12
            if c.finish_reason == "stop" and any(s in c.text for s in stops):
                cut, _ = cut_at_stop(c.text, stops)  # the first stop, then the rest of its token at most
                assert c.text.startswith(cut) and len(c.text) - len(cut) < 16
            if c.finish_reason == "length":
                assert c.n_tokens == 12


def mid_token_stop(tokenizer, ids: list[int]) -> tuple[str, int] | None:
    """A stop string that ends inside token ``k`` of ``ids`` (its text up to there), and ``k``."""
    for k in range(1, len(ids)):
        whole = tokenizer.decode(ids[: k + 1], skip_special_tokens=True)
        before = tokenizer.decode(ids[:k], skip_special_tokens=True)
        if len(whole) - len(before) >= 2 and whole.startswith(before) and whole[: len(before) + 1] not in before:
            return whole[: len(before) + 1], k
    return None


def test_a_stop_inside_a_token_keeps_the_whole_token(hf):
    """``[/LOCALS]`` ends inside Qwen2's ``]\n``: the completion must be whole sampled tokens, or a
    DBS continuation of its text is encoded with a token the policy never wrote there."""
    prompt = hf.apply_chat_template([{"role": "user", "content": "def f(x):\n    return [x]\n"}])
    import torch

    enc = hf.tokenizer([prompt], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():  # the ids greedy decoding samples (re-encoding their text can merge them)
        seq = hf.model.generate(**enc, max_new_tokens=24, do_sample=False, temperature=None, top_p=None, top_k=None)
    ids = seq[0, enc["input_ids"].shape[1] :].tolist()
    found = mid_token_stop(hf.tokenizer, ids)
    if found is None:
        pytest.skip("the greedy continuation has no multi-character token")
    stop, k = found
    [[c]] = hf.continue_prefixes([prompt], 1, stop=[stop], max_tokens=24, temperature=0)
    assert c.finish_reason == "stop" and c.n_tokens == k + 1
    assert c.text == hf.tokenizer.decode(ids[: k + 1], skip_special_tokens=True) != stop


def test_greedy_repeats_and_seed_reproduces(hf):
    prompt = hf.apply_chat_template([{"role": "user", "content": "hi"}])
    [row] = hf.continue_prefixes([prompt], 3, stop=[], max_tokens=6, temperature=0.0)
    assert len({c.text for c in row}) == 1 and row[0].finish_reason == "length"
    a = hf.continue_prefixes([prompt], 2, stop=[], max_tokens=6, seed=5)
    b = hf.continue_prefixes([prompt], 2, stop=[], max_tokens=6, seed=5)
    assert a == b


def test_live_model_object(tiny_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    eng = HFEngine(model, AutoTokenizer.from_pretrained(tiny_model))
    [[c]] = eng.continue_prefixes(["hello"], 1, stop=[], max_tokens=3, temperature=0)
    assert c.n_tokens == 3


def test_lora_rank_slots():
    from codethinker.engines.vllm import lora_rank_slot

    assert [lora_rank_slot(r) for r in (1, 4, 8, 9, 64, 300)] == [1, 8, 8, 16, 64, 320]
    with pytest.raises(ValueError):
        lora_rank_slot(1000)

"""vLLM (CPU build) offline and as an OpenAI server, on the tiny random Qwen2; LoRA swaps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codethinker.engines.base import Engine
from codethinker.sampling.dbs import DBSConfig, dbs_sample

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def make_adapter(base: Path, out: Path, seed: int) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base)
    cfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False)
    peft_model = get_peft_model(model, cfg)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.mul_(50.0)  # a large change: the greedy continuation must differ
    peft_model.save_pretrained(out)
    return out


def test_offline_engine_contract(vllm_engine):
    assert isinstance(vllm_engine, Engine)
    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "hi"}])
    out = vllm_engine.continue_prefixes([prompt, prompt + "a"], 3, stop=["e"], max_tokens=10, seed=1)
    assert [len(r) for r in out] == [3, 3]
    for c in (c for r in out for c in r):
        assert 1 <= c.n_tokens <= 10
        assert c.finish_reason == "length" or c.text.endswith("e") or c.n_tokens < 10
    [g] = vllm_engine.continue_prefixes([prompt], 2, stop=[], max_tokens=5, temperature=0)
    assert g[0] == g[1] and g[0].finish_reason == "length"


def test_requests_batched_in_one_call_equal_separate_calls(vllm_engine):
    """``continue_requests`` (DBS runs a round's calls through it): each request keeps its own n, limit, stop
    and seed, and gets what a separate ``continue_prefixes`` call returns."""
    from codethinker.engines.base import PrefixRequest

    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "hi"}])
    reqs = [
        PrefixRequest([prompt, prompt + "a"], 2, ["e"], 7, 1.0, 3),
        PrefixRequest([prompt + "b"], 3, [], 4, 1.0, 5),
        PrefixRequest([prompt], 2, [], 6, 0.0, None),
    ]
    batched = vllm_engine.continue_requests(reqs)
    separate = [
        vllm_engine.continue_prefixes(
            r.prefixes, r.n, stop=r.stop, max_tokens=r.max_tokens, temperature=r.temperature, seed=r.seed
        )
        for r in reqs
    ]
    assert batched == separate
    assert [[len(row) for row in out] for out in batched] == [[2, 2], [3], [2]]
    assert all(c.n_tokens <= 4 for c in batched[1][0]) and all(c.n_tokens == 6 for c in batched[2][0])
    assert vllm_engine.continue_requests([]) == []


class _Alone:
    """The engine without ``interleave``: run_programs runs each program in turn (one batch per step)."""

    def __init__(self, engine):
        self.engine, self.steps = engine, 0

    def continue_requests(self, requests):
        return self.engine.continue_requests(requests)


def _count_steps(engine, monkeypatch) -> list[int]:
    core, count = engine.llm.llm_engine, [0]
    step = core.step

    def counted():
        count[0] += 1
        return step()

    monkeypatch.setattr(core, "step", counted)
    return count


def test_programs_interleaved_get_what_they_get_alone_in_fewer_engine_steps(vllm_engine, monkeypatch):
    """A rollout's regular samples and its DBS rounds as programs (run_programs): on vLLM they share the
    engine's steps (``interleave``), and every program gets the continuations it gets when run alone."""
    from codethinker.engines.base import PrefixRequest, one_call, run_programs
    from codethinker.sampling.dbs import DBSRun

    prompts = [vllm_engine.apply_chat_template([{"role": "user", "content": c}]) for c in ("hi", "ho", "yo")]
    score = lambda t: float(len(t) % 3)  # noqa: E731  uneven budgets
    cfg = DBSConfig(budget=4, max_tokens=24, block_stop=["e"], final_stop=["o"], seed=11)

    def programs():
        return [one_call(PrefixRequest(prompts, 4, ["o"], 24, 1.0, 5)), DBSRun(prompts, [score] * 3, cfg).program()]

    steps = _count_steps(vllm_engine, monkeypatch)
    alone = run_programs(_Alone(vllm_engine), programs())
    n_alone, steps[0] = steps[0], 0
    together = run_programs(vllm_engine, programs())
    assert together[0] == alone[0]
    assert [[c.text for c in r.completions] for r in together[1]] == [[c.text for c in r.completions] for r in alone[1]]
    assert 0 < steps[0] < n_alone, (steps[0], n_alone)


def test_sleep_mode_is_a_no_op_on_the_cpu_build(vllm_engine):
    """grpo.vllm_sleep asks for sleep mode; vLLM has it on CUDA only, so the CPU build runs without it
    and sleep/wake_up change nothing (the fixture is built with sleep_mode=True)."""
    assert vllm_engine.sleep_mode is False
    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "hi"}])
    [before] = vllm_engine.continue_prefixes([prompt], 1, stop=[], max_tokens=5, temperature=0)
    vllm_engine.sleep()
    assert vllm_engine.asleep is False
    vllm_engine.wake_up()
    [after] = vllm_engine.continue_prefixes([prompt], 1, stop=[], max_tokens=5, temperature=0)
    assert before[0].text == after[0].text


def test_a_stop_inside_a_token_keeps_the_whole_token_and_its_ids(vllm_engine):
    """vLLM's own text stops at the stop string, inside a token (``]`` of ``]\n``); the engine returns
    the whole token, remembers the sampled ids and continues the text from them (DBS's next block)."""
    from .test_hf import mid_token_stop

    tok = vllm_engine.tokenizer
    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "def f(x):\n    return [x]\n"}])
    [[free]] = vllm_engine.continue_prefixes([prompt], 1, stop=[], max_tokens=24, temperature=0)
    ids = vllm_engine.sampled_ids(prompt + free.text)
    p_ids = tok(prompt, add_special_tokens=False).input_ids
    assert ids is not None and ids[: len(p_ids)] == p_ids and len(ids) == len(p_ids) + free.n_tokens
    found = mid_token_stop(tok, ids[len(p_ids) :])
    if found is None:
        pytest.skip("the greedy continuation has no multi-character token")
    stop, k = found
    [[c]] = vllm_engine.continue_prefixes([prompt], 1, stop=[stop], max_tokens=24, temperature=0)
    assert c.finish_reason == "stop" and c.n_tokens == k + 1 and c.text != stop
    assert vllm_engine.sampled_ids(prompt + c.text) == ids[: len(p_ids) + k + 1]
    [[rest]] = vllm_engine.continue_prefixes([prompt + c.text], 1, stop=[], max_tokens=4, temperature=0)
    full = vllm_engine.sampled_ids(prompt + c.text + rest.text)
    assert full[: len(p_ids) + k + 1] == ids[: len(p_ids) + k + 1]  # continued from the sampled ids
    assert vllm_engine.sampled_ids("never returned") is None
    vllm_engine.forget()  # what the GRPO rollout does after each step
    assert vllm_engine.sampled_ids(prompt + c.text) is None


def test_lora_swap_changes_the_policy(vllm_engine, tiny_model, tmp_path):
    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "hi"}])

    def greedy():
        return vllm_engine.continue_prefixes([prompt], 1, stop=[], max_tokens=8, temperature=0)[0][0].text

    vllm_engine.set_lora(None)  # the engine is shared: no adapter another test left
    base = greedy()
    pushed = vllm_engine._lora_id
    vllm_engine.set_lora(make_adapter(tiny_model, tmp_path / "a1", seed=1))
    first = greedy()
    vllm_engine.set_lora(make_adapter(tiny_model, tmp_path / "a2", seed=2))
    second = greedy()
    assert vllm_engine.lora_version == pushed + 2
    vllm_engine.set_lora(None)
    assert greedy() == base
    assert first != base and second != first


def sharpened_model(base: Path, out: Path, seed: int) -> Any:
    """``base`` with noise on every weight and its (tied) embeddings x10: peaked logits, so that
    vLLM's and transformers' greedy choices agree despite float differences; saved to ``out``."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
        model.get_input_embeddings().weight.mul_(10.0)
    model.save_pretrained(out)
    return model


def test_full_weight_push_samples_the_new_weights(vllm_engine, tiny_model, tmp_path):
    """GRPO with ``finetune: full`` pushes every weight (``set_weights``): vLLM then samples what
    transformers samples from the same weights, also for a prompt whose KV the prefix cache holds
    from the old weights; pushing the first weights back gives the first answers back."""
    from codethinker.engines.hf import HFEngine

    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "def f(x):\n    return x"}])

    def greedy(engine):
        return engine.continue_prefixes([prompt], 1, stop=[], max_tokens=12, temperature=0)[0][0].text

    vllm_engine.set_lora(None)  # the engine is shared: no adapter another test left
    before = greedy(vllm_engine)  # also fills the prefix cache with the old weights' KV of the prompt
    model = sharpened_model(tiny_model, tmp_path / "pushed", seed=3)
    pushes = vllm_engine.weights_version  # the engine is shared with other tests
    try:
        vllm_engine.set_weights(tmp_path / "pushed")
        pushed = greedy(vllm_engine)
        assert vllm_engine.weights_version == pushes + 1
        assert pushed == greedy(HFEngine(model, vllm_engine.tokenizer))
        assert pushed != before
    finally:
        vllm_engine.set_weights(tiny_model)  # the shared engine's weights for the other tests
    assert greedy(vllm_engine) == before


def test_a_float32_checkpoint_runs_in_float32(vllm_engine):
    """The shared engine is built with the default dtype: the CPU build runs the float32 tiny model in
    float32, not vLLM's bfloat16 (which rounded away GRPO's steps of the micro policy)."""
    import torch

    assert vllm_engine.llm.model_config.dtype == torch.float32


def test_dbs_runs_on_vllm(vllm_engine):
    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "trace"}])
    [res] = dbs_sample(
        vllm_engine,
        [prompt],
        [lambda t: float(t.count("e"))],
        DBSConfig(budget=4, max_tokens=24, block_stop=["e"], final_stop=["a"], seed=0),
    )
    assert len(res.completions) == 4
    assert all(c.n_tokens <= 24 for c in res.completions)
    assert res.tokens_generated >= max(c.n_tokens for c in res.completions)


def test_prefix_cache_serves_a_continued_prefix(vllm_engine):
    """DBS continues sampled prefixes: with blocks of CPU_BLOCK_SIZE tokens vLLM's counters show the
    shared part served from its prefix cache (with vLLM's CPU default of 128, prefixes this short
    never hit)."""
    from codethinker.engines.kv_cache import CPU_BLOCK_SIZE

    assert vllm_engine.kv_cache_info["block_size"] == CPU_BLOCK_SIZE
    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "trace " * 100}])
    shared = len(vllm_engine.tokenizer(prompt).input_ids) // CPU_BLOCK_SIZE * CPU_BLOCK_SIZE
    assert shared >= 2 * CPU_BLOCK_SIZE
    [[first]] = vllm_engine.continue_prefixes([prompt], 1, stop=[], max_tokens=8, seed=3)
    q0, h0 = vllm_engine.prefix_cache_counts()
    vllm_engine.continue_prefixes([prompt + first.text], 2, stop=[], max_tokens=4, seed=4)
    q1, h1 = vllm_engine.prefix_cache_counts()
    assert q1 - q0 >= 2 * shared and h1 - h0 >= shared  # the prompt's full blocks came from the cache


def test_openai_engine_against_vllm_server(vllm_server, tiny_model):
    from codethinker.engines.openai import OpenAIEngine

    eng = OpenAIEngine(vllm_server.base_url, vllm_server.model, tokenizer=tiny_model, max_concurrency=2)
    prompt = eng.apply_chat_template([{"role": "user", "content": "hi"}])
    out = eng.continue_prefixes([prompt, prompt], 2, stop=["e"], max_tokens=10, seed=3)
    assert [len(r) for r in out] == [2, 2]
    for c in (c for r in out for c in r):
        assert 1 <= c.n_tokens <= 10
        if c.finish_reason == "stop" and "e" in c.text:
            assert c.text.endswith("e")


def test_cpu_kv_cache_is_the_absolute_size_not_a_share(tiny_model):
    """vLLM's CPU build gets ``kv_cache_gib`` as its KV cache: a share of 0.001 of the node's RAM, which
    would not hold even the model (the issue's failure, machine-independent), no longer decides, and
    the blocks vLLM reports are what 0.25 GiB holds."""
    from codethinker.engines.kv_cache import GIB, kv_layout, read_model_config
    from codethinker.engines.vllm import VLLMEngine, on_cpu

    if not on_cpu():
        pytest.skip("the CPU build sizes the KV cache this way; a GPU keeps gpu_memory_utilization")
    eng = VLLMEngine(
        tiny_model, max_model_len=2048, dtype="float32", kv_cache_gib=0.25, gpu_memory_utilization=0.001, max_num_seqs=8
    )
    try:
        info = eng.kv_cache_info
        assert info["kv_cache_memory_bytes"] == GIB // 4 and info["gpu_memory_utilization"] == 0.001
        per_block = info["block_size"] * kv_layout(read_model_config(tiny_model), "float32").bytes_per_token
        assert info["num_blocks"] == GIB // 4 // per_block
        prompt = eng.apply_chat_template([{"role": "user", "content": "hi"}])
        out = eng.continue_prefixes([prompt, prompt + "a", prompt + "b"], 2, stop=[], max_tokens=8, seed=0)
        assert [len(r) for r in out] == [2, 2, 2] and all(c.n_tokens == 8 for r in out for c in r)
    finally:
        eng.close()


def test_share_that_cannot_hold_the_model_fails_naming_the_param(tiny_model, tmp_path):
    """The old knob, on the server: vLLM's real error comes back as a message that names kv_cache_gib."""
    from codethinker.engines.kv_cache import KVCacheError, KVParamNames
    from codethinker.engines.vllm import on_cpu
    from codethinker.engines.vllm_server import vllm_server

    if not on_cpu():
        pytest.skip("CPU build only")
    with (
        pytest.raises(KVCacheError) as e,
        vllm_server(
            tiny_model,
            max_model_len=2048,
            kv_cache_gib=None,
            gpu_memory_utilization=0.001,
            kv_params=KVParamNames.under("evaluate.engine"),
            extra_args=["--enforce-eager", "--dtype", "float32"],
            timeout_s=900,
            log_path=tmp_path / "server.log",
        ),
    ):
        pass
    msg = str(e.value)
    assert msg.startswith(
        "evaluate.engine.kv_cache_gib=null leaves the KV cache to vLLM's gpu_memory_utilization=0.001"
    )
    assert "set evaluate.engine.kv_cache_gib to auto or a number of GiB" in msg
    assert "(vLLM: Available memory on node" in msg and "less than requested memory for kv (-" in msg


def test_the_in_process_engine_samples_what_vllms_engine_processes_sample(vllm_engine, tiny_model):
    """On the CPU build the engine runs in the caller's process (``in_process``; the shared engine was
    built so): greedy and seeded completions equal those of vLLM's own engine and worker processes. While
    it is open a second engine starts processes of its own (``in_process=True`` is refused), and the
    environment it was built under is put back (vLLM's cache of it emptied). Last in this file: a new
    engine takes over vLLM's process-wide metrics, which the prefix-cache test reads."""
    import os

    from vllm import envs

    from codethinker.engines.vllm import VLLMEngine, on_cpu

    if not on_cpu():
        pytest.skip("a GPU engine keeps vLLM's processes")
    assert vllm_engine.in_process
    vllm_engine.set_lora(None)  # the engine is shared: no adapter another test left
    prompt = vllm_engine.apply_chat_template([{"role": "user", "content": "def f(x):\n    return [x]\n"}])

    def answers(engine: Any) -> list[list[str]]:
        sampled = engine.continue_prefixes([prompt, prompt + "a"], 3, stop=[], max_tokens=16, seed=5)
        greedy = engine.continue_prefixes([prompt], 1, stop=[], max_tokens=16, temperature=0)
        return [[c.text for c in row] for row in [*sampled, *greedy]]

    env_before = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    with pytest.raises(RuntimeError, match="one in-process vLLM engine per process"):
        VLLMEngine(tiny_model, max_model_len=1024, in_process=True)
    other = VLLMEngine(tiny_model, enable_lora=True, max_lora_rank=8, weight_sync=True, max_model_len=2048)
    try:
        assert not other.in_process
        assert os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == env_before
        assert not hasattr(envs.__getattr__, "cache_clear")  # vLLM reads its environment again
        mine = answers(vllm_engine)
        assert answers(other) == mine
        assert len({t for row in mine[:2] for t in row}) > 1  # seeded sampling, not one answer
    finally:
        other.close()
    assert answers(vllm_engine) == mine  # closing the other engine left this one whole

"""GRPO local backend: the rollout hook, the CRM reward statistics, training on the tiny model,
and the policy sync: vLLM samples from the updated policy after an optimizer step (verl #7495); the
reward switch (grpo.reward): each reward's prompts, rollout and reward function."""

from __future__ import annotations

import logging
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.contra.render import render_prompt, render_trace, vanilla_prompt
from codethinker.contra.tracer import Flow
from codethinker.rewards.switch import reward_spec
from codethinker.rewards.whitebox import whitebox_prompt
from codethinker.training.grpo import grpo_params, resolve_reward
from codethinker.training.grpo_data import load_grpo_rows
from codethinker.training.grpo_local import (
    group_rewards,
    make_grpo_trainer,
    run_grpo_local,
    trainer_class,
    weight_negative,
)
from codethinker.training.reward_func import RewardFunc
from codethinker.training.rollout import Rollout, RolloutParams, prompt_key

from ..sampling.scripted import ScriptedEngine
from .tinydata import tiny_tokenizer, truths


class _Tok:
    """Character-level stand-in tokenizer (ids = code points)."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, text, add_special_tokens=False):
        return types.SimpleNamespace(input_ids=[ord(c) for c in text])

    def convert_tokens_to_ids(self, token):
        return -7


def _trainer(step=0):
    return types.SimpleNamespace(state=types.SimpleNamespace(global_step=step))


def test_rollout_returns_regular_then_dbs_per_group():
    flows = [Flow.from_json(t) for t in truths()[:2]]
    prompts = [render_prompt(f) for f in flows]
    table = {prompt_key(p): t for p, t in zip(prompts, truths()[:2], strict=False)}

    def script(prefix, k, sid):
        if "[/LOCALS]" in prefix or k % 2:
            return "[/TRACE]", 2, "stop"
        return "[TRACE]\n[/LOCALS]", 3, "stop"

    r = Rollout("static", ScriptedEngine(script), _Tok(), table, RolloutParams(n_regular=2, n_dbs=3))
    out = r([prompts[0]] * 5 + [prompts[1]] * 5, _trainer())
    assert len(out["prompt_ids"]) == len(out["completion_ids"]) == 10
    assert out["rollout_kind"] == ["regular"] * 2 + ["dbs"] * 3 + ["regular"] * 2 + ["dbs"] * 3
    assert out["logprobs"] is None
    assert all(ids[-1] == -7 for ids in out["completion_ids"])  # each finished response ends its turn
    stats = r.stats.take()
    assert stats["rollout/dbs_tokens_generated"] > 0 and stats["rollout/regular_tokens"] == 2 * (3 + 2)
    with pytest.raises(ValueError, match="repeated"):
        r([prompts[0]] * 4 + [prompts[1]], _trainer())


def test_rollout_puts_the_greedy_answer_first_in_each_group():
    """``n_greedy: 1``: each group's first member is the policy's temperature-0 answer (one engine call,
    one answer per prompt), then the regular and the DBS samples."""
    flows = [Flow.from_json(t) for t in truths()[:2]]
    prompts = [render_prompt(f) for f in flows]
    table = {prompt_key(p): t for p, t in zip(prompts, truths()[:2], strict=False)}

    def script(prefix, k, sid):
        return (f"[/TRACE] greedy {prefix[-9:]}", 2, "stop") if sid == 0 or sid == 1 else ("[/TRACE]", 2, "stop")

    eng = ScriptedEngine(script)
    r = Rollout("static", eng, _Tok(), table, RolloutParams(n_greedy=1, n_regular=2, n_dbs=3))
    assert r.p.group == 6
    out = r([prompts[0]] * 6 + [prompts[1]] * 6, _trainer())
    assert out["rollout_kind"] == (["greedy"] + ["regular"] * 2 + ["dbs"] * 3) * 2
    greedy = [c for c in eng.calls if c["temperature"] == 0.0]
    assert len(greedy) == 1 and greedy[0]["n"] == 1 and len(greedy[0]["prefixes"]) == 2
    assert all(c["temperature"] == 1.0 for c in eng.calls if c is not greedy[0])
    firsts = ["".join(map(chr, out["completion_ids"][i][:-1])) for i in (0, 6)]
    assert firsts == [f"[/TRACE] greedy {p[-9:]}" for p in greedy[0]["prefixes"]]  # each its own prompt's
    for bad in (2, -1):
        with pytest.raises(ValueError, match="0 or 1"):
            RolloutParams(n_greedy=bad)


def test_rollout_times_the_greedy_member_with_the_regular_samples():
    """The greedy answers count as regular completions (their tokens in ``regular_tokens``), so the time
    until they are in is ``rollout_regular_s``, even with no regular sample drawn."""
    flows = [Flow.from_json(t) for t in truths()[:1]]
    prompts = [render_prompt(f) for f in flows]
    table = {prompt_key(prompts[0]): truths()[0]}
    r = Rollout(
        "static",
        ScriptedEngine(lambda prefix, k, sid: ("[/TRACE]", 2, "stop")),
        _Tok(),
        table,
        RolloutParams(n_greedy=1, n_regular=0, n_dbs=2),
    )
    r([prompts[0]] * 3, _trainer())
    stats = r.stats.take()
    assert stats["rollout/regular_tokens"] == 2
    assert 0.0 < stats["rollout/rollout_regular_s"] <= stats["rollout/rollout_s"]


class _IdsEngine(ScriptedEngine):
    """A scripted engine that, like VLLMEngine, knows the ids it sampled for each text it returned."""

    def sampled_ids(self, text):
        return [ord(c) for c in text[:-1]] + [1000 + ord(text[-1])] if text.endswith("]") else None


def test_rollout_trains_on_the_ids_the_engine_sampled():
    """Re-encoding a completion's text can give other ids than the sampled ones (``]`` + ``\n`` vs
    ``]\n``): the rollout takes the engine's ids where it has them, and re-encodes only otherwise."""
    flows = [Flow.from_json(t) for t in truths()[:1]]
    prompts = [render_prompt(f) for f in flows]
    table = {prompt_key(prompts[0]): truths()[0]}
    eng = _IdsEngine(lambda prefix, k, sid: ("[/TRACE]", 2, "stop") if k == 0 else ("[/TRACE]x", 2, "stop"))
    r = Rollout("static", eng, _Tok(), table, RolloutParams(n_regular=2, n_dbs=0))
    out = r([prompts[0]] * 2, _trainer())
    first, second = out["completion_ids"]
    assert first == [ord(c) for c in "[/TRACE"] + [1000 + ord("]"), -7]  # the engine's ids, then end of turn
    assert second == [ord(c) for c in "[/TRACE]x"] + [-7]  # unknown to the engine: re-encoded


class _CachedEngine(ScriptedEngine):
    """Counts 10 prompt tokens queried and 4 hit per sequence, as vLLM's prefix-cache counters would."""

    def continue_prefixes(self, prefixes, n, **kw):
        self.counts = [c + k * len(prefixes) * n for c, k in zip(getattr(self, "counts", (0, 0)), (10, 4), strict=True)]
        return super().continue_prefixes(prefixes, n, **kw)

    def prefix_cache_counts(self):
        return tuple(getattr(self, "counts", (0, 0)))


def test_rollout_reports_the_prefix_cache_of_its_calls():
    """Regular samples and DBS rounds share the engine's steps (VLLMEngine.interleave), so the prefix-cache
    counters are the whole rollout's: every call's prompt tokens, queried and hit."""
    flows = [Flow.from_json(t) for t in truths()[:2]]
    prompts = [render_prompt(f) for f in flows]
    table = {prompt_key(p): t for p, t in zip(prompts, truths()[:2], strict=False)}
    eng = _CachedEngine(lambda prefix, k, sid: ("[/TRACE]", 2, "stop"))
    r = Rollout("static", eng, _Tok(), table, RolloutParams(n_regular=2, n_dbs=3))
    r([prompts[0]] * 5 + [prompts[1]] * 5, _trainer())
    stats = r.stats.take()
    assert stats["rollout/cache_queried"] == eng.counts[0] > 10 * 2 * 2  # more than the regular call's
    assert stats["rollout/cache_hits"] == eng.counts[1]
    assert stats["rollout/cache_hit_rate"] == 0.4
    assert r.stats.take()["rollout/cache_hit_rate"] == 0.0  # taken: reset, nothing queried since


class TestFilterGroups:
    """DAPO's dynamic sampling (``rollout.filter_groups``): groups whose rewards are all equal carry no
    advantage, so the rollout draws further prompts' groups and hands the update the informative ones."""

    @staticmethod
    def _setup(n_prompts=4, **over):
        flows = [Flow.from_json(t) for t in truths()[:n_prompts]]
        prompts = [render_prompt(f) for f in flows]
        table = {prompt_key(p): t for p, t in zip(prompts, truths()[:n_prompts], strict=True)}
        good = {prompt_key(p): render_trace(f) for p, f in zip(prompts, flows, strict=True)}
        return prompts, table, good

    @staticmethod
    def _rollout(prompts, table, good, informative, **params):
        """Each prompt in ``informative`` gets one right trace in its group (reward 4 beside 0s), the rest junk."""
        marked = {p[-1]["content"]: good[prompt_key(p)] for p in informative}

        def script(prefix, k, sid):
            hit = [trace for content, trace in marked.items() if content in prefix]
            return (hit[0], 5, "stop") if hit and k == 0 else ("junk", 1, "stop")

        eng = ScriptedEngine(script)
        p = RolloutParams(n_regular=2, n_dbs=0, **params)
        fn = group_rewards(RewardFunc())
        return Rollout("static", eng, _Tok(), table, p, pool=prompts, group_reward=fn, seed=3), eng

    def test_valid_the_step_gets_the_informative_groups_of_other_prompts(self):
        prompts, table, good = self._setup()
        r, eng = self._rollout(prompts, table, good, prompts[2:], filter_groups=True, max_gen_batches=4)
        out = r([prompts[0]] * 2 + [prompts[1]] * 2, _trainer())  # TRL's two prompts: both uninformative
        # the reward reads the truths of the groups handed over: prompts 2 and 3, one right trace each
        assert sorted(set(out["truth"])) == sorted({table[prompt_key(prompts[2])], table[prompt_key(prompts[3])]})
        assert out["truth"][0] == out["truth"][1] and out["truth"][2] == out["truth"][3]
        texts = [[{"role": "assistant", "content": _text(ids)}] for ids in out["completion_ids"]]
        rewards = RewardFunc()(None, texts, truth=out["truth"])
        assert rewards.count(4.0) == 2 and rewards.count(0.0) == 2
        stats = r.stats.take()
        assert stats["rollout/groups_drawn"] == 4 and stats["rollout/groups_informative"] == 2
        assert stats["rollout/gen_batches"] == len(eng.calls) == 2  # TRL's batch, then one more

    def test_valid_oversample_draws_one_larger_engine_batch(self):
        prompts, table, good = self._setup()
        r, eng = self._rollout(prompts, table, good, prompts[1:3], filter_groups=True, oversample=2)
        out = r([prompts[0]] * 2 + [prompts[1]] * 2, _trainer())
        assert len(eng.calls) == 1 and len(eng.calls[0]["prefixes"]) == 4  # TRL's 2 prompts + 2 from the pool
        assert out["truth"][::2] == [table[prompt_key(prompts[1])], table[prompt_key(prompts[2])]]

    def test_invalid_settings_are_refused(self):
        _, table, _ = self._setup(1)
        with pytest.raises(ValueError, match="group_reward"):
            Rollout(
                "static", ScriptedEngine(lambda *a: ("x", 1, "stop")), _Tok(), table, RolloutParams(filter_groups=True)
            )
        with pytest.raises(ValueError, match="max_gen_batches"):
            RolloutParams(max_gen_batches=0)
        with pytest.raises(ValueError, match="oversample"):
            RolloutParams(oversample=0)

    def test_mixed_draws_stop_at_max_gen_batches_and_fill_with_equal_groups(self):
        prompts, table, good = self._setup()
        r, eng = self._rollout(prompts, table, good, prompts[3:], filter_groups=True, max_gen_batches=2)
        out = r([prompts[0]] * 2 + [prompts[1]] * 2, _trainer())
        assert len(eng.calls) == 2 and len(out["completion_ids"]) == 4
        stats = r.stats.take()
        assert stats["rollout/groups_drawn"] == 4 and stats["rollout/groups_informative"] == 1
        assert out["truth"][0] == table[prompt_key(prompts[3])]  # the informative group first

    def test_off_keeps_trls_groups(self):
        prompts, table, good = self._setup()
        r, eng = self._rollout(prompts, table, good, prompts[1:2])
        out = r([prompts[0]] * 2 + [prompts[1]] * 2, _trainer())
        assert "truth" not in out and len(eng.calls) == 1
        assert "rollout/groups_drawn" not in r.stats.take()


def _text(ids):
    return "".join(chr(i) for i in ids if i >= 0)


def test_crm_reward_func_scores_and_summarizes():
    good = [render_trace(Flow.from_json(t)) for t in truths()[:2]]
    fn = RewardFunc("output_prediction", reward_spec("crm", {"alpha": 1.0}))
    comps = [[{"role": "assistant", "content": c}] for c in [*good, "junk", "[TRACE]"]]
    rewards = fn(
        None,
        comps,
        truth=[*truths()[:2], truths()[0], truths()[1]],
        completion_ids=[[1] * 10, [1] * 20, [1] * 3, [1] * 3],
        rollout_kind=["regular", "dbs"] * 2,
    )
    assert rewards == [4.0, 4.0, 0.0, 0.0]
    s = fn.take()
    assert s["reward_mean"] == 2.0 and s["reward_regular_max"] == 4.0 and s["reward_dbs_mean"] == 2.0
    assert s["fmt_rate"] == 0.5 and s["rcs"] == 0.5 and s["response_len"] == 9.0
    assert 0.0 < s["reward_s"] < 5.0  # the scoring's wall time, for the step's time split
    assert "reward_greedy_mean" not in s  # no greedy member drawn: no greedy columns
    fn(None, comps[:2], truth=truths()[:2], completion_ids=[[1], [1]], rollout_kind=["greedy", "regular"])
    assert fn.take()["reward_greedy_mean"] == 4.0
    assert fn.take() == {
        k: 0.0
        for k in (
            "reward_s",
            "reward_mean",
            "reward_std",
            "reward_max",
            "reward_regular_mean",
            "reward_regular_std",
            "reward_regular_max",
            "reward_dbs_mean",
            "reward_dbs_std",
            "reward_dbs_max",
        )
    }


def _tiny_params(**over):
    base = {
        "max_steps": 1,
        "prompts_per_step": 1,
        "micro_batch": 4,
        "learning_rate": 1e-3,
        "rollout_engine": "hf",
        "lora": {"r": 8, "alpha": 16},
        "rollout": {"n_regular": 2, "n_dbs": 2, "max_completion_tokens": 12},
    }
    base.update(over)
    return grpo_params(base)


@pytest.mark.slow
def test_grpo_local_hf_trains_saves_and_logs(tiny_model, grpo_parquet, tmp_path):
    csv = tmp_path / "plots" / "grpo_reward.csv"
    m = run_grpo_local(tiny_model, grpo_parquet, tmp_path / "grpo", _tiny_params(), plot_csv=csv)
    assert m["steps"] == 1 and m["rollout_engine"] == "hf" and m["prompts"] == 4
    assert (tmp_path / "grpo" / "adapter" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "grpo" / "merged" / "config.json").is_file()
    lines = csv.read_text().splitlines()
    assert lines[0].startswith("step,reward_mean,reward_regular_mean,reward_dbs_mean")
    assert len(lines) == 2 and lines[1].startswith("1,")


@pytest.mark.slow
def test_filter_groups_in_the_trainer_draws_further_groups(tiny_model, grpo_parquet, tmp_path):
    """Dynamic sampling through TRL: a random policy's groups all score 0, so the rollout draws every batch
    it may (3 of 1 group), hands over an equal-reward group, and the step runs on it."""
    rollout = {"n_regular": 2, "n_dbs": 2, "max_completion_tokens": 12, "filter_groups": True, "max_gen_batches": 3}
    m = run_grpo_local(tiny_model, grpo_parquet, tmp_path / "grpo", _tiny_params(rollout=rollout))
    assert m["steps"] == 1 and m["filter_groups"] is True
    assert m["groups_drawn"] == 3 and m["mean_frac_reward_zero_std"] == 1.0


@pytest.mark.slow
def test_a_greedy_member_trains_through_the_trainer(tiny_model, grpo_parquet, tmp_path):
    """``n_greedy: 1`` through TRL (transformers' engine): groups of 1 greedy + 1 regular + 2 DBS, one step."""
    rollout = {"n_greedy": 1, "n_regular": 1, "n_dbs": 2, "max_completion_tokens": 12}
    m = run_grpo_local(tiny_model, grpo_parquet, tmp_path / "grpo", _tiny_params(rollout=rollout))
    assert m["steps"] == 1 and m["n_regular"] == 1 and m["n_dbs"] == 2


def _lengthy(completions, **_):
    """A reward with spread inside every group, so one step moves the policy."""
    return [float(len(c[-1]["content"])) for c in completions]


@pytest.mark.slow
def test_hf_rollouts_use_the_live_policy(tiny_model, grpo_parquet, tmp_path):
    """... with the engine settings of grpo.hf_cache and grpo.hf_batch_size (a static cache on this CPU)."""
    rows, _ = load_grpo_rows(grpo_parquet)
    p = _tiny_params(hf_cache="static", hf_batch_size=3)
    trainer, rollout = make_grpo_trainer(tiny_model, rows, tmp_path / "ck", p, reward_funcs=[_lengthy])
    trainer.train()
    assert rollout.engine.model is trainer.accelerator.unwrap_model(trainer.model)
    assert (rollout.engine.cache, rollout.engine.batch_size) == ("static", 3)


class TestNegativeWeight:
    """``grpo.negative_weight``: the loss sees each negative advantage times the weight (0: PSR)."""

    @settings(deadline=None)  # the first example imports torch
    @given(
        st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=1, max_size=16),
        st.floats(0, 2, allow_nan=False, width=32),
    )
    def test_positives_are_kept_and_negatives_scaled(self, values, weight):
        import torch

        a = torch.tensor(values)
        got = weight_negative(a, weight)
        assert torch.equal(got[a >= 0], a[a >= 0])
        assert torch.allclose(got[a < 0], weight * a[a < 0])
        assert torch.equal(weight_negative(a, 1.0), a)

    def test_the_weight_is_checked(self):
        assert _tiny_params().negative_weight == 1.0 and trainer_class(1.0).__name__ == "GRPOTrainer"
        with pytest.raises(ValueError, match=r"grpo\.negative_weight must be >= 0, got -0\.5"):
            _tiny_params(negative_weight=-0.5)
        with pytest.raises(ValueError, match=r"grpo\.negative_weight is the local backend's"):
            _tiny_params(negative_weight=0.0, backend="verl")

    @pytest.mark.slow
    @pytest.mark.parametrize("weight", [1.0, 0.0])
    def test_the_loss_sees_the_weighted_advantages(self, grpo_parquet, tmp_path, weight):
        """Through TRL: with a reward that differs inside every group, GRPO's batch holds negative
        advantages; with weight 0 the loss gets none. The policy's tokenizer is trained here (no ../shared),
        so every checkout runs this: the weighting rides on a private TRL method that an upgrade may rename."""
        import torch

        from codethinker.training.bootstrap import build_tiny_model

        policy = build_tiny_model(tmp_path / "policy", tiny_tokenizer(), seed=0)
        rows, _ = load_grpo_rows(grpo_parquet)
        trainer, _ = make_grpo_trainer(
            policy, rows, tmp_path / "ck", _tiny_params(negative_weight=weight), reward_funcs=[_lengthy]
        )
        seen, compute = [], trainer.compute_loss

        def spy(model, inputs, *args, **kw):
            seen.append(inputs["advantages"].detach().clone())
            return compute(model, inputs, *args, **kw)

        trainer.compute_loss = spy
        trainer.train()
        adv = torch.cat([a.flatten() for a in seen])
        assert (adv > 0).any()
        assert bool((adv < 0).any()) is (weight == 1.0)


def test_the_hf_engine_settings_are_checked():
    assert (grpo_params({}).hf_cache, grpo_params({}).hf_batch_size) == ("dynamic", 16)
    with pytest.raises(ValueError, match=r"grpo\.hf_cache must be one of dynamic, static, compiled, got 'paged'"):
        grpo_params({"hf_cache": "paged"})
    with pytest.raises(ValueError, match=r"grpo\.hf_batch_size must be >= 1"):
        grpo_params({"hf_batch_size": 0})


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_rollouts_sample_from_the_updated_policy(tiny_model, grpo_parquet, tmp_path, vllm_engine):
    """After an optimizer step the engine gets the new LoRA weights and its greedy output follows them."""
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from codethinker.engines.hf import HFEngine

    rows, _ = load_grpo_rows(grpo_parquet)
    p = _tiny_params(max_steps=2, learning_rate=5e-2, rollout_engine="vllm")
    trainer, rollout = make_grpo_trainer(
        tiny_model, rows, tmp_path / "ck", p, reward_funcs=[_lengthy], engine=("vllm", vllm_engine)
    )
    trainer.train()
    assert [d.name for d in rollout.pushed] == ["step-0", "step-1"]
    w0, w1 = (load_file(d / "adapter_model.safetensors") for d in rollout.pushed)
    lora_b = [k for k in w1 if "lora_B" in k]
    assert lora_b and all(torch.count_nonzero(w0[k]) == 0 for k in lora_b)  # fresh adapter: B = 0
    assert any(torch.count_nonzero(w1[k]) > 0 for k in lora_b)  # the step moved it
    # the engine now samples from the step-1 policy: same greedy text as transformers with that adapter
    prompt = vllm_engine.apply_chat_template(rows[0]["prompt"])
    [[got]] = vllm_engine.continue_prefixes([prompt], 1, stop=[], max_tokens=6, temperature=0)
    ref_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), rollout.pushed[1])
    ref = HFEngine(ref_model, vllm_engine.tokenizer)
    [[want]] = ref.continue_prefixes([prompt], 1, stop=[], max_tokens=6, temperature=0)
    [[initial]] = HFEngine(tiny_model).continue_prefixes([prompt], 1, stop=[], max_tokens=6, temperature=0)
    assert got.text == want.text
    assert got.text != initial.text


@pytest.mark.vllm
@pytest.mark.slow
def test_full_finetune_pushes_every_weight_to_vllm(tiny_model, grpo_parquet, tmp_path, vllm_engine):
    """``finetune: full``: no adapter; after an optimizer step every weight is pushed to the engine,
    which then samples what transformers samples from the saved model; the stage saves that model."""
    import torch
    from safetensors.torch import load_file

    from codethinker.engines.hf import HFEngine

    rows, _ = load_grpo_rows(grpo_parquet)
    p = _tiny_params(max_steps=2, learning_rate=5e-3, rollout_engine="vllm", finetune="full")
    trainer, rollout = make_grpo_trainer(
        tiny_model, rows, tmp_path / "ck", p, reward_funcs=[_lengthy], engine=("vllm", vllm_engine)
    )
    vllm_engine.set_lora(None)  # the engine is shared: no adapter another test left
    pushes = vllm_engine.weights_version
    try:
        trainer.train()
        assert not hasattr(trainer.model, "peft_config")  # no LoRA wrapper: the model itself trains
        assert [d.name for d in rollout.pushed] == ["step-0", "step-1"]
        assert vllm_engine.weights_version == pushes + 2 and rollout.push == "full"
        w0, w1 = (load_file(d / "model.safetensors") for d in rollout.pushed)
        assert set(w0) == set(w1) and not any("lora" in k for k in w1)
        moved = [k for k in w1 if not torch.equal(w0[k], w1[k])]
        assert any(".mlp." in k for k in moved) and any("self_attn" in k for k in moved)
        prompt = vllm_engine.apply_chat_template(rows[0]["prompt"])
        [[got]] = vllm_engine.continue_prefixes([prompt], 1, stop=[], max_tokens=6, temperature=0)
        [[want]] = HFEngine(str(rollout.pushed[1]), vllm_engine.tokenizer).continue_prefixes(
            [prompt], 1, stop=[], max_tokens=6, temperature=0
        )
        assert got.text == want.text
    finally:
        vllm_engine.set_weights(tiny_model)  # the shared engine's weights for the other tests


def test_finetune_choice_is_checked():
    assert _tiny_params(finetune="full").finetune == "full"
    with pytest.raises(ValueError, match=r"grpo\.finetune must be one of lora, full"):
        _tiny_params(finetune="qlora")


# --- the reward switch (grpo.reward) -----------------------------------------------------------------


def _vanilla(answer: str) -> str:
    return f"[THOUGHT]\ntracing\n[/THOUGHT]\n[ANSWER]\n{answer}\n[/ANSWER]"


def _right_answer(flow: Flow) -> str:
    return f"assert f({flow.input}) == {flow.output_text}"


def test_a_loaded_grpo_row_carries_the_prompt_of_its_reward(grpo_parquet):
    crm, _ = load_grpo_rows(grpo_parquet, p=grpo_params({}))
    orm, _ = load_grpo_rows(grpo_parquet, p=grpo_params({"reward": "orm"}))
    wb, _ = load_grpo_rows(grpo_parquet, p=grpo_params({"reward": "whitebox", "whitebox": {"k": 2}}))
    assert len(crm) == len(orm) == len(wb) == len(truths())
    for c, o, w, t in zip(crm, orm, wb, truths(), strict=True):
        flow = Flow.from_json(t)
        assert c["prompt"] == render_prompt(flow)  # the parquet's ConTra prompt, as contra_sft wrote it
        assert o["prompt"] == vanilla_prompt("\n".join(flow.lines), "f", flow.input)
        assert "[ANSWER]" in o["prompt"][0]["content"] and "[TRACE]" not in o["prompt"][0]["content"]
        assert w["prompt"] == whitebox_prompt(flow, 2)
        assert c["truth"] == o["truth"] == w["truth"] == t and c["id"] == o["id"] == w["id"]
    plain, _ = load_grpo_rows(grpo_parquet)  # no params: the rows as stored
    assert [r["prompt"] for r in plain] == [r["prompt"] for r in crm]


def test_baseline_rewards_draw_their_dbs_budget_as_regular_samples(caplog):
    for kind in ("orm", "whitebox"):
        p = grpo_params({"reward": kind, "rollout": {"n_regular": 4, "n_dbs": 4}})
        with caplog.at_level(logging.WARNING, logger="codethinker.training.grpo"):
            resolved = resolve_reward(p)
        r = resolved.rollout
        assert (r.n_regular, r.n_dbs, r.group, r.final_stop) == (8, 0, 8, ["[/ANSWER]"])
        assert f"grpo.reward={kind}: DBS needs ConTra blocks" in caplog.text and "8 regular + 0 DBS" in caplog.text
        caplog.clear()
        assert resolve_reward(resolved) == resolved and not caplog.text  # resolved once: no second notice
    no_dbs = resolve_reward(grpo_params({"reward": "orm", "rollout": {"n_regular": 8, "n_dbs": 0}})).rollout
    assert (no_dbs.n_regular, no_dbs.n_dbs, no_dbs.final_stop) == (8, 0, ["[/ANSWER]"]) and not caplog.text
    custom = grpo_params({"reward": "orm", "rollout": {"final_stop": ["[END]"]}})
    assert resolve_reward(custom).rollout.final_stop == ["[END]"]  # a stop set in params.yaml is kept
    crm = grpo_params({})
    assert resolve_reward(crm) is crm and crm.rollout.n_dbs == 4  # DBS + CRM: unchanged
    with pytest.raises(ValueError, match="reward must be one of crm, orm, whitebox"):
        grpo_params({"reward": "prm"})
    with pytest.raises(ValueError, match=r"grpo: whitebox\.q: unknown key"):
        grpo_params({"reward": "whitebox", "whitebox": {"q": 3}})


def test_orm_rollout_is_all_regular_and_stops_at_the_answer():
    flows = [Flow.from_json(t) for t in truths()[:2]]
    p = resolve_reward(grpo_params({"reward": "orm", "rollout": {"n_regular": 2, "n_dbs": 3}}))
    prompts = [p.reward_spec().prompt(f) for f in flows]
    table = {prompt_key(m): t for m, t in zip(prompts, truths()[:2], strict=True)}
    eng = ScriptedEngine(lambda prefix, k, sid: (_vanilla("assert f(3) == 8"), 5, "stop"))
    r = Rollout("static", eng, _Tok(), table, p.rollout)
    out = r([prompts[0]] * 5 + [prompts[1]] * 5, _trainer())
    assert out["rollout_kind"] == ["regular"] * 10
    assert [(c["n"], c["stop"]) for c in eng.calls] == [(5, ["[/ANSWER]"])]  # one regular call, no DBS rounds
    assert "assert f(3) == ??" in eng.calls[0]["prefixes"][0]


def test_reward_func_routes_by_the_runs_reward():
    flow = Flow.from_json(truths()[0])  # f(3) == 8
    texts = [_vanilla(_right_answer(flow)), _vanilla("assert f(3) == 9"), render_trace(flow), "junk"]
    comps = [[{"role": "assistant", "content": c}] for c in texts]
    truth = [truths()[0]] * len(texts)
    orm = RewardFunc.from_params(grpo_params({"reward": "orm", "crm": {"orm": False}}))
    assert orm.__name__ == "orm"  # TRL logs rewards/orm/...
    assert orm(None, comps, truth=truth) == [2.0, 0.0, 2.0, 0.0]  # a ConTra trace's RETURN counts (orm.py)
    s = orm.take()
    assert s["reward_mean"] == 1.0 and s["fmt_rate"] == 0.75 and s["r_proc"] == 0.0 and s["rcs"] == 0.25
    wb = RewardFunc.from_params(grpo_params({"reward": "whitebox"}))
    assert wb.__name__ == "whitebox" and wb(None, comps, truth=truth) == [1.0, 0.0, 0.0, 0.0]  # io only: 2 * 0.5
    crm = RewardFunc()  # the task's first reward: the full CRM
    assert crm.__name__ == "crm" and crm(None, comps, truth=truth) == [0.0, 0.0, 4.0, 0.0]


@pytest.mark.slow
def test_the_trainer_built_with_reward_orm_calls_the_orm_reward(tiny_model, grpo_parquet, tmp_path, monkeypatch):
    """make_grpo_trainer with grpo.reward=orm: vanilla prompts reach the engine, all 4 samples are regular and
    stop at [/ANSWER], and TRL's reward is the ORM (2 for a right assertion, else 0)."""
    import codethinker.rewards.switch as switch

    calls = []
    real_orm = switch.orm_score
    monkeypatch.setattr(switch, "orm_score", lambda *a, **k: calls.append(a) or real_orm(*a, **k))
    answers = {f"assert f({f.input}) == ??": _right_answer(f) for f in map(Flow.from_json, truths())}

    def script(prefix, k, sid):  # a right assertion for even samples, a wrong one for odd
        [right] = [a for q, a in answers.items() if q in prefix]
        return _vanilla(right if k % 2 == 0 else right + "0"), 12, "stop"

    eng = ScriptedEngine(script)
    rollout_params = {"n_regular": 2, "n_dbs": 2, "max_completion_tokens": 64}  # -> 4 regular, 0 DBS
    p = _tiny_params(reward="orm", rollout=rollout_params)
    rows, _ = load_grpo_rows(grpo_parquet, p=p)
    trainer, rollout = make_grpo_trainer(tiny_model, rows, tmp_path / "ck", p, engine=("static", eng))
    [fn] = trainer.reward_funcs
    assert isinstance(fn, RewardFunc) and fn.spec.kind == "orm"
    assert (rollout.p.n_regular, rollout.p.n_dbs) == (4, 0)
    trainer.train()
    assert eng.calls and all(c["stop"] == ["[/ANSWER]"] and c["n"] == 4 for c in eng.calls)
    assert all("[THOUGHT] and [/THOUGHT]" in prefix for c in eng.calls for prefix in c["prefixes"])  # vanilla
    assert len(calls) == 4  # one group of 4, each scored by the ORM
    s = fn.take()
    assert s["reward_mean"] == 1.0 and s["reward_max"] == 2.0 and s["fmt_rate"] == 1.0
    assert s["reward_dbs_max"] == 0.0 and s["reward_regular_mean"] == 1.0
    logged = {k for h in trainer.state.log_history for k in h}
    assert any(k.startswith("rewards/orm") for k in logged), sorted(logged)

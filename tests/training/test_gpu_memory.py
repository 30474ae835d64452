"""GPU memory of the local GRPO backend (grpo.max_model_len, grpo.vllm_kv_cache_gib, grpo.vllm_sleep):
the estimate's terms by hand and against transformers and peft, the split of one GPU with and
without vLLM's sleep mode, the 7B figures of docs/training.md, and the rollout's sleep/wake order.
No GPU here: the GPU's total memory is handed in, as CUDA would report it."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from codethinker.preflight import parameters_from_config
from codethinker.training.common import LoRAParams
from codethinker.training.gpu_memory import (
    GIB,
    MARGIN,
    QWEN25_CODER_7B,
    VLLM_WORKSPACE,
    GPUMemoryError,
    ModelShape,
    plan_local_gpu,
)
from codethinker.training.grpo import GRPOParams, resolve_model_len
from codethinker.training.grpo_local import gpu_kv_cache_gib
from codethinker.training.rollout import Rollout, RolloutParams

ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# round numbers so every term below is computed by hand
SHAPE = ModelShape(hidden=1000, intermediate=3000, layers=10, heads=10, kv_heads=2, head_dim=100, vocab=10000)
WEIGHTS = 2 * (10 * (1000 * 1000 + 2 * 1000 * 200 + 1000 * 1000 + 3 * 1000 * 3000 + 2 * 1000) + 2 * 10000 * 1000 + 1000)
LORA = 16 * 10 * (8 * (1000 + 1000) + 8 * (1000 + 200))  # r=8 on q_proj and v_proj, fp32 x 4 states
ACTS = 2 * (2000 * 1000 * 10 + 2000 * (4 * 1000 + 3 * 3000) + 3 * 2 * 500 * 10000)  # 2 x 1000 tokens, 500 completion
SEQ_KV = 1000 * (2 * 10 * 2 * 100 * 2)  # 1000 tokens x 8,000 B
RESIDENT = 2 * WEIGHTS + LORA + VLLM_WORKSPACE + MARGIN


def plan(total: int, sleep: bool):
    return plan_local_gpu(
        SHAPE,
        total_bytes=total,
        max_model_len=1000,
        max_completion_tokens=500,
        rollout_seqs=4,
        micro_batch=2,
        lora_r=8,
        targets=["q_proj", "v_proj"],
        sleep=sleep,
    )


class TestModelShape:
    def test_parameters_by_hand_and_as_preflight_counts_them(self):
        assert 2 * SHAPE.parameters == WEIGHTS == 268_042_000
        qwen = ModelShape.from_config(QWEN25_CODER_7B)
        assert qwen.parameters == parameters_from_config(QWEN25_CODER_7B)
        assert qwen.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 == 57_344

    @pytest.mark.parametrize("tie", [True, False])
    def test_parameters_and_lora_match_transformers_and_peft(self, tie: bool):
        transformers = pytest.importorskip("transformers")
        peft = pytest.importorskip("peft")
        dims = {"hidden_size": 128, "intermediate_size": 160, "num_hidden_layers": 3, "num_attention_heads": 2}
        cfg = transformers.Qwen2Config(**dims, num_key_value_heads=1, vocab_size=200, tie_word_embeddings=tie)
        model = transformers.Qwen2ForCausalLM(cfg)
        shape = ModelShape.from_config(cfg.to_dict())
        assert shape.parameters == model.num_parameters()
        lora = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=ALL, task_type="CAUSAL_LM"))
        trainable = sum(p.numel() for p in lora.parameters() if p.requires_grad)
        assert shape.lora_parameters(4, ALL) == trainable

    def test_hostile_configs(self):
        with pytest.raises(ValueError, match="mixture-of-experts"):
            ModelShape.from_config({**QWEN25_CODER_7B, "num_experts": 8})
        with pytest.raises(ValueError, match="lacks"):
            ModelShape.from_config({"hidden_size": 8})
        with pytest.raises(ValueError, match="not a Qwen2 block"):
            SHAPE.lora_parameters(8, ["q_proj", "lm_head"])


class TestPlan:
    def test_terms_by_hand(self):
        p = plan(RESIDENT + ACTS + 20_000_000, sleep=False)
        assert (p.policy_weights, p.lora_states, p.activations, p.seq_kv) == (WEIGHTS, LORA, ACTS, SEQ_KV)
        assert p.kv_need == int(1.2 * 4 * SEQ_KV)

    def test_without_sleep_the_kv_cache_gets_what_the_update_leaves(self):
        p = plan(RESIDENT + ACTS + 20_000_000, sleep=False)
        assert p.fits and p.kv_bytes == 20_000_000 and p.concurrent_seqs == 2
        assert p.update_peak == p.total  # vLLM's weights and KV stay while the policy trains

    def test_sleep_gives_the_kv_cache_the_update_s_memory(self):
        p = plan(RESIDENT + ACTS + 20_000_000, sleep=True)
        assert p.fits and p.kv_bytes == p.kv_need == 38_400_000 and p.concurrent_seqs == 4
        assert p.update_peak == WEIGHTS + LORA + ACTS + MARGIN  # vLLM asleep

    def test_less_than_one_sequence_does_not_fit(self):
        p = plan(RESIDENT + ACTS + SEQ_KV - 1, sleep=False)
        assert not p.fits and p.kv_bytes == 0 and "one sequence of 1000 tokens" in p.problem
        assert plan(RESIDENT + ACTS + SEQ_KV - 1, sleep=True).fits
        assert any(line.startswith("does not fit") for line in p.lines())

    def test_sleep_still_needs_room_for_the_update(self):
        kw = {"max_model_len": 1000, "max_completion_tokens": 500, "rollout_seqs": 4, "lora_r": 8, "sleep": True}
        big = plan_local_gpu(SHAPE, total_bytes=RESIDENT + SEQ_KV, micro_batch=100, targets=["q_proj", "v_proj"], **kw)
        assert big.activations == 2 * (100_000 * 1000 * 10 + 100_000 * 13_000 + 3 * 100 * 500 * 10_000)
        assert not big.fits and "update alone" in big.problem  # room for one sequence, not for 7.6 GB of activations

    @pytest.mark.parametrize(
        ("gib", "sleep", "micro_batch", "fits", "kv_gib", "seqs"),
        [  # the table of docs/training.md "GPU memory": 7B, LoRA r=64, 256 rollouts of 6,144 tokens
            (79.6, False, 2, True, 31.9, 97),
            (79.6, False, 8, False, 0.0, 0),
            (79.6, True, 8, True, 42.8, 130),
            (139.8, False, 8, True, 59.5, 181),
            (139.8, True, 8, True, 100.8, 307),
        ],
    )
    def test_the_7b_figures_in_the_docs(self, gib, sleep, micro_batch, fits, kv_gib, seqs):
        p = plan_local_gpu(
            ModelShape.from_config(QWEN25_CODER_7B),
            total_bytes=int(gib * GIB),
            max_model_len=6144,
            max_completion_tokens=4096,
            rollout_seqs=256,
            micro_batch=micro_batch,
            lora_r=64,
            sleep=sleep,
        )
        assert (p.fits, round(p.kv_bytes / GIB, 1), p.concurrent_seqs) == (fits, kv_gib, seqs)


class TestModelLen:
    def test_auto_is_the_prompt_limit_plus_the_completion_budget(self):
        p = GRPOParams(max_prompt_tokens=300, rollout=RolloutParams(max_completion_tokens=700))
        assert resolve_model_len(p).max_model_len == 1000

    def test_a_number_that_would_cut_completions_is_refused(self):
        p = GRPOParams(max_prompt_tokens=300, max_model_len=900, rollout=RolloutParams(max_completion_tokens=700))
        with pytest.raises(ValueError, match=r"grpo.max_model_len 900 < grpo.max_prompt_tokens 300"):
            resolve_model_len(p)
        ok = GRPOParams(max_prompt_tokens=300, max_model_len=4096, rollout=RolloutParams(max_completion_tokens=700))
        assert resolve_model_len(ok).max_model_len == 4096

    @pytest.mark.parametrize("bad", ["big", 0, -5, 1.5])
    def test_hostile_values(self, bad):
        with pytest.raises(ValueError, match=r"grpo\.max_model_len must be auto or a number"):
            GRPOParams(max_model_len=bad)


class TestEngineKVSetting:
    @pytest.fixture
    def model_dir(self, tmp_path: Path) -> Path:
        transformers = pytest.importorskip("transformers")
        transformers.Qwen2Config(**{k: v for k, v in QWEN25_CODER_7B.items() if k != "model_type"}).save_pretrained(
            tmp_path
        )
        return tmp_path

    def params(self, **kw) -> GRPOParams:  # the full profile's GRPO on the paper's policy
        full = {"max_prompt_tokens": 2048, "prompts_per_step": 32, "micro_batch": 8, "lora": LoRAParams(r=64)}
        return resolve_model_len(GRPOParams(**full, rollout=RolloutParams(max_completion_tokens=4096), **kw))

    def test_auto_on_a_gpu_is_the_plan(self, model_dir):
        assert round(gpu_kv_cache_gib(self.params(vllm_sleep=True), model_dir, int(79.6 * GIB)), 1) == 42.8

    def test_a_gpu_too_small_names_the_levers(self, model_dir):
        with pytest.raises(GPUMemoryError, match=r"grpo.micro_batch.*grpo.vllm_sleep: true"):
            gpu_kv_cache_gib(self.params(vllm_sleep=False), model_dir, int(79.6 * GIB))

    def test_a_number_or_the_cpu_keeps_the_param(self, model_dir):
        assert gpu_kv_cache_gib(self.params(vllm_kv_cache_gib=12.5), model_dir, int(79.6 * GIB)) == 12.5
        assert gpu_kv_cache_gib(self.params(), model_dir) == "auto"  # no CUDA here: the CPU build sizes its own


class _SleepyEngine:
    """Records the calls Rollout makes; stands in for vLLM's CUDA-only sleep mode."""

    def __init__(self, fail: bool = False):
        self.calls: list[str] = []
        self.fail = fail

    def wake_up(self):
        self.calls.append("wake_up")

    def sleep(self):
        self.calls.append("sleep")

    def continue_prefixes(self, prefixes, n, **kw):
        self.calls.append("generate")
        if self.fail:
            raise RuntimeError("engine died")
        done = types.SimpleNamespace(text="[/TRACE]", n_tokens=1, finish_reason="stop")
        return [[done] * n for _ in prefixes]


class _Tok:
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[0]["content"]

    def __call__(self, text, add_special_tokens=False):
        return types.SimpleNamespace(input_ids=[ord(c) for c in text])

    def convert_tokens_to_ids(self, token):
        return -7


@pytest.mark.parametrize("fail", [False, True])
def test_rollout_wakes_vllm_before_sampling_and_puts_it_to_sleep_after(fail):
    eng = _SleepyEngine(fail)
    r = Rollout("static", eng, _Tok(), {}, RolloutParams(n_regular=2, n_dbs=0))
    prompt = [{"role": "user", "content": "x"}]
    trainer = types.SimpleNamespace(state=types.SimpleNamespace(global_step=0))
    if fail:
        with pytest.raises(RuntimeError, match="engine died"):
            r([prompt, prompt], trainer)
    else:
        assert len(r([prompt, prompt], trainer)["completion_ids"]) == 2
    assert eng.calls == ["wake_up", "generate", "sleep"]  # asleep again even when sampling failed

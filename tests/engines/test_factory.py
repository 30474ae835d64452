"""engines.open_engine: one factory for evaluation, GRPO rollouts and train_eval (engine classes faked)."""

from __future__ import annotations

import pytest

from codethinker import engines
from codethinker.engines import hf, vllm
from codethinker.engines.kv_cache import KVParamNames


class _Fake:
    def __init__(self, model, tokenizer=None, **opts):
        self.model, self.tokenizer, self.opts, self.lora = model, tokenizer, opts, None

    def set_lora(self, adapter):
        self.lora = adapter


@pytest.fixture
def fakes(monkeypatch):
    monkeypatch.setattr(vllm, "VLLMEngine", _Fake)
    monkeypatch.setattr(hf, "HFEngine", _Fake)


def test_vllm_gets_its_options_the_adapter_and_the_named_params(fakes):
    eng = engines.open_engine("m", "vllm", "ad", kv_params="evaluate.engine", max_num_seqs=None, kv_cache_gib=None)
    assert eng.lora == "ad"
    assert eng.opts == {"kv_params": KVParamNames.under("evaluate.engine"), "kv_cache_gib": None, "enable_lora": True}
    eng = engines.open_engine("m", "vllm", seed=3, batch_size=64, cache="static", enable_lora=True)  # LoRA later
    assert eng.lora is None and eng.opts == {"seed": 3, "enable_lora": True}  # batch_size, cache: transformers'


def test_hf_drops_vllms_options(fakes):
    eng = engines.open_engine(
        "m", "hf", max_model_len=512, kv_cache_gib="auto", seed=0, kv_params="x", batch_size=8, cache="static"
    )
    assert eng.model == "m" and eng.opts == {"batch_size": 8, "cache": "static"}


def test_backends_are_checked():
    assert engines.resolve_backend("hf") == "hf"
    assert engines.resolve_backend("auto") in ("vllm", "hf")
    with pytest.raises(ValueError, match="backend must be one of vllm, hf, openai or auto, got 'tgi'"):
        engines.open_engine("m", "tgi")
    with pytest.raises(ValueError, match="base_url"):
        engines.open_engine("m", "openai")

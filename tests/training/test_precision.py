"""The trainers' precision policy (``sft``/``grpo``/``recode.rm`` ``precision``): fp32 master weights under
``bf16-mixed``, the checkpoint in the dtype asked for, and what pure bf16 weights lose."""

from __future__ import annotations

import json

import pytest

from codethinker.training.common import PRECISIONS, resolve_precision
from codethinker.training.sft import SFTParams, load_sft_rows, run_sft


class TestResolvePrecision:
    @pytest.mark.parametrize(
        ("name", "cuda", "bf16_ok", "want"),
        [
            ("auto", False, False, ("fp32", "float32", "float32", False)),
            ("auto", True, True, ("bf16-mixed", "float32", "bfloat16", True)),
            ("auto", True, False, ("fp32", "float32", "float32", False)),  # a GPU without bf16
            ("bf16-mixed", True, True, ("bf16-mixed", "float32", "bfloat16", True)),
            ("bf16-mixed", False, False, ("bf16-mixed", "float32", "bfloat16", True)),  # CPU autocast
            ("bf16", True, True, ("bf16", "bfloat16", "bfloat16", True)),
            ("fp32", True, True, ("fp32", "float32", "float32", False)),
        ],
    )
    def test_each_name_on_each_machine(self, name, cuda, bf16_ok, want):
        p = resolve_precision(name, cuda=cuda, bf16_ok=bf16_ok)
        assert (p.name, p.load_dtype, p.save_dtype, p.trainer_flags()["bf16"]) == want
        assert p.trainer_flags()["use_cpu"] is (not cuda) and p.trainer_flags()["fp16"] is False

    def test_unknown_names_and_bf16_on_a_gpu_without_it_are_refused(self):
        with pytest.raises(ValueError, match="not one of"):
            resolve_precision("fp16", cuda=True, bf16_ok=True)
        with pytest.raises(ValueError, match="no bf16"):
            resolve_precision("bf16-mixed", cuda=True, bf16_ok=False)

    def test_the_params_refuse_an_unknown_precision(self):
        assert set(PRECISIONS) == {"auto", "bf16-mixed", "bf16", "fp32"}
        with pytest.raises(ValueError, match=r"sft\.precision must be one of"):
            SFTParams(precision="half")


def test_a_small_update_lands_on_fp32_master_weights_and_rounds_away_on_bf16_ones():
    """Why ``bf16-mixed`` is the GPU default: an update of 1e-4 of a weight's size is below bf16's resolution
    (2^-8, about 0.4%), so bf16 weights do not move, fp32 master weights do."""
    import torch

    w = torch.full((1000,), 1.0)
    step = torch.full((1000,), 1e-4)
    assert torch.equal((w.bfloat16() - step.bfloat16()).float(), w)  # pure bf16: every update lost
    assert not torch.equal(w - step, w)  # fp32 master weights: every update kept


@pytest.mark.slow
def test_bf16_mixed_sft_on_cpu_keeps_fp32_master_weights_and_writes_a_bf16_checkpoint(tmp_path, sft_jsonl, monkeypatch):
    """The policy run for real without a GPU (CPU autocast): the trained model's weights stay fp32 through the
    steps, every weight moves, and ``merged/`` is written in bf16, what the user asked for."""
    import torch
    from safetensors import safe_open

    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.tokenizer import train_bpe

    texts = [json.dumps(r["messages"]) for r in load_sft_rows(sft_jsonl)]
    base = build_tiny_model(tmp_path / "base", train_bpe(texts, vocab_size=512), seed=0)
    seen: list[torch.dtype] = []

    from transformers import TrainerCallback

    class Dtypes(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            seen.extend({q.dtype for q in model.parameters()})

    import codethinker.training.sft as sft_mod

    make = sft_mod.make_sft_trainer

    def with_probe(*a, **kw):
        trainer = make(*a, **kw)
        trainer.add_callback(Dtypes())
        assert trainer.args.bf16 is True  # autocast on
        return trainer

    p = SFTParams(finetune="full", max_steps=3, batch_size=4, save_steps=50, max_length=4096, precision="bf16-mixed")
    monkeypatch.setattr(sft_mod, "make_sft_trainer", with_probe)  # a probe beside the real trainer, not instead
    m = run_sft(base, sft_jsonl, tmp_path / "sft", p)
    assert m["steps"] == 3 and set(seen) == {torch.float32}
    with safe_open(str(tmp_path / "sft" / "merged" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}  # noqa: SIM118

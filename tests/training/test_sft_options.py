"""``sft.processes``: SFT in several processes (DDP under ``accelerate launch``; gloo on a CPU) trains as one
process does at the same global batch; ``sft.padding_free`` and ``sft.compile`` reach TRL's config."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from codethinker.training.sft import (
    SFTParams,
    load_sft_rows,
    load_tokenizer,
    make_sft_trainer,
    run_sft,
    sft_config,
    to_prompt_completion,
    training_order,
)
from codethinker.training.sft_launch import WORKER, global_batch_order, launch_command


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory: pytest.TempPathFactory, sft_jsonl: Path) -> Path:
    """A tiny random Qwen2 with a 512-token BPE trained on the SFT rows (the micro policy's kind)."""
    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.tokenizer import train_bpe

    texts = [json.dumps(r["messages"]) for r in load_sft_rows(sft_jsonl)]
    return build_tiny_model(tmp_path_factory.mktemp("bpe") / "base", train_bpe(texts, vocab_size=512), seed=0)


class FakeRun:
    """The stage's MLflow run: what reaches it, per step."""

    def __init__(self) -> None:
        self.logged: list[tuple[int, dict]] = []

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        self.logged.append((step or 0, metrics))


def test_processes_are_counted_in_the_global_batch():
    with pytest.raises(ValueError, match=r"sft\.processes must be at least 1"):
        SFTParams(processes=0)
    p = SFTParams(batch_size=2, grad_accum=3, processes=2, max_steps=5, copy_warmup=0.4, save_steps=50)
    assert p.step_rows == 4
    kept = [{"prompt": [{"role": "user", "content": "x" * n}], "completion": []} for n in range(1, 9)]
    rows, _, copy_steps = training_order(kept, list(range(1, 9)), lambda convs: [10] * len(convs), p)
    assert len(rows) == 5 * 3 * 4 and copy_steps == 2  # 5 steps of 2 rows x 3 micro-batches x 2 processes
    assert sft_config(Path("ck"), p, len(rows), ordered=True).max_steps == 5


def test_the_launch_runs_the_worker_under_accelerate(tmp_path):
    cmd = launch_command(3, tmp_path / "spec.json")
    assert cmd[1:3] == ["-m", "accelerate.commands.launch"] and "--multi_gpu" in cmd
    assert cmd[cmd.index("--num_processes") + 1] == "3" and cmd[cmd.index("--main_process_port") + 1] == "0"
    assert cmd[-3:] == ["-m", WORKER, str(tmp_path / "spec.json")]


def test_length_grouping_spans_the_global_batch():
    """group_by_length in 2 processes x 2 rows (8 micro-batches a step) orders the rows as 1 process x 4 rows does
    (transformers' sampler, sized by one process's rows, gives another order)."""
    import random
    from types import SimpleNamespace

    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    rng = random.Random(0)
    lengths = [rng.randrange(10, 500) for _ in range(1000)]

    class Trainer:  # the sampler transformers' trainer builds: per-device rows x accumulation
        def __init__(self, batch: int, world: int) -> None:
            self.args = SimpleNamespace(world_size=world, batch=batch)

        def _get_train_sampler(self, train_dataset=None):
            return LengthGroupedSampler(self.args.batch * 8, lengths=lengths)

    def order(trainer) -> list[int]:
        torch.manual_seed(0)
        return list(trainer._get_train_sampler())

    one = order(Trainer(4, 1))
    assert order(global_batch_order(Trainer)(2, 2)) == one
    assert order(Trainer(2, 2)) != one
    assert order(global_batch_order(Trainer)(4, 1)) == one  # one process: as it was


def test_padding_free_and_compile_reach_trls_config(tmp_path):
    off = sft_config(tmp_path, SFTParams(max_length=480), 10, ordered=False)
    assert (off.padding_free, off.torch_compile, off.max_length) == (False, False, 480)
    on = sft_config(tmp_path, SFTParams(max_length=480, padding_free=True, compile=True), 10, ordered=False)
    assert (on.padding_free, on.torch_compile) == (True, True)
    assert on.max_length is None  # TRL truncates nothing padding-free; the rows were dropped to fit before


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["logits", "fused"])
def test_a_padding_free_batch_scores_as_the_padded_one(tmp_path, sft_jsonl, bpe_model, loss):
    """sdpa on a CPU (the policy's attention): the packed row's mask keeps each row to itself (transformers
    builds it from position_ids), so loss, token counts and gradients equal the padded batch's."""
    import torch
    from datasets import Dataset

    tok = load_tokenizer(bpe_model)
    rows = [to_prompt_completion(r) for r in load_sft_rows(sft_jsonl)[:4]]
    got = {}
    for free in (False, True):
        p = SFTParams(finetune="full", loss=loss, padding_free=free, max_length=4096)
        args = sft_config(tmp_path / str(free), p, len(rows), ordered=True)
        trainer = make_sft_trainer(bpe_model, tok, Dataset.from_list(rows), args, p)
        assert trainer.model.config._attn_implementation == "sdpa"
        batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(rows))])
        real = sum(len(trainer.train_dataset[i]["input_ids"]) for i in range(len(rows)))
        if free:
            assert "attention_mask" not in batch and batch["input_ids"].shape == (1, real)
        else:
            assert batch["input_ids"].numel() > real  # rows of several lengths: padding
        trainer.model.train()
        value = trainer.compute_loss(trainer.model, dict(batch))
        value.backward()
        grads = {n: q.grad.clone() for n, q in trainer.model.named_parameters() if q.grad is not None}
        got[free] = (float(value.detach()), trainer._metrics["train"]["num_tokens"][-1], grads)
    assert got[True][0] == pytest.approx(got[False][0], rel=1e-5)
    assert got[True][1] == got[False][1] == real
    assert got[True][2].keys() == got[False][2].keys()
    for name, g in got[False][2].items():
        assert torch.allclose(got[True][2][name], g, rtol=1e-4, atol=1e-6), name


def _curve(out: Path) -> list[dict[str, str]]:
    with open(out / "train_log.csv") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("loss", "copy_warmup", "accum"), [("logits", 0.5, 2), ("fused", 0.0, 1)], ids=["curriculum", "by-length"]
)
def test_two_gloo_processes_follow_one_processs_loss_curve(tmp_path, sft_jsonl, bpe_model, loss, copy_warmup, accum):
    """1 process x 4 rows against 2 processes x 2 rows a micro-batch, same seed and rows, no dropout (by length: 8
    rows, 2 steps an epoch, so the order decides each step's rows):
    the same losses (rtol 1e-4), token counts and accuracy at every step; rank 0 alone writes the curve and the
    policy; the stage's run gets rank 0's metrics."""
    import torch
    from safetensors.torch import load_file

    curves, runs = {}, {}
    for n in (1, 2):
        p = SFTParams(finetune="full", loss=loss, batch_size=4 // n, grad_accum=accum, processes=n, max_steps=4,
                      copy_warmup=copy_warmup, save_steps=50, max_length=4096, learning_rate=3e-3)  # fmt: skip
        runs[n] = FakeRun()
        m = run_sft(bpe_model, sft_jsonl, tmp_path / str(n), p, run=runs[n])
        assert m["steps"] == 4 and m["first_loss"] is not None
        curves[n] = _curve(tmp_path / str(n))
    assert [r["step"] for r in curves[2]] == [r["step"] for r in curves[1]] == ["1", "2", "3", "4"]
    for one, two in zip(curves[1], curves[2], strict=True):
        assert float(two["loss"]) == pytest.approx(float(one["loss"]), rel=1e-4)
        assert float(two["num_tokens"]) == float(one["num_tokens"])
        assert float(two["mean_token_accuracy"]) == pytest.approx(float(one["mean_token_accuracy"]), abs=1e-6)
    assert [s for s, _ in runs[2].logged] == [s for s, _ in runs[1].logged]
    assert [k for _, m in runs[2].logged for k in m] == [k for _, m in runs[1].logged for k in m]
    a, b = (load_file(tmp_path / str(n) / "merged" / "model.safetensors") for n in (1, 2))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=1e-3, atol=1e-5) for k in a)


@pytest.mark.slow
def test_a_compiled_step_runs_on_a_cpu_and_scores_as_the_eager_one(tmp_path, sft_jsonl, bpe_model):
    """``sft.compile``: TorchDynamo captures the policy (inductor's CPU backend; about 40 s on two cores) and
    the first step's loss is the eager one's."""
    import torch

    first = {}
    for compiled in (False, True):
        torch._dynamo.utils.counters.clear()
        p = SFTParams(finetune="full", loss="logits", batch_size=2, max_steps=1, save_steps=50, max_length=4096,
                      compile=compiled)  # fmt: skip
        m = run_sft(bpe_model, sft_jsonl, tmp_path / str(compiled), p)
        first[compiled] = m["first_loss"]
        assert bool(torch._dynamo.utils.counters["stats"]["unique_graphs"]) is compiled
    assert first[True] == pytest.approx(first[False], rel=1e-5)

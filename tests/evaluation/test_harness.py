"""Answer extraction, judging and metrics of the harness (no model, no mirror needed)."""

from __future__ import annotations

import pytest

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow
from codethinker.evaluation.benchmarks import Problem, Sample, TracedBenchmark
from codethinker.evaluation.harness import (
    EvalConfig,
    ModelSpec,
    evaluate_model,
    evaluate_samples,
    extract_answer,
    harness_equal,
    judge,
    model_problem,
    one_line,
    summarize,
)
from tests.evaluation.scripted import LookupEngine, constant_text, oracle_text

TRUTH = (
    '{"entry": "f", "input": "[1, 2]", "code": "def f(xs):\\n    t = 0\\n    for x in xs:\\n        t += x\\n'
    '    return t\\n", "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{\'xs\': [1, 2], \'t\': 0}"},'
    ' {"start": 2, "end": 3, "weight": 2, "locals": "{\'xs\': [1, 2], \'t\': 3, \'x\': 2}"},'
    ' {"start": 4, "end": 4, "weight": 1, "locals": "{\'xs\': [1, 2], \'t\': 3, \'x\': 2}"}], "output": "3"}'
)


@pytest.fixture()
def sample() -> Sample:
    flow = Flow.from_json(TRUTH)
    return Sample(Problem("t/0", "cruxeval", "\n".join(flow.lines), "f", "[1, 2]", "3"), flow)


@pytest.mark.parametrize(
    ("text", "fmt", "found", "value"),
    [
        ("[TRACE]\n[RETURN]\nassert f([1, 2]) == 3\n[/RETURN]\n[/TRACE]", "contra", True, 3),
        ("[THOUGHT]\n[/THOUGHT]\n[ANSWER]\nassert f([1, 2]) == 'a==b'\n[/ANSWER]", "vanilla", True, "a==b"),
        ("[ANSWER]\n[1, (2, 3)]\n[/ANSWER]", "vanilla", True, [1, (2, 3)]),  # bare literal, as CRUXEval allows
        ("[ANSWER]\nassert f(1) == 3", "vanilla", True, 3),  # cut before the closing tag
        ("[RETURN]\nassert f(1) == 1\n[/RETURN]\n[RETURN]\nassert f(1) == 2\n[/RETURN]", "contra", True, 2),
        ("[RETURN]\nassert f(1) == f(1)\n[/RETURN]", "contra", False, None),  # a call is not a literal
        ("[RETURN]\nassert f(1) == __import__('os').system('x')\n[/RETURN]", "contra", False, None),
        ("no answer at all", "contra", False, None),
        ("[ANSWER]\n[/ANSWER]", "vanilla", False, None),
        ("[RETURN]\nassert f(1) == " + "[" * 5000 + "]" * 5000 + "\n[/RETURN]", "contra", False, None),
    ],
)
def test_extract_answer(text, fmt, found, value):
    assert extract_answer(text, fmt) == (found, value)


def test_harness_equal_is_pythons_eq():
    assert harness_equal(1, True) and harness_equal(1.0, 1) and harness_equal({1, 2}, {2, 1})
    assert not harness_equal((1, 2), [1, 2]) and not harness_equal(0.1 + 0.2, 0.3)


def test_judge_contra_counts_rcs_and_format(sample):
    good = render_trace(sample.flow, ["a", "b", "c"])
    assert judge(good, sample, "contra") == {
        "answered": 1,
        "pass": 1,
        "pass_strict": 1,
        "fmt": 1,
        "rcs": 1.0,
        "reason": None,
    }
    wrong_block = good.replace("{'xs': [1, 2], 't': 3, 'x': 2}", "{'xs': [1, 2], 't': 2, 'x': 2}", 1)
    j = judge(wrong_block, sample, "contra")
    assert j["fmt"] == 1 and j["pass"] == 1 and j["rcs"] == pytest.approx(1 / 3)
    loose = good.replace("== 3", "== 3.0")  # harness: 3 == 3.0 passes; the reward's strict check does not
    j = judge(loose, sample, "contra")
    assert j["pass"] == 1 and j["pass_strict"] == 0


def test_judge_vanilla_has_no_rcs(sample):
    j = judge(oracle_text(sample, "vanilla"), sample, "vanilla")
    assert j == {"answered": 1, "pass": 1, "pass_strict": 1, "fmt": 1, "rcs": None, "reason": None}
    j = judge("[ANSWER]\nassert f([1, 2]) == 3\n[/ANSWER]", sample, "vanilla")
    assert j["pass"] == 1 and j["fmt"] == 0 and j["pass_strict"] == 0


def test_runs_use_consecutive_seeds_and_std(sample):
    answers = iter(["3", "4", "3", "3"])
    engine = LookupEngine([sample], "vanilla", lambda s, f: constant_text(s, f, next(answers)))
    config = EvalConfig(runs=4, seed=7, temperature=0.5, max_tokens=9)
    records, timing = evaluate_samples(engine, [sample], "vanilla", config)
    assert [c["seed"] for c in engine.calls] == [7, 8, 9, 10]
    assert all(c["stop"] == ["[/ANSWER]"] and c["temperature"] == 0.5 and c["max_tokens"] == 9 for c in engine.calls)
    m = summarize(
        records, timing, benchmark="cruxeval", spec=ModelSpec("m", "m", format="vanilla"), config=config, n_problems=1
    )
    assert m["pass1_runs"] == [1.0, 0.0, 1.0, 1.0]
    assert m["pass1_mean"] == 0.75 and m["pass1_std"] == pytest.approx(0.5)
    assert m["runs"] == 4 and m["n_samples"] == 1 and m["rcs_mean"] is None


def test_evaluate_model_writes_files_and_skips(tmp_path, sample):
    bench = TracedBenchmark("cruxeval", [sample.problem], [sample], [], [])
    engine = LookupEngine([sample], "contra", oracle_text)
    out = evaluate_model(
        ModelSpec("oracle", "x"),
        {"cruxeval": bench, "livecodebench": "offline"},
        EvalConfig(runs=2),
        engine=engine,
        pred_dir=tmp_path / "p",
        metrics_dir=tmp_path / "m",
        log=lambda s: None,
    )
    assert out["cruxeval"]["pass1_mean"] == 1.0 and out["livecodebench"]["skipped"] == "offline"
    assert (tmp_path / "p" / "cruxeval.jsonl").read_text().count("\n") == 2
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["cruxeval.json", "livecodebench.json"]
    assert "pass@1 100.00 ± 0.00 %" in one_line(out["cruxeval"])


def test_evaluate_model_with_a_bar_writes_its_lines_above_it(tmp_path, sample, capfd):
    bench = TracedBenchmark("cruxeval", [sample.problem], [sample], [], [])
    engine = LookupEngine([sample], "contra", oracle_text)
    benches = {"cruxeval": bench, "livecodebench": "offline"}
    evaluate_model(ModelSpec("oracle", "x"), benches, EvalConfig(runs=2), engine=engine, progress="evaluate@oracle")
    err = capfd.readouterr().err
    assert "evaluate@oracle" in err and "2/2" in err  # one step a benchmark (the engine was given: no start step)
    assert "oracle CRUXEval-O: pass@1 100.00" in err and "livecodebench" in err.lower()


def test_eval_config_and_model_spec_check_themselves():
    # built from params.yaml by codethinker.config (tests/test_config.py::test_evaluate_config_by_profile)
    with pytest.raises(ValueError, match="runs"):
        EvalConfig(runs=0)
    with pytest.raises(ValueError, match="format"):
        ModelSpec("x", "y", format="xml")


def test_model_problem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    assert model_problem(ModelSpec("h", "Qwen/Qwen2.5-Coder-7B-Instruct")) is None  # a hub id
    assert "not found: models/base" in model_problem(ModelSpec("b", "models/base"))
    assert "adapter folder not found" in model_problem(ModelSpec("b", "models", adapter="nope/x"))


def test_contra_bare_format_prompts_like_the_micro_policy_and_judges_like_contra(sample):
    from codethinker.contra.render import render_prompt
    from codethinker.evaluation.harness import STOP, prompt_messages

    assert prompt_messages(sample, "contra-bare") == render_prompt(sample.flow, "bare")
    assert prompt_messages(sample, "contra") == render_prompt(sample.flow)
    good = render_trace(sample.flow)  # empty thoughts: what the micro policy writes
    assert judge(good, sample, "contra-bare") == judge(good, sample, "contra")
    assert judge(good, sample, "contra-bare")["fmt"] == 1 and STOP["contra-bare"] == STOP["contra"]
    with pytest.raises(ValueError, match="contra-bare"):
        ModelSpec("m", "models/base", format="bare")

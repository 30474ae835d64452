"""The generalization harness (codethinker/evaluation/generalize.py): the pass@k estimator, one
evaluation end to end through the Engine contract, CRUXEval-I's extraction and sandboxed judge (its
oracle on all 800 programs), Table 4, and ``codethinker eval --bench`` routing."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.engines.base import Completion
from codethinker.evaluation.generalize import (
    NAMES,
    GenConfig,
    Item,
    Verdict,
    evaluate_task,
    get_task,
    known,
    oracle_check,
    pass_at_k,
    run_benchmarks,
    summary_lines,
)
from codethinker.evaluation.input_prediction import CRUXEvalInput, literal_call, predicted_args


class TestPassAtK:
    def test_matches_the_definition_by_enumeration(self):
        """pass@k = P(at least one of k samples drawn without replacement is correct)."""
        for n in range(1, 7):
            for c in range(n + 1):
                for k in range(1, n + 1):
                    draws = list(combinations([1] * c + [0] * (n - c), k))
                    assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))

    @pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0)])
    def test_invalid_counts_are_refused(self, n, c, k):
        with pytest.raises(ValueError, match="need 0 <= c <= n"):
            pass_at_k(n, c, k)


def test_unknown_benchmark_names_the_known_ones():
    with pytest.raises(ValueError, match=r"known: .*humaneval"):
        get_task("humaneva")
    assert known("HumanEval+") and known("lcb-cg") and not known("cruxeval")
    assert {"cruxeval-i", "gsm8k", "mbpp+"} <= set(NAMES)


class _Echo:
    """An Engine whose answer to each prompt is scripted by the item (n answers, in order)."""

    def __init__(self, answers: dict[str, list[str]]):
        self.answers, self.calls = answers, []

    def apply_chat_template(self, messages):
        return messages[0]["content"]

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        self.calls.append({"n": n, "stop": stop, "max_tokens": max_tokens, "seed": seed})
        return [[Completion(t, 3, "stop") for t in self.answers[p][:n]] for p in prefixes]


class _Exact:
    name, display, group, stop = "exact", "Exact", "test", ("END",)

    def judge(self, items, texts):
        return [
            Verdict(t == it.reference["gold"], "pass" if t == it.reference["gold"] else "fail")
            for it, t in zip(items, texts, strict=True)
        ]


class TestEvaluateTask:
    def test_pass1_is_the_mean_of_per_problem_shares_and_statuses_are_counted(self):
        items = [Item(f"p{i}", [{"role": "user", "content": f"q{i}"}], {"gold": "y"}) for i in range(3)]
        engine = _Echo({"q0": ["y", "y", "n", "n"], "q1": ["n"] * 4, "q2": ["y"] * 4})
        records, m = evaluate_task(engine, _Exact(), items, GenConfig(n=4, max_tokens=7, seed=5))
        assert m["pass1"] == pytest.approx((0.5 + 0 + 1) / 3)
        assert m["pass1_ci_low"] <= m["pass1"] <= m["pass1_ci_high"]
        assert m["statuses"] == {"pass": 6, "fail": 6} and m["n_answers"] == 12 and m["n_problems"] == 3
        assert engine.calls == [{"n": 4, "stop": ["END"], "max_tokens": 7, "seed": 5}]
        assert [r["sample"] for r in records[:4]] == [0, 1, 2, 3] and records[0]["id"] == "p0"

    def test_limit_takes_the_first_problems(self):
        items = [Item(f"p{i}", [{"role": "user", "content": f"q{i}"}], {"gold": "y"}) for i in range(3)]
        _, m = evaluate_task(_Echo({f"q{i}": ["y"] for i in range(3)}), _Exact(), items, GenConfig(limit=2))
        assert m["n_problems"] == 2


class TestPredictedArgs:
    @pytest.mark.parametrize(
        ("text", "args"),
        [
            ("[ANSWER]\nassert f('ab', 2) == 'abab'\n[/ANSWER]", "'ab', 2"),
            ("[ANSWER]\nf([1, 2])\n[/ANSWER]", "[1, 2]"),
            ("[ANSWER]\n[1, 2], 3\n[/ANSWER]", "[1, 2], 3"),  # the argument text alone
            ("[ANSWER]\nassert f(*[1], k=2, **{'z': 3}) == 0\n[/ANSWER]", "*[1], k=2, **{'z': 3}"),
            ("[ANSWER]\nassert f() == 0\n[/ANSWER]", ""),
            ("[ANSWER]x[/ANSWER] [ANSWER]\nassert f(7) == 1\n", "7"),  # the last group, unclosed
        ],
    )
    def test_valid(self, text, args):
        assert predicted_args(text) == args

    @pytest.mark.parametrize(
        "text",
        [
            "no answer here",
            "[ANSWER]\n[/ANSWER]",
            "[ANSWER]\nf(1); import os\n[/ANSWER]",  # two statements: never executed
            "[ANSWER]\n1), __import__('os').system('x')#\n[/ANSWER]",  # breaks out of the call
            "[ANSWER]\nassert g(1) == 2\n[/ANSWER]",  # another function
            "[ANSWER]\n" + "(" * 500 + "\n[/ANSWER]",
        ],
    )
    def test_invalid(self, text):
        assert predicted_args(text) is None

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=300))
    def test_any_text_gives_none_or_a_single_call(self, body):
        import ast

        args = predicted_args(f"[ANSWER]\n{body}\n[/ANSWER]")
        if args is not None:
            call = ast.parse(f"f({args})", mode="eval").body
            assert isinstance(call, ast.Call) and call.func.id == "f"


@pytest.fixture(scope="module")
def crux_items(data_mirror: Path, tmp_path_factory):
    return CRUXEvalInput().load(data_mirror, tmp_path_factory.mktemp("cache"))


@pytest.mark.needs_shared
class TestCRUXEvalInput:
    def test_oracle_every_given_input_is_accepted(self, crux_items):
        """CRUXEval's own rule, in the sandbox: `output == f(given input)` for the 800 programs.
        All but the 3 whose inputs have no literal form (two lambdas, a range): f runs only on data."""
        res = oracle_check(CRUXEvalInput(), crux_items)
        assert (res["n"], res["passed"]) == (800, 797)
        assert {(f["id"], f["status"]) for f in res["failures"]} == {
            (f"sample_{n}/0", "not_data") for n in (344, 364, 522)
        }

    def test_valid_invalid_and_hostile_answers(self, crux_items):
        item = crux_items[0]
        out = item.reference["output"]
        texts = [
            f"[ANSWER]\nassert f({item.reference['input']}) == {out}\n[/ANSWER]",
            "[ANSWER]\nassert f([]) == 0\n[/ANSWER]",
            "[ANSWER]\nf(__import__('os')._exit(0))\n[/ANSWER]",
            "[ANSWER]\nf(exec('while True: pass'))\n[/ANSWER]",
            "[ANSWER]\nf(open('/tmp/x_cg', 'w').write('x'))\n[/ANSWER]",
            "[ANSWER]\nf(__import__('os').fork())\n[/ANSWER]",
            "garbage",
        ]
        verdicts = CRUXEvalInput(timeout_s=1.0).judge([item] * len(texts), texts)
        assert [v.passed for v in verdicts] == [True] + [False] * 6
        assert verdicts[3].status == "timeout" and verdicts[6].status == "no_answer"
        assert {v.status for v in verdicts[1:6]} <= {"fail", "error", "killed", "timeout"}
        assert not Path("/tmp/x_cg").exists()

    def test_the_prompt_shows_the_code_and_the_output(self, crux_items):
        text = crux_items[0].messages[0]["content"]
        assert crux_items[0].reference["code"].strip() in text
        assert f"assert f(??) == {crux_items[0].reference['output']}" in text


class TestCRUXEvalInputJudge:
    """The expected output never enters the sandbox: ``f`` runs on literal arguments and its plain value is
    compared outside, so an answer can only pass by giving an input whose output is the stated one."""

    PASS_THROUGH = Item("t/0", [], {"code": "def f(x):\n    return x\n", "output": "[1, 2]", "input": "[1, 2]"})
    UPPER = Item("u/0", [], {"code": "def f(s):\n    return s.upper()\n", "output": "'AB'", "input": "'ab'"})
    EQ_TRUE = "type('E', (), {'__eq__': lambda s, o: True, '__hash__': object.__hash__})()"
    HOSTILE: ClassVar[
        dict[str, tuple[Item, str]]
    ] = {  # each passed the judge that ran `(output) == f(args)` in the sandbox
        "forged __eq__": (PASS_THROUGH, f"f({EQ_TRUE})"),
        "subclass of the output's type": (PASS_THROUGH, "f(type('L', (list,), {'__eq__': lambda s, o: True})())"),
        "a method of a str subclass": (UPPER, f"f(type('S', (str,), {{'upper': lambda s: {EQ_TRUE}}})('x'))"),
    }

    def judge(self, item: Item, call: str) -> Verdict:
        text = f"[ANSWER]\nassert {call} == {item.reference['output']}\n[/ANSWER]"
        return CRUXEvalInput(timeout_s=2.0).judge([item], [text])[0]

    @pytest.mark.parametrize("name", list(HOSTILE))
    def test_hostile_answers_do_not_pass(self, name):
        item, call = self.HOSTILE[name]
        assert not self.judge(item, call).passed

    def test_right_and_wrong_literal_answers(self):
        assert self.judge(self.PASS_THROUGH, "f([1, 2])").passed
        assert self.judge(self.UPPER, "f(s='ab')").passed
        wrong = self.judge(self.UPPER, "f('ac')")
        assert (wrong.passed, wrong.status) == (False, "fail")

    def test_an_argument_expression_is_evaluated_apart_and_marked(self):
        v = self.judge(self.UPPER, "f('a' + 'b')")
        assert (v.passed, v.status) == (True, "pass") and v.detail.endswith("evaluated apart from f)")
        assert self.judge(self.UPPER, "f(''.join(['a', 'c']))").status == "fail"
        assert self.judge(self.UPPER, "f(s=str.lower('AB'))").passed
        assert self.judge(self.PASS_THROUGH, "f(list(range(1, 3)))").passed

    FORGE = "setattr(f, '__code__', (lambda s: 'AB').__code__)"  # f answers the stated output, whatever s is

    @pytest.mark.parametrize(
        "call",
        [
            f"f(({FORGE}, 'zz')[1])",  # f rebound while its argument is evaluated
            f"f(s=({FORGE}, 'zz')[1])",
            "f((__import__('builtins').__setattr__('str', None), 'zz')[1])",  # the process's builtins patched
        ],
    )
    def test_an_argument_expression_cannot_change_the_f_that_is_judged(self, call):
        """The first two passed the judge that ran the expression in f's process."""
        v = self.judge(self.UPPER, call)
        assert (v.passed, v.status) == (False, "fail"), v

    @pytest.mark.parametrize("call", ["f(lambda: 'ab')", "f(range(2))", "f(__import__('collections').deque('ab'))"])
    def test_an_argument_without_a_literal_form_is_not_data(self, call):
        v = self.judge(self.UPPER, call)
        assert (v.passed, v.status) == (False, "not_data") and "no literal form" in v.detail

    def test_an_argument_expression_that_raises_is_an_error(self):
        v = self.judge(self.UPPER, "f(1 // 0)")
        assert (v.passed, v.status) == (False, "error") and "ZeroDivisionError" in v.detail

    def test_literal_call(self):
        assert literal_call("[1, (2,)], k={3}") == (([1, (2,)],), {"k": {3}})
        assert literal_call("x") is None and literal_call("print(1)") is None and literal_call(None) is None


def test_run_benchmarks_writes_a_skipped_benchmark_with_its_reason(tmp_path):
    res = run_benchmarks(None, ["lcb-cg"], GenConfig(), mirror=None, cache_dir=tmp_path, metrics_dir=tmp_path)
    assert "Hugging Face hub" in res["lcb-cg"]["skipped"]
    assert json.loads((tmp_path / "lcb-cg.json").read_text())["skipped"] == res["lcb-cg"]["skipped"]


def test_table4_rows_columns_and_skips():
    from codethinker.evaluation.general_report import PAPER_NOTE, table

    cell = {"pass1": 0.5, "pass1_ci_low": 0.25, "pass1_ci_high": 0.75, "n_problems": 4}
    results = {
        "grpo": {"gsm8k": {**cell, "display": "GSM8K"}, "lcb-cg": {"benchmark": "lcb-cg", "skipped": "offline"}},
        "base": {"cruxeval-i": {**cell, "display": "CRUXEval-I"}},
    }
    lines = table(results).splitlines()
    assert lines[0] == "| model | CRUXEval-I | GSM8K |"  # group order: input before math
    assert lines[2] == "| base | 50.0 [25.0, 75.0] (4) | n/a |"
    assert lines[3] == "| grpo | n/a | 50.0 [25.0, 75.0] (4) |"
    assert "lcb-cg: LiveCodeBench-CG lives only on the Hugging Face hub" in table(results)
    assert "+5.33 pp" in PAPER_NOTE


class _Scripted:
    """Answers every prompt with the reference answer of the item it shows (an oracle model)."""

    def __init__(self, answers: dict[str, str]):
        self.answers = answers

    def apply_chat_template(self, messages):
        return messages[-1]["content"]

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        return [[Completion(self.answers.get(p, "no idea"), 5, "stop")] * n for p in prefixes]


@pytest.mark.needs_shared
@pytest.mark.slow
def test_run_benchmarks_end_to_end_with_an_oracle_model(data_mirror, tmp_path):
    """Real tasks, real judges (sandbox, math-verify): an engine that writes each reference answer scores
    100% on the slice; the files the stage writes are there and agree with the returned metrics."""
    names = ["cruxeval-i", "humaneval", "mbpp+", "gsm8k", "math500", "reval-s"]
    answers = {}
    for name in names:
        task = get_task(name)
        for it in task.load(data_mirror, tmp_path / "cache")[:5]:
            answers[it.messages[-1]["content"]] = task.reference_text(it)
    res = run_benchmarks(
        _Scripted(answers),
        [*names, "lcb-cg"],
        GenConfig(n=2, limit=5),
        mirror=data_mirror,
        cache_dir=tmp_path / "cache",
        pred_dir=tmp_path / "pred",
        metrics_dir=tmp_path / "met",
    )
    for name in names:
        assert res[name]["pass1"] == 1.0 and res[name]["n_answers"] == 10, (name, res[name]["statuses"])
        assert json.loads((tmp_path / "met" / f"{name}.json").read_text())["pass1"] == 1.0
        assert len((tmp_path / "pred" / f"{name}.jsonl").read_text().splitlines()) == 10
    assert "skipped" in res["lcb-cg"]
    lines = summary_lines(res)  # the stage's log: one line per group that ran, one per skip reason
    assert lines[0] == "pass@1 % (problems): input CRUXEval-I 100.0 (5)"
    assert [line.split()[0] for line in lines[1:-1]] == ["codegen", "math", "runtime"]
    assert lines[-1].startswith("skipped (LiveCodeBench-CG lives only on the Hugging Face hub")
    assert lines[-1].endswith("): lcb-cg")


def test_summary_lines_group_benchmarks_and_skip_reasons():
    cell = {"pass1": 0.5, "n_problems": 4}
    res = {
        "gsm8k": {**cell, "display": "GSM8K", "group": "math"},
        "humaneval": {**cell, "display": "HumanEval", "group": "codegen"},
        "math500": {**cell, "pass1": 0.125, "display": "MATH500", "group": "math"},
        "cruxeval-x-go": {"benchmark": "cruxeval-x-go", "skipped": "runtime missing: go"},
        "cruxeval-x-php": {"benchmark": "cruxeval-x-php", "skipped": "runtime missing: php"},
    }
    assert summary_lines(res) == [
        "pass@1 % (problems): math GSM8K 50.0 (4) · MATH500 12.5 (4)",
        "                     codegen HumanEval 50.0 (4)",
        "skipped (runtime missing): cruxeval-x-go, cruxeval-x-php",
    ]
    assert summary_lines({}) == []


def test_cruxeval_x_alias_expands_to_its_languages():
    from codethinker.evaluation.generalize import CRUXEVAL_X_LANGUAGES, expand

    assert expand(["GSM8K", "cruxeval-x", "gsm8k"]) == ["gsm8k", *(f"cruxeval-x-{x}" for x in CRUXEVAL_X_LANGUAGES)]
    assert len(CRUXEVAL_X_LANGUAGES) == 19 and known("cruxeval-x") and known("cruxeval-x-rs")


def test_table12_and_the_cruxeval_x_mean_in_table4():
    from codethinker.evaluation.general_report import table, table12

    ok = {"pass1": 0.5, "pass1_ci_low": 0.0, "pass1_ci_high": 1.0, "n_problems": 2, "display": "x"}
    results = {
        "sft": {
            "cruxeval-x-cpp": ok,
            "cruxeval-x-rb": {"skipped": "runtime missing: ruby"},
            "cruxeval-x-js": {**ok, "pass1": 0.0},
        }
    }
    assert table(results).splitlines()[:3] == ["| model | CRUXEval-X |", "|---|---|", "| sft | 25.0 (2 langs) |"]
    assert table12(results).splitlines()[2:] == [
        "| cpp | 50.0 (2) |",
        "| js | 0.0 (2) |",
        "| rb | runtime missing: ruby |",
    ]

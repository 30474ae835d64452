"""Benchmark loaders: REval argument text, LiveCodeBench rows, names, truth files."""

from __future__ import annotations

import pytest

from codethinker.evaluation import benchmarks as bm


@pytest.mark.parametrize(
    ("tuple_text", "args"),
    [
        ("([1.0, 2.0, 3.9], 0.3,)", "[1.0, 2.0, 3.9], 0.3"),
        ("('(()()) ((()))',)", "'(()()) ((()))'"),
        ("(3, 1e-3)", "3, 1e-3"),
        ("()", ""),
        ("'abc'", "'abc'"),
    ],
)
def test_reval_args(tuple_text, args):
    assert bm.reval_args(tuple_text) == args


def test_canonical_name():
    assert [bm.canonical_name(n) for n in ("CRUXEval-O", "REval_FO", "LCB-O")] == ["cruxeval", "reval", "livecodebench"]
    with pytest.raises(ValueError, match="unknown benchmark"):
        bm.canonical_name("humaneval")


def test_lcb_problem_adds_the_imports_it_uses():
    row = {
        "id": "sample_7",
        "function_name": "maxSum",
        "input": "nums = [1, 2]",
        "output": "3",
        "code": "def maxSum(nums: List[int]) -> int:\n    c = Counter(nums)\n    return sum(c)",
    }
    p = bm.lcb_problem(row)
    assert p.id == "sample_7/0" and p.entry == "maxSum" and p.input == "nums = [1, 2]"
    lines = p.code.split("\n")
    assert lines[0].startswith("from typing import List") and lines[1].startswith("from collections import")
    assert lines[2] == "def maxSum(nums: List[int]) -> int:"


def test_livecodebench_offline_is_a_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(bm.BenchmarkUnavailable, match="LiveCodeBench-O skipped"):
        bm.load_livecodebench()


@pytest.mark.needs_shared
def test_truth_file_round_trip(tmp_path, traced):
    bench = traced["reval"]
    bm.write_truth(tmp_path / "reval.jsonl", bench)
    back = bm.load_traced("reval", tmp_path / "reval.jsonl")
    assert [s.id for s in back.samples] == [s.id for s in bench.samples]
    assert back.samples[0].flow == bench.samples[0].flow and back.n_problems == 651
    assert back.samples[0].id == "DREval/0/0" and back.samples[0].problem.entry == "has_close_elements"

"""The funnel table: every stage's counts beside the paper's."""

from __future__ import annotations

from codethinker.data.funnel import PAPER, build_funnel, funnel_markdown

M = {
    "fetch": {
        "problems": 1890,
        "leetcode_duplicates": 1570,
        "benchmark_programs": {"cruxeval": 800, "livecodebench": 0, "reval": 154},
        "livecodebench": "skipped livecodebench/execution-v2: HF_HUB_OFFLINE is set",
    },
    "ast_filter": {"functions": 1472, "dropped": {"too_short": 236, "needs_helper_class": 158}},
    "gen_inputs": {
        "functions_available": 1472,
        "functions_in": 300,
        "backend": "mutate",
        "pairs_requested": 4500,
        "pairs": 4415,
        "short_of_n": 85,
        "rejected_lines": {},
    },
    "exec_filter": {"samples": 3860, "dropped": {"runtime_error": 469, "timeout": 4}},
    "dedup": {
        "benchmark_programs": 954,
        "model": "m",
        "threshold": 0.9,
        "samples": 3800,
        "functions": 290,
        "tests_per_function": 13.1,
        "dropped": {"similar_to_benchmark": 60},
    },
    "contra_sft": {
        "teacher": "template",
        "traces": 1900,
        "rejected": {},
        "sft": 1900,
        "grpo_train": 1800,
        "grpo_eval": 100,
        "sft_functions": 145,
        "grpo_functions": 145,
    },
}


def test_funnel_and_table():
    f = build_funnel(M, "default")
    counts = [s["count"] for s in f["steps"]]
    assert counts == [1890, 1472, 300, 4415, 3860, 3800, 1900]
    assert [s["paper"] for s in f["steps"]][1:6] == [
        PAPER["functions"],
        None,
        PAPER["pairs"],
        PAPER["triples"],
        PAPER["samples"],
    ]
    md = funnel_markdown({"default": f, "full": f})
    assert "## Profile `default`" in md and "## Profile `full`" in md
    assert "| 1 static filter |" in md and "too short 236, needs helper class 158" in md
    assert "1,673" in md and "25,095" in md and "10,132" in md and "9,142" in md and "14.04" in md
    assert "3,800 samples from 290 functions, 13.1 tests per function" in md
    assert "to any of 954 benchmark programs (cruxeval 800, livecodebench 0, reval 154)" in md
    assert "LiveCodeBench programs were not compared: skipped" in md
    assert "| ConTra extraction | template teacher, rejection sampling | – | 1,900 traces | none |" in md

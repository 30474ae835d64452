"""The LeetCodeReasoning funnel: every stage's counts side by side with the paper's (SPEC §2).

:func:`build_funnel` reads the stages' metrics dicts and returns ``metrics/funnel.json``'s
content; :func:`funnel_markdown` renders it as the table of ``docs/funnel.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PAPER", "build_funnel", "funnel_markdown"]

PAPER = {
    "functions": 1673,
    "pairs": 25095,
    "triples": 10132,
    "samples": 9142,
    "sample_functions": 651,
    "tests_per_function": 14.04,
}


def _reasons(d: dict[str, Any] | None) -> str:
    text = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sorted((d or {}).items(), key=lambda kv: -kv[1]) if v)
    return text or "none"


def _source_steps(
    fetch: dict[str, Any], ast_f: dict[str, Any], gen: dict[str, Any], profile: str
) -> list[dict[str, Any]]:
    """The funnel up to the generated inputs: source, static filter, profile slice, input generation."""
    return [
        {
            "step": "0 source",
            "rule": "LeetCodeDataset train v0.1.0 + v0.2.0, deduplicated by task_id",
            "paper": None,
            "count": fetch["problems"],
            "unit": "problems",
            "dropped": {"duplicate_task_id": fetch["leetcode_duplicates"]},
        },
        {
            "step": "1 static filter",
            "rule": "class Solution method -> plain function f, >= 5 lines after stripping",
            "paper": PAPER["functions"],
            "count": ast_f["functions"],
            "unit": "functions",
            "dropped": ast_f["dropped"],
        },
        {
            "step": "profile slice",
            "rule": f"gen_inputs.functions for profile '{profile}'",
            "paper": None,
            "count": gen["functions_in"],
            "unit": "functions",
            "dropped": {"outside_slice": gen["functions_available"] - gen["functions_in"]},
        },
        {
            "step": "2 input generation",
            "rule": f"{gen['backend']} backend, {gen['pairs_requested'] // max(gen['functions_in'], 1)} per function",
            "paper": PAPER["pairs"],
            "count": gen["pairs"],
            "unit": "pairs",
            "dropped": {"not_generated": gen["short_of_n"], **gen.get("rejected_lines", {})},
        },
    ]


def _filter_steps(
    fetch: dict[str, Any], ex: dict[str, Any], dd: dict[str, Any], sft: dict[str, Any]
) -> list[dict[str, Any]]:
    """The funnel from the generated pairs on: execution filter, similarity filter, ConTra extraction."""
    return [
        {
            "step": "3 execution filter",
            "rule": "sandbox + tracer, 2 s timeout; literal output, traceable",
            "paper": PAPER["triples"],
            "count": ex["samples"],
            "unit": "samples",
            "dropped": ex["dropped"],
        },
        {
            "step": "4 similarity filter",
            "rule": f"{dd['model']}, cosine >= {dd['threshold']} to any of {dd['benchmark_programs']} benchmark "
            f"programs ({', '.join(f'{k} {v}' for k, v in fetch['benchmark_programs'].items())})",
            "paper": PAPER["samples"],
            "count": dd["samples"],
            "unit": "samples",
            "dropped": dd["dropped"],
        },
        {
            "step": "ConTra extraction",
            "rule": f"{sft['teacher']} teacher, rejection sampling",
            "paper": None,
            "count": sft["traces"],
            "unit": "traces",
            "dropped": sft["rejected"],
        },
    ]


def build_funnel(m: dict[str, dict[str, Any]], profile: str) -> dict[str, Any]:
    """``m`` maps stage name -> that stage's metrics dict."""
    fetch, ast_f, gen, ex, dd, sft = (
        m[k] for k in ("fetch", "ast_filter", "gen_inputs", "exec_filter", "dedup", "contra_sft")
    )
    steps = _source_steps(fetch, ast_f, gen, profile) + _filter_steps(fetch, ex, dd, sft)
    return {
        "profile": profile,
        "livecodebench": fetch.get("livecodebench", ""),
        "steps": steps,
        "final": {
            "samples": dd["samples"],
            "functions": dd["functions"],
            "tests_per_function": dd["tests_per_function"],
            "paper_samples": PAPER["samples"],
            "paper_functions": PAPER["sample_functions"],
            "paper_tests_per_function": PAPER["tests_per_function"],
        },
        "split": {k: sft[k] for k in ("sft", "grpo_train", "grpo_eval", "sft_functions", "grpo_functions")},
    }


def funnel_markdown(funnels: dict[str, dict[str, Any]]) -> str:
    """One table per profile (``{"default": funnel, "full": funnel}``; either may be missing)."""
    out = [
        "# LeetCodeReasoning funnel",
        "",
        "Written by the `contra_sft` stage from `metrics/*.json` (`dvc repro`); the paper's counts",
        "are from its §2 (SPEC §2). The project's drop reasons are defined in `docs/data.md`.",
        "",
    ]
    for profile, f in funnels.items():
        fin = f["final"]
        out += [
            f"## Profile `{profile}`",
            "",
            "| step | rule | paper | this run | dropped (reason count) |",
            "|---|---|---:|---:|---|",
        ]
        for s in f["steps"]:
            paper = f"{s['paper']:,}" if s["paper"] is not None else "–"
            out.append(
                f"| {s['step']} | {s['rule']} | {paper} | {s['count']:,} {s['unit']} | {_reasons(s['dropped'])} |"
            )
        sp = f["split"]
        out += [
            "",
            f"Result: **{fin['samples']:,} samples from {fin['functions']:,} functions, "
            f"{fin['tests_per_function']} tests per function** (paper: {fin['paper_samples']:,} samples, "
            f"{fin['paper_functions']} functions, {fin['paper_tests_per_function']}).",
            f"Split by function: SFT {sp['sft']:,} traces ({sp['sft_functions']} functions); "
            f"GRPO {sp['grpo_train']:,} prompts + {sp['grpo_eval']:,} held out ({sp['grpo_functions']} functions).",
        ]
        if f.get("livecodebench", "").startswith("skipped"):
            out.append(f"LiveCodeBench programs were not compared: {f['livecodebench']}.")
        out.append("")
    return "\n".join(out)

"""Stage ast_filter (funnel step 1): LeetCode ``class Solution`` methods -> plain functions ``f``.

Run: ``python -m stages.ast_filter`` (or ``dvc repro ast_filter``). Reads ``params.yaml:
ast_filter`` and ``data/fetch/problems.jsonl``; writes ``data/ast_filter/functions.jsonl``
(code, parameters, type hints, example inputs) and ``metrics/ast_filter.json`` (drop reasons).
The rules are in :mod:`codethinker.data.extract`.
"""

from __future__ import annotations

from pathlib import Path

from codethinker.config import load_config
from codethinker.config.data import AstFilterConfig
from codethinker.data.extract import filter_problems
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.ops.stage import stage_main, stage_run

IN = Path("data/fetch/problems.jsonl")
OUT = Path("data/ast_filter/functions.jsonl")
METRICS = Path("metrics/ast_filter.json")
FIELDS = {"task_id": str, "entry_point": str, "preamble": str, "completion": str, "input_output": list}


def run(cfg: AstFilterConfig) -> dict:
    problems = read_jsonl(IN, FIELDS)
    kept, drops, bad_examples = filter_problems(problems, min_lines=cfg.min_lines)
    write_jsonl(OUT, kept)
    metrics = {
        "problems": len(problems),
        "functions": len(kept),
        "dropped": dict(drops.most_common()),
        "examples_kept": sum(len(f["examples"]) for f in kept),
        "examples_dropped": bad_examples,
        "recursive": sum(1 for f in kept if f["recursive"]),
    }
    write_json(METRICS, metrics)
    return metrics


@stage_main
def main() -> None:
    cfg = load_config(AstFilterConfig)
    with stage_run("ast_filter", cfg.as_dict()):
        metrics = run(cfg)
    print(f"ast_filter: {metrics['problems']} problems -> {metrics['functions']} functions; {metrics['dropped']}")


if __name__ == "__main__":
    main()

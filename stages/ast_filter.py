"""Stage ast_filter (funnel step 1): LeetCode ``class Solution`` methods -> plain functions ``f``.

Run: ``python -m stages.ast_filter --problems data/fetch/problems.jsonl --out data/ast_filter/functions.jsonl
--metrics metrics/ast_filter.json`` (its cmd in dvc.yaml: ``dvc repro ast_filter``). Reads ``params.yaml:
ast_filter`` and fetch's problems; writes the functions (code, parameters, type hints, example inputs) and the
metrics (drop reasons). The rules are in :mod:`codethinker.data.extract`.
"""

from __future__ import annotations

import argparse

from codethinker.config import load_config
from codethinker.config.data import AstFilterConfig
from codethinker.data.extract import filter_problems
from codethinker.data.io import read_jsonl, write_json, write_jsonl
from codethinker.ops.stage import path, stage_args, stage_main, stage_run

ARGS = stage_args(
    "ast_filter",
    __doc__,
    problems=path("fetch's LeetCode problems (JSONL)", rows=True),
    out=path("the plain functions f (JSONL)"),
    metrics=path("counts and drop reasons (JSON)"),
)
FIELDS = {"task_id": str, "entry_point": str, "preamble": str, "completion": str, "input_output": list}


def run(cfg: AstFilterConfig, paths: argparse.Namespace) -> dict:
    problems = read_jsonl(paths.problems, FIELDS)
    kept, drops, bad_examples = filter_problems(problems, min_lines=cfg.min_lines)
    write_jsonl(paths.out, kept)
    metrics = {
        "problems": len(problems),
        "functions": len(kept),
        "dropped": dict(drops.most_common()),
        "examples_kept": sum(len(f["examples"]) for f in kept),
        "examples_dropped": bad_examples,
        "recursive": sum(1 for f in kept if f["recursive"]),
    }
    write_json(paths.metrics, metrics)
    return metrics


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(AstFilterConfig)
    with stage_run("ast_filter", cfg.as_dict()):
        metrics = run(cfg, paths)
    print(f"ast_filter: {metrics['problems']} problems -> {metrics['functions']} functions; {metrics['dropped']}")


if __name__ == "__main__":
    main()
